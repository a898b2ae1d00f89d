// Durations in config and CLI (common/duration.h).
#include "common/duration.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace ef {
namespace {

int64_t Ms(std::string_view text) {
  const StatusOr<int64_t> r = ParseDurationMs(text);
  INFO("text \"" << text << "\": " << r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

std::string Error(std::string_view text) {
  const StatusOr<int64_t> r = ParseDurationMs(text);
  INFO("text \"" << text << "\"");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST_CASE("ParseDurationMs: every unit", "[duration]") {
  CHECK(Ms("500ms") == 500);
  CHECK(Ms("10s") == 10000);
  CHECK(Ms("90m") == 5400000);
  CHECK(Ms("2h") == 7200000);
  CHECK(Ms("30d") == 2592000000);
  CHECK(Ms("1d") == 86400000);
  CHECK(Ms("0ms") == 0);
  CHECK(Ms("0d") == 0);
  CHECK(Ms("007s") == 7000);
}

TEST_CASE("ParseDurationMs: a bare integer is seconds", "[duration]") {
  CHECK(Ms("0") == 0);
  CHECK(Ms("1") == 1000);
  CHECK(Ms("3600") == 3600000);
}

TEST_CASE("ParseDurationMs: errors name the text", "[duration]") {
  CHECK_THAT(Error(""), Catch::Contains("empty"));
  CHECK_THAT(Error("-1s"), Catch::Contains("negative") && Catch::Contains("\"-1s\""));
  CHECK_THAT(Error("-1"), Catch::Contains("negative"));
  CHECK_THAT(Error("10x"), Catch::Contains("unknown unit") && Catch::Contains("\"x\""));
  CHECK_THAT(Error("10S"), Catch::Contains("unknown unit"));
  CHECK_THAT(Error("10sec"), Catch::Contains("unknown unit"));
  CHECK_THAT(Error("1.5s"), Catch::Contains("1.5s"));
  CHECK_THAT(Error("s"), Catch::Contains("integer"));
  CHECK_THAT(Error("ms"), Catch::Contains("integer"));
  CHECK_THAT(Error("+5s"), Catch::Contains("integer"));
  CHECK_THAT(Error(" 5s"), Catch::Contains("integer"));
  CHECK_THAT(Error("5s "), Catch::Contains("unknown unit"));
  CHECK_THAT(Error("5 s"), Catch::Contains("unknown unit"));
  CHECK_THAT(Error("0x10s"), Catch::Contains("unknown unit"));
}

TEST_CASE("ParseDurationMs: overflow of the number or of the product", "[duration]") {
  CHECK_THAT(Error("99999999999999999999"), Catch::Contains("too large"));
  CHECK_THAT(Error("99999999999999999999ms"), Catch::Contains("too large"));
  // INT64_MAX ms is fine; one more day's worth of multiplication is not.
  CHECK(Ms("9223372036854775807ms") == std::numeric_limits<int64_t>::max());
  CHECK_THAT(Error("9223372036854775807s"), Catch::Contains("too large"));
  CHECK(Ms("9223372036854775s") == 9223372036854775000);
  CHECK_THAT(Error("9223372036854776s"), Catch::Contains("too large"));
  CHECK(Ms("106751991167d") == 106751991167 * int64_t{86400000});
  CHECK_THAT(Error("106751991168d"), Catch::Contains("too large"));
}

TEST_CASE("FormatDurationMs: shortest exact form", "[duration]") {
  CHECK(FormatDurationMs(86400000) == "1d");
  CHECK(FormatDurationMs(30 * int64_t{86400000}) == "30d");
  CHECK(FormatDurationMs(5400000) == "90m");
  CHECK(FormatDurationMs(3600000) == "1h");
  CHECK(FormatDurationMs(90000000) == "25h");
  CHECK(FormatDurationMs(1500) == "1500ms");
  CHECK(FormatDurationMs(10000) == "10s");
  CHECK(FormatDurationMs(1) == "1ms");
  CHECK(FormatDurationMs(0) == "0s");
  CHECK(FormatDurationMs(-10000) == "-10s");
  CHECK(FormatDurationMs(std::numeric_limits<int64_t>::min()) == "-9223372036854775808ms");
  CHECK(FormatDurationMs(std::numeric_limits<int64_t>::max()) == "9223372036854775807ms");
}

TEST_CASE("Format then Parse round-trips", "[duration]") {
  const int64_t fixed[] = {0,        1,        999,        1000,
                           1001,     59999,    60000,      3600000,
                           86400000, 86400001, 2592000000, std::numeric_limits<int64_t>::max()};
  for (int64_t ms : fixed) CHECK(Ms(FormatDurationMs(ms)) == ms);
  std::mt19937_64 rng(1);
  const int64_t scales[] = {1, 1000, 60000, 3600000, 86400000};
  for (int i = 0; i < 5000; ++i) {
    const int64_t scale = scales[i % 5];
    const int64_t ms = static_cast<int64_t>(rng() % 1000000) * scale;
    CHECK(Ms(FormatDurationMs(ms)) == ms);
  }
  // And Parse then Format gives the canonical text.
  CHECK(FormatDurationMs(Ms("60s")) == "1m");
  CHECK(FormatDurationMs(Ms("24h")) == "1d");
  CHECK(FormatDurationMs(Ms("86400")) == "1d");
  CHECK(FormatDurationMs(Ms("1000ms")) == "1s");
}

}  // namespace
}  // namespace ef

namespace ef {

TEST_CASE("ParseDurationOptionMs: durations, and plain seconds with a fraction", "[duration]") {
  CHECK(*ParseDurationOptionMs("3s") == 3000);
  CHECK(*ParseDurationOptionMs("3") == 3000);
  CHECK(*ParseDurationOptionMs("250ms") == 250);
  CHECK(*ParseDurationOptionMs("0.2") == 200);
  CHECK(*ParseDurationOptionMs("1.5") == 1500);
  CHECK(*ParseDurationOptionMs("0.0015") == 1);  // past the third decimal ignored
  for (const char* bad : {"", ".5", "5.", "1.5s", "-1", "1.-5", "3x", "1..2", "0x10"}) {
    INFO(bad);
    auto r = ParseDurationOptionMs(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_FALSE(r.status().message().empty());
  }
}

TEST_CASE("FormatDurationHuman: one decimal below a minute, whole units above", "[duration]") {
  CHECK(FormatDurationHuman(0) == "0.0s");
  CHECK(FormatDurationHuman(3.24) == "3.2s");
  CHECK(FormatDurationHuman(59.9) == "59.9s");
  CHECK(FormatDurationHuman(59.97) == "1m 0s");
  CHECK(FormatDurationHuman(245) == "4m 5s");
  CHECK(FormatDurationHuman(3600) == "1h 0m");
  CHECK(FormatDurationHuman(71040) == "19h 44m");
  CHECK(FormatDurationHuman(157485.6) == "1d 19h 44m");  // the lag figure
  CHECK(FormatDurationHuman(-3.2) == "-3.2s");
}

}  // namespace ef
