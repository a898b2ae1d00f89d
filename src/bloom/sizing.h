// Contract v1, rule 5. Per-bucket sizing from the window FPR target:
//   B   = window / bucket + 1         (buckets a query checks)
//   p_b = 1 - (1 - p)^(1/B)
//   m   = ceil(-n_b * ln p_b / (ln 2)^2),  k = round(m / n_b * ln 2), k >= 1, m < 2^32.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace ef {

struct Sizing {
  uint32_t m = 0;             // bits per bucket key
  uint32_t k = 0;             // hash positions per item
  uint32_t buckets = 0;       // B
  double bucket_fpr = 0;      // p_b (target)
  double expected_bucket_fpr = 0;  // (1 - e^{-k n/m})^k with the rounded m, k
  double expected_window_fpr = 0;  // 1 - (1 - expected_bucket_fpr)^B
  uint64_t bytes_per_bucket = 0;   // ceil(m / 8): a full Redis string
  uint64_t bytes_per_window = 0;   // bytes_per_bucket * B
};

// Errors (kInvalidArgument) name the offending input: n <= 0, p not in (0,1),
// window not a positive multiple of bucket, m >= 2^32.
StatusOr<Sizing> ComputeSizing(int64_t items_per_bucket, double fpr, int64_t window_seconds,
                               int64_t bucket_seconds);

}  // namespace ef
