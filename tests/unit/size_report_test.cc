// The `size` report's totals (bloom/size_report.h) when they do not fit in 64
// bits: issue 9's minor defect "saturated totals print as 16.0 EiB".
#include "bloom/size_report.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bloom/sizing.h"

namespace ef {
namespace {

using U128 = unsigned __int128;
constexpr int64_t kDay = 86400;

std::string Decimal(U128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v > 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return out;
}

// The digits of "  <label>   1,234 bytes (...)" with the commas removed.
std::string ReportDigits(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t pos = line.find_first_not_of(' ');
    if (pos == std::string::npos || line.compare(pos, label.size(), label) != 0) continue;
    std::string digits;
    size_t i = line.find_first_of("0123456789", pos + label.size());
    for (; i < line.size() && (std::isdigit(static_cast<unsigned char>(line[i])) || line[i] == ',');
         ++i) {
      if (line[i] != ',') digits.push_back(line[i]);
    }
    return digits;
  }
  return "";
}

// True when `human` ("203.0 ZiB") is `exact` bytes in the largest binary unit
// that keeps it at least 1 (or in YiB), rounded to one decimal.
bool HumanMatches(const std::string& human, long double exact) {
  std::istringstream in(human);
  long double value = 0;
  std::string unit;
  in >> value >> unit;
  const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  for (int i = 0; i < 9; ++i) {
    if (unit != units[i]) continue;
    const long double in_unit = exact / std::pow(1024.0L, i);
    const bool right_unit = in_unit >= 1 && (in_unit < 1024 || i == 8);
    return right_unit && std::fabs(value - in_unit) <= 0.05L + 1e-9L;
  }
  return false;
}

struct Case {
  int64_t n;
  double fpr;
  int64_t window, bucket;
  uint64_t users;
};

TEST_CASE("Size report totals beyond 64 bits are exact, never saturated at 2^64 - 1",
          "[bloom][size]") {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const Case cases[] = {
      {200, 0.01, 30 * kDay, kDay, max},                     // ~203 ZiB
      {200, 0.01, 30 * kDay, kDay, max / 12989 + 1},         // just over 2^64 bytes
      {100'000'000, 0.001, 3650 * kDay, kDay, 100'000'000},  // big keys, many buckets
  };
  for (const Case& c : cases) {
    const StatusOr<Sizing> s = ComputeSizing(c.n, c.fpr, c.window, c.bucket);
    REQUIRE(s.ok());
    const U128 total = U128{s->bytes_per_bucket} * s->buckets * c.users;
    const U128 with_overhead =
        (U128{s->bytes_per_bucket} + kRedisKeyOverheadBytes) * s->buckets * c.users;
    INFO("n=" << c.n << " B=" << s->buckets << " bytes/key=" << s->bytes_per_bucket
              << " users=" << c.users << " -> total " << Decimal(total));
    REQUIRE(total > U128{max});  // the case is one that overflows 64 bits

    const std::string text = FormatSizeReport(*s, c.n, c.fpr, c.window, c.bucket, c.users);
    INFO(text);
    CHECK(ReportDigits(text, "total for all users") == Decimal(total));
    CHECK(ReportDigits(text, "with Redis key overhead") == Decimal(with_overhead));

    nlohmann::json j = SizeReportJson(*s, c.n, c.fpr, c.window, c.bucket, c.users);
    INFO(j.dump(2));
    // JSON numbers here are 64-bit: a total that does not fit is null, never a
    // wrong number, and the human text still gives its size.
    CHECK(j["total_bytes"].is_null());
    CHECK(j["total_bytes_with_key_overhead"].is_null());
    CHECK(j["total_bytes_exceeds_64_bits"] == true);
    CHECK(HumanMatches(j["total_human"], static_cast<long double>(total)));
    CHECK(
        HumanMatches(j["total_with_key_overhead_human"], static_cast<long double>(with_overhead)));
  }
}

TEST_CASE("Size report totals that fit in 64 bits stay JSON numbers", "[bloom][size]") {
  const StatusOr<Sizing> s = ComputeSizing(200, 0.01, 30 * kDay, kDay);
  REQUIRE(s.ok());
  // The largest user count whose total (without overhead) still fits.
  const uint64_t users = std::numeric_limits<uint64_t>::max() / s->bytes_per_window;
  nlohmann::json j = SizeReportJson(*s, 200, 0.01, 30 * kDay, kDay, users);
  INFO(j.dump(2));
  REQUIRE(j["total_bytes"].is_number_unsigned());
  CHECK(j["total_bytes"].get<uint64_t>() == s->bytes_per_window * users);
  // With the key overhead the same count does not fit.
  CHECK(j["total_bytes_with_key_overhead"].is_null());
  CHECK(j["total_bytes_exceeds_64_bits"] == true);

  nlohmann::json small = SizeReportJson(*s, 200, 0.01, 30 * kDay, kDay, 1000);
  CHECK(small["total_bytes"] == s->bytes_per_window * 1000);
  CHECK(small["total_bytes_exceeds_64_bits"] == false);
}

}  // namespace
}  // namespace ef
