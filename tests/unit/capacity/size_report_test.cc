// The `size` report (capacity/size_report.h): totals that do not fit in 64 bits
// (issue 9's minor defect "saturated totals print as 16.0 EiB"), and the layout
// v2 figures of issue 10: the contract version, the 1x/4x/16x/64x activity table
// and the --activity totals, in text and JSON.
#include "capacity/size_report.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bloom/sizing.h"
#include "capacity/activity.h"
#include "config/config.h"
#include "support/doc_tables.h"

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

SizeReportInput InputFor(int64_t n, uint32_t stages, uint64_t users, uint32_t version = 3) {
  FilterConfig f;
  f.items_per_bucket = n;
  f.stages = stages;
  f.layout_version = version;
  StatusOr<SizeReportInput> in = SizeReportInputFromConfig(f, users);
  REQUIRE(in.ok());
  return *in;
}

// The value column of the line that starts with `label` (after the label's padding).
std::string ReportValue(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  " + label + "  ", 0) != 0) continue;
    return line.substr(line.find_first_not_of(' ', 2 + label.size()));
  }
  return "";
}

TEST_CASE("Size report names the configured contract version", "[bloom][size]") {
  // filter.layout_version 3 (the default) is contract v3 with any number of
  // stages; under layout_version 2, more than one stage is v2 and one is v1.
  const std::string v3 = FormatSizeReport(InputFor(200, 8, 1000));
  CHECK(v3.rfind("exposure-filter sizing (bit-layout contract v3)\n", 0) == 0);
  CHECK_THAT(ReportValue(v3, "stage limit"), Catch::StartsWith("8 stages (growth 2, k_step 2"));
  CHECK(SizeReportJson(InputFor(200, 8, 1000))["contract_version"] == 3);
  CHECK(SizeReportJson(InputFor(200, 8, 1000))["stage_limit"] == 8);
  CHECK(SizeReportJson(InputFor(200, 1, 1000))["contract_version"] == 3);

  const std::string v2 = FormatSizeReport(InputFor(200, 8, 1000, 2));
  CHECK(v2.rfind("exposure-filter sizing (bit-layout contract v2)\n", 0) == 0);
  CHECK(SizeReportJson(InputFor(200, 8, 1000, 2))["contract_version"] == 2);
  // v2 and v3 have the same stage table, so the same bytes (docs/CAPACITY.md).
  CHECK(SizeReportJson(InputFor(200, 8, 1000, 2))["stage_table"] ==
        SizeReportJson(InputFor(200, 8, 1000))["stage_table"]);
  CHECK(SizeReportJson(InputFor(200, 8, 1000, 2))["activity_table"] ==
        SizeReportJson(InputFor(200, 8, 1000))["activity_table"]);

  const std::string v1 = FormatSizeReport(InputFor(200, 1, 1000, 2));
  CHECK(v1.rfind("exposure-filter sizing (bit-layout contract v1)\n", 0) == 0);
  CHECK(SizeReportJson(InputFor(200, 1, 1000, 2))["contract_version"] == 1);
  CHECK(SizeReportJson(InputFor(200, 1, 1000, 2))["growth"].is_null());
}

TEST_CASE("Size report with stages = 1 reproduces the v1 report's figures exactly",
          "[bloom][size]") {
  for (int64_t n : {40, 200, 5000}) {
    INFO("n=" << n);
    const SizeReportInput in = InputFor(n, 1, 123456, 2);  // layout_version 2: one stage is v1
    const StatusOr<Sizing> s = ComputeSizing(n, 0.01, 30 * kDay, kDay);
    REQUIRE(s.ok());
    const nlohmann::json v1 = SizeReportJson(*s, n, 0.01, 30 * kDay, kDay, 123456);
    const nlohmann::json now = SizeReportJson(in);
    for (const auto& [key, value] : v1.items()) {
      INFO("key " << key);
      CHECK(now.at(key) == value);
    }
    CHECK(FormatSizeReport(in) == FormatSizeReport(*s, n, 0.01, 30 * kDay, kDay, 123456));
  }
}

TEST_CASE("Size report activity table: 1x is v1's figures and heavier users take more stages",
          "[bloom][size]") {
  const int64_t n = 200;
  const SizeReportInput in = InputFor(n, 8, 1000);
  const Sizing& s = in.sizing;
  const nlohmann::json j = SizeReportJson(in);
  INFO(j.dump(2));
  const nlohmann::json& table = j.at("activity_table");
  REQUIRE(table.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(table[i]["multiple"] == kActivityTableMultiples[i]);
  // 1x: one stage, the v1 key, the v1 expected FPR.
  CHECK(table[0]["stages"] == 1);
  CHECK(table[0]["bytes_per_key"] == (s.m + 7) / 8);
  const double v1 = std::pow(1 - std::exp(-static_cast<double>(s.k) * n / s.m), s.k);
  CHECK(table[0]["bucket_fpr"].get<double>() == Approx(v1).epsilon(1e-12));
  CHECK(table[0]["window_fpr"].get<double>() == Approx(s.expected_window_fpr).epsilon(1e-9));
  for (size_t i = 1; i < 4; ++i) {
    INFO("row " << i);
    CHECK(table[i]["stages"].get<int>() > table[i - 1]["stages"].get<int>());
    CHECK(table[i]["bytes_per_key"].get<uint64_t>() >
          table[i - 1]["bytes_per_key"].get<uint64_t>());
    CHECK(table[i]["at_limit"] == false);
    // Bytes: the end of the last stage used, byte-aligned.
    const Stage& last = in.stages[table[i]["stages"].get<size_t>() - 1];
    CHECK(table[i]["bytes_per_key"] == last.offset / 8 + (last.m + 7) / 8);
    const double f = table[i]["bucket_fpr"].get<double>();
    CHECK(f < 2 * v1);
    CHECK(table[i]["window_fpr"].get<double>() ==
          Approx(1 - std::pow(1 - f, s.buckets)).epsilon(1e-9));
  }

  // The same rows in the text, with the value column of the other lines.
  const std::string text = FormatSizeReport(in);
  INFO(text);
  const std::string row = ReportValue(text, "64x items_per_bucket");
  CHECK_THAT(row, Catch::StartsWith(table[3]["stages"].dump() + " of 8"));
  CHECK(ReportValue(text, "1x items_per_bucket").find(" 419 ") != std::string::npos);
  CHECK_THAT(text, Catch::Contains("* Ideal model"));
}

TEST_CASE("Size report with stages = 1: the FPR explodes at 4x like (1-e^(-k 4n/m))^k",
          "[bloom][size]") {
  const int64_t n = 200;
  const SizeReportInput in = InputFor(n, 1, 1000);
  const nlohmann::json table = SizeReportJson(in).at("activity_table");
  for (size_t i = 0; i < 4; ++i) {
    const double x = kActivityTableMultiples[i];
    INFO("multiple " << x);
    CHECK(table[i]["stages"] == 1);
    CHECK(table[i]["at_limit"] == (x > 1));
    CHECK(table[i]["items_not_written"] == 0);  // one stage: every item written, as v1
    CHECK(table[i]["bytes_per_key"] == (in.sizing.m + 7) / 8);
    const double expected = std::pow(
        1 - std::exp(-static_cast<double>(in.sizing.k) * x * n / in.sizing.m), in.sizing.k);
    CHECK(table[i]["bucket_fpr"].get<double>() == Approx(expected).epsilon(1e-12));
  }
  CHECK(table[1]["bucket_fpr"].get<double>() > 1000 * table[0]["bucket_fpr"].get<double>());
  CHECK_THAT(FormatSizeReport(in),
             Catch::Contains("(past the stage limit: one stage, every item written)"));
}

TEST_CASE("Size report past the stage limit: items not written, the FPR stays bounded",
          "[bloom][size]") {
  const int64_t n = 200;
  const SizeReportInput in = InputFor(n, 3, 1000);  // the limit at about 7x
  const Sizing& s = in.sizing;
  const double limit = StageCapacities(in.stages).back() / n;
  const double v1 = std::pow(1 - std::exp(-static_cast<double>(s.k) * n / s.m), s.k);
  const nlohmann::json j = SizeReportJson(in);
  INFO(j.dump(2));
  const nlohmann::json& table = j.at("activity_table");  // 1x, 4x, 16x, 64x
  REQUIRE(table.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    const double x = kActivityTableMultiples[i];
    INFO("multiple " << x);
    CHECK(table[i]["at_limit"] == (x > limit));
    const double not_written = x > limit ? (x - limit) * n : 0;
    CHECK(table[i]["items_not_written"].get<double>() ==
          Approx(not_written).epsilon(1e-9).margin(1e-6));
    CHECK(table[i]["share_not_written"].get<double>() ==
          Approx(not_written / (x * n)).epsilon(1e-9).margin(1e-12));
    CHECK(table[i]["bucket_fpr"].get<double>() < 2 * v1);
  }
  // Past the limit the key is the one at the limit: its bytes and its rate.
  CHECK(table[3]["stages"] == 3);
  CHECK(table[3]["bytes_per_key"] == table[2]["bytes_per_key"]);
  CHECK(table[3]["bucket_fpr"].get<double>() ==
        Approx(table[2]["bucket_fpr"].get<double>()).epsilon(1e-12));

  const std::string text = FormatSizeReport(in);
  INFO(text);
  const std::string row = ReportValue(text, "64x items_per_bucket");
  const std::string share =
      fmt::format("{:.3g}%", table[3]["share_not_written"].get<double>() * 100);
  CHECK_THAT(row,
             Catch::EndsWith("(past the stage limit: " + share + " of its items not written)"));
  CHECK_THAT(ReportValue(text, "4x items_per_bucket"), !Catch::Contains("past the stage limit"));
}

TEST_CASE("Size report activity: 100% at 1x equals the 1x totals, a mix adds its heavy users",
          "[bloom][size]") {
  SizeReportInput in = InputFor(200, 8, 1000000);
  const nlohmann::json plain = SizeReportJson(in);
  // Without --activity the text has no activity section; JSON shows everybody at 1x.
  CHECK(FormatSizeReport(in).find("\nActivity ") == std::string::npos);
  CHECK(plain["activity"]["spec"] == "1:100");
  CHECK(plain["activity"]["total_bytes"] == plain["total_bytes"]);
  CHECK(plain["activity"]["total_bytes_with_key_overhead"] ==
        plain["total_bytes_with_key_overhead"]);

  StatusOr<Activity> all1 = ParseActivity("1:100");
  REQUIRE(all1.ok());
  in.activity = *all1;
  in.activity_given = true;
  const nlohmann::json given = SizeReportJson(in);
  CHECK(given["activity"]["total_bytes"] == plain["total_bytes"]);
  CHECK(given["activity"]["total_bytes_with_key_overhead"] ==
        plain["total_bytes_with_key_overhead"]);
  CHECK(given["activity"]["users_past_stage0"] == 0);
  const std::string text = FormatSizeReport(in);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("\nActivity 1:100 "));
  CHECK(ReportDigits(text.substr(text.find("\nActivity ")), "total for all users") ==
        ReportDigits(text, "total for all users"));

  StatusOr<Activity> mix = ParseActivity("0.5:60,1:25,4:10,16:4,64:1");
  REQUIRE(mix.ok());
  in.activity = *mix;
  const nlohmann::json j = SizeReportJson(in);
  INFO(j["activity"].dump(2));
  const nlohmann::json table = j["activity_table"];  // 1x, 4x, 16x, 64x
  const uint64_t b = in.sizing.buckets;
  // 0.5x and 1x users have the 1x key; 4x, 16x and 64x those of the table.
  const uint64_t expected = b * (850000 * table[0]["bytes_per_key"].get<uint64_t>() +
                                 100000 * table[1]["bytes_per_key"].get<uint64_t>() +
                                 40000 * table[2]["bytes_per_key"].get<uint64_t>() +
                                 10000 * table[3]["bytes_per_key"].get<uint64_t>());
  CHECK(j["activity"]["total_bytes"] == expected);
  CHECK(j["activity"]["total_bytes_with_key_overhead"] ==
        expected + b * 1000000 * kRedisKeyOverheadBytes);
  CHECK(j["activity"]["users_past_stage0"] == 150000);
  CHECK(j["activity"]["share_past_stage0"].get<double>() == Approx(0.15));
  CHECK(j["activity"]["users_at_limit"] == 0);
  CHECK(j["activity"]["classes"].size() == 5);
  // The 1x figures above it do not change with the distribution.
  for (const char* key : {"total_bytes", "total_bytes_with_key_overhead", "m", "k"}) {
    CHECK(j[key] == plain[key]);
  }
}

TEST_CASE("Size report text: every label-value line keeps one value column", "[bloom][size]") {
  SizeReportInput in = InputFor(40, 8, 10000000);
  StatusOr<Activity> z = ParseActivity("zipf:1.1");
  REQUIRE(z.ok());
  in.activity = *z;
  in.activity_given = true;
  const std::string text = FormatSizeReport(in);
  INFO(text);
  std::istringstream lines(text);
  std::string line;
  int checked = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  ", 0) != 0) continue;
    CHECK(line.find_first_not_of(' ', line.find("  ", 2)) == 30);
    ++checked;
  }
  CHECK(checked > 20);
  CHECK_THAT(text, Catch::Contains("users at the stage limit"));
  CHECK_THAT(text, Catch::Contains("users past stage 0"));
}

}  // namespace
}  // namespace ef

namespace ef {

// docs/CAPACITY.md section 1's memory table: v3 and the v4 estimate (activity
// persisting) for 10M and 100M users in the three scenarios, as `size` prints them.
TEST_CASE("Size report: CAPACITY.md's memory table, v3 and v4, is what size prints",
          "[bloom][size][v4]") {
  const auto rows =
      test::DocTableRows("CAPACITY.md", "## 1. Filter bytes: `exposure-filter size`", 1);
  REQUIRE(rows.size() == 6);
  for (const auto& row : rows) {
    REQUIRE(row.size() == 8);
    INFO(row[0] << " " << row[1]);
    SizeReportInput in = InputFor(200, 8, row[0] == "10M" ? 10000000 : 100000000);
    if (row[1] != "flat") {
      auto a = ParseActivity(row[1] == "mix" ? "0.5:60,1:25,4:10,16:4,64:1" : "zipf:1");
      REQUIRE(a.ok());
      in.activity = *a;
      in.activity_given = true;
    }
    const nlohmann::json j = SizeReportJson(in);
    CHECK(row[3] == j["activity"]["total_human"]);
    CHECK(row[4] == j["activity"]["total_with_key_overhead_human"]);
    const nlohmann::json& v4 = j.at("v4_persistent").at("activity");
    CHECK(row[5] == v4["total_human"]);
    CHECK(row[6] == v4["total_with_key_overhead_human"]);
    CHECK(row[7] == fmt::format("{:.2f}", v4["total_bytes"].get<double>() /
                                              j["activity"]["total_bytes"].get<double>()));
  }
  // The v4 block quoted there is the flat scenario's.
  const std::string text = FormatSizeReport(InputFor(200, 8, 10000000));
  const std::string section =
      test::DocSection("CAPACITY.md", "## 1. Filter bytes: `exposure-filter size`");
  const size_t at = text.find("Layout v4");
  REQUIRE(at != std::string::npos);
  const std::string block = text.substr(at, text.find("  total for all users", at) - at);
  CHECK(section.find(block) != std::string::npos);
}

}  // namespace ef
