#include "bloom/size_report.h"

#include <fmt/format.h>

#include <iterator>
#include <limits>
#include <string_view>

#include "common/duration.h"

namespace ef {
namespace {

// Totals in 128 bits: bytes per key < 2^29 + 64, B < 2^32 and users < 2^64,
// so every product is below 2^126 and none can overflow or saturate.
using U128 = unsigned __int128;
constexpr U128 kU64Max = std::numeric_limits<uint64_t>::max();

struct Totals {
  uint64_t per_bucket;
  uint64_t per_window;
  U128 total;
  U128 total_with_overhead;
};

Totals ComputeTotals(const Sizing& s, uint64_t users) {
  Totals t;
  t.per_bucket = s.bytes_per_bucket;
  t.per_window = s.bytes_per_window;
  t.total = U128{t.per_window} * users;
  t.total_with_overhead = (U128{t.per_bucket} + kRedisKeyOverheadBytes) * s.buckets * users;
  return t;
}

std::string Decimal(U128 v) {
  if (v == 0) return "0";
  std::string out;
  for (; v > 0; v /= 10) out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
  return std::string(out.rbegin(), out.rend());
}

// 1234567 -> "1,234,567": totals run to 12+ digits and must be readable at a glance.
std::string Grouped(U128 v) {
  const std::string digits = Decimal(v);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string BytesHuman(U128 bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB", "GiB", "TiB",
                                           "PiB", "EiB", "ZiB", "YiB"};
  if (bytes < 1024) return fmt::format("{} B", static_cast<uint64_t>(bytes));
  long double v = static_cast<long double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0L && unit + 1 < std::size(kUnits)) {
    v /= 1024.0L;
    ++unit;
  }
  return fmt::format("{:.1f} {}", static_cast<double>(v), kUnits[unit]);
}

// A JSON number when the total fits the 64 bits JSON readers can hold, else null.
nlohmann::json JsonBytes(U128 bytes) {
  return bytes <= kU64Max ? nlohmann::json(static_cast<uint64_t>(bytes)) : nlohmann::json(nullptr);
}

// Durations come from validated config, but the report must not overflow on
// any input.
std::string SecondsText(int64_t seconds) {
  if (seconds > std::numeric_limits<int64_t>::max() / 1000 || seconds < 0) {
    return std::to_string(seconds) + "s";
  }
  return FormatDurationMs(seconds * 1000);
}

std::string Percent(double p) { return fmt::format("{:.4g}%", p * 100.0); }

}  // namespace

std::string FormatBytesHuman(uint64_t bytes) { return BytesHuman(bytes); }

std::string FormatSizeReport(const Sizing& s, int64_t items_per_bucket, double fpr,
                             int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  const Totals t = ComputeTotals(s, users);
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "  {:<28}{}\n", label, value);
  };
  out += "exposure-filter sizing (bit-layout contract v1)\n\nInputs\n";
  line("items per user per bucket", Grouped(static_cast<uint64_t>(items_per_bucket)));
  line("target FPR over window", fmt::format("{} ({:g})", Percent(fpr), fpr));
  line("window", SecondsText(window_seconds));
  line("bucket", SecondsText(bucket_seconds));
  line("users", Grouped(users));
  out += "\nLayout\n";
  line("buckets per query (B)", fmt::format("{}  (window / bucket + 1)", s.buckets));
  line("m, bits per bucket key", Grouped(s.m));
  line("k, hash positions", std::to_string(s.k));
  line("target FPR per bucket", fmt::format("{} ({:.6g})", Percent(s.bucket_fpr), s.bucket_fpr));
  line("expected FPR per bucket",
       fmt::format("{} ({:.6g})", Percent(s.expected_bucket_fpr), s.expected_bucket_fpr));
  line("expected FPR over window",
       fmt::format("{} ({:.6g})", Percent(s.expected_window_fpr), s.expected_window_fpr));
  out += "\nMemory (every user active in every bucket: an upper bound)\n";
  line("per user per bucket",
       fmt::format("{} bytes ({})", Grouped(t.per_bucket), FormatBytesHuman(t.per_bucket)));
  line("per user per window",
       fmt::format("{} bytes ({})", Grouped(t.per_window), FormatBytesHuman(t.per_window)));
  line("total for all users", fmt::format("{} bytes ({})", Grouped(t.total), BytesHuman(t.total)));
  line("with Redis key overhead", fmt::format("{} bytes ({})", Grouped(t.total_with_overhead),
                                              BytesHuman(t.total_with_overhead)));
  fmt::format_to(std::back_inserter(out),
                 "\nRedis adds ~50-90 bytes of overhead per key (estimated here as {} bytes "
                 "x {} keys per user).\n",
                 kRedisKeyOverheadBytes, s.buckets);
  return out;
}

nlohmann::json SizeReportJson(const Sizing& s, int64_t items_per_bucket, double fpr,
                              int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  const Totals t = ComputeTotals(s, users);
  return nlohmann::json{
      {"contract_version", 1},
      {"items_per_bucket", items_per_bucket},
      {"fpr", fpr},
      {"window_seconds", window_seconds},
      {"bucket_seconds", bucket_seconds},
      {"window", SecondsText(window_seconds)},
      {"bucket", SecondsText(bucket_seconds)},
      {"users", users},
      {"m", s.m},
      {"k", s.k},
      {"buckets", s.buckets},
      {"bucket_fpr_target", s.bucket_fpr},
      {"bucket_fpr_expected", s.expected_bucket_fpr},
      {"window_fpr_expected", s.expected_window_fpr},
      {"bytes_per_user_per_bucket", t.per_bucket},
      {"bytes_per_user_per_window", t.per_window},
      {"total_bytes", JsonBytes(t.total)},
      {"total_human", BytesHuman(t.total)},
      {"redis_key_overhead_bytes_per_key", kRedisKeyOverheadBytes},
      {"total_bytes_with_key_overhead", JsonBytes(t.total_with_overhead)},
      {"total_with_key_overhead_human", BytesHuman(t.total_with_overhead)},
      {"total_bytes_exceeds_64_bits", t.total_with_overhead > kU64Max},
  };
}

}  // namespace ef
