#include "bloom/sizing.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace ef {

StatusOr<Sizing> ComputeSizing(int64_t items_per_bucket, double fpr, int64_t window_seconds,
                               int64_t bucket_seconds) {
  if (items_per_bucket <= 0) {
    return InvalidArgument("items_per_bucket must be positive, got " +
                           std::to_string(items_per_bucket));
  }
  // Written as a negated range test so that NaN is rejected too.
  if (!(fpr > 0.0 && fpr < 1.0)) {
    return InvalidArgument("fpr must be strictly between 0 and 1, got " + std::to_string(fpr));
  }
  if (bucket_seconds <= 0 || window_seconds <= 0 || window_seconds % bucket_seconds != 0) {
    return InvalidArgument("window (" + std::to_string(window_seconds) +
                           "s) must be a positive multiple of bucket (" +
                           std::to_string(bucket_seconds) + "s)");
  }
  const int64_t buckets = window_seconds / bucket_seconds + 1;
  if (buckets > int64_t{UINT32_MAX}) {
    return InvalidArgument("window (" + std::to_string(window_seconds) + "s) / bucket (" +
                           std::to_string(bucket_seconds) + "s) gives too many buckets");
  }

  // long double and log1p/expm1: 1 - (1-p)^(1/B) cancels badly in double for
  // large B, and m is a ceil(), so a last-digit error could change it.
  const long double n = static_cast<long double>(items_per_bucket);
  const long double big_b = static_cast<long double>(buckets);
  const long double ln2 = std::log(2.0L);
  const long double p_b = -std::expm1(std::log1p(-static_cast<long double>(fpr)) / big_b);
  const long double m_real = std::ceil(-n * std::log(p_b) / (ln2 * ln2));
  if (!(m_real < 4294967296.0L)) {
    return InvalidArgument("m = " + std::to_string(static_cast<double>(m_real)) +
                           " bits per bucket key is not below 2^32; use fewer "
                           "items_per_bucket (e.g. a shorter bucket) or a higher fpr");
  }
  Sizing s;
  s.m = static_cast<uint32_t>(m_real);
  s.buckets = static_cast<uint32_t>(buckets);
  s.bucket_fpr = static_cast<double>(p_b);
  const long double k_real = std::round(static_cast<long double>(s.m) / n * ln2);
  s.k = k_real < 1.0L ? 1u : static_cast<uint32_t>(k_real);

  const long double k = s.k;
  const long double m = s.m;
  const long double expected_b = std::pow(-std::expm1(-k * n / m), k);
  s.expected_bucket_fpr = static_cast<double>(expected_b);
  s.expected_window_fpr = static_cast<double>(-std::expm1(big_b * std::log1p(-expected_b)));
  s.bytes_per_bucket = (uint64_t{s.m} + 7) / 8;
  s.bytes_per_window = s.bytes_per_bucket * s.buckets;
  return s;
}

}  // namespace ef
