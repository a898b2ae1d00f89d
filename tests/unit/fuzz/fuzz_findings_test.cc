// Regression tests for what the libFuzzer targets (fuzz/, docs/FUZZING.md) found
// in the time-argument parser and the RESP reply scanner. Each input here is a
// (minimised) fuzzer finding or the class of input it stands for.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_arg.h"
#include "redis/reply_scanner.h"
#include "support/guard_page.h"

namespace ef {
namespace {

constexpr int64_t kNow = 1795305600000;  // 2026-11-22T00:00:00Z

// The text in memory that ends where an unmapped page begins: a read past its
// end faults (the test binary dies, so the test fails) in every build, not only
// under ASan (EF_SANITIZE), which CI does not set.
bool Accepted(std::string_view text) {
  const test::GuardedBytes memory(text.size());
  char* copy = memory.EndingAtGuard(text.size());
  std::copy(text.begin(), text.end(), copy);
  return ParseTimeArg(std::string_view(copy, text.size()), kNow).ok();
}

TEST_CASE("ParseTimeArg: truncated times are rejected without reading past the text",
          "[time_arg][fuzz]") {
  for (const char* text : {"2026-11-22T08", "2026-11-22T0", "2026-11-22T08:0", "2026-11-22T08:00:0",
                           "2026-11-22T08:00:00+01", "2026-11-22T08:00:00+01:0"}) {
    INFO(text);
    CHECK_FALSE(Accepted(text));
  }
}

TEST_CASE("ParseTimeArg: every field is digits only (no sign)", "[time_arg][fuzz]") {
  for (const char* text : {"2026-11-22T-1:00:00Z", "2026-11-22T08:-1:00Z", "2026-11-22T08:00:-1Z",
                           "-999-11-22", "2026-11-22T08:00:00+-1:00", "2026-11-22T08:00:00+01:-1",
                           "2026-11-22T08:00:00.Z", "2026-11-22T08:00:00.-5Z"}) {
    INFO(text);
    CHECK_FALSE(Accepted(text));
  }
}

TEST_CASE("ParseTimeArg: dates that do not exist and offsets out of range are rejected",
          "[time_arg][fuzz]") {
  for (const char* text :
       {"2026-02-29", "2026-02-31T00:00:00Z", "2026-04-31", "2026-11-22T08:60:00Z",
        "2026-11-22T08:00:00+24:00", "2026-11-22T08:00:00+01:60", "2026-11-22T08:00:00+99:99"}) {
    INFO(text);
    CHECK_FALSE(Accepted(text));
  }
  CHECK(Accepted("2024-02-29"));  // a leap day
  CHECK(Accepted("2026-11-22T08:00:00+23:59"));
  CHECK(Accepted("2016-12-31T23:59:60Z"));  // a leap second reads as the next second
  CHECK(*ParseTimeArg("2016-12-31T23:59:60Z", kNow) == *ParseTimeArg("2017-01-01T00:00:00Z", kNow));
}

TEST_CASE("ParseTimeArg: times before 1970 or after 9999 are rejected, also as durations ago",
          "[time_arg][fuzz]") {
  for (const char* text : {"1969-12-31T23:59:59Z", "0000-01-01", "1970-01-01T00:59:59+01:00",
                           "9999-12-31T23:59:59-00:01", "88888888171", "30000d"}) {
    INFO(text);
    auto r = ParseTimeArg(text, kNow);
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(r.status().message().find(text) != std::string::npos);
  }
  CHECK(*ParseTimeArg("1970-01-01T00:00:00Z", kNow) == 0);
  CHECK(*ParseTimeArg("9999-12-31T23:59:59.999Z", kNow) == 253402300799999);
  CHECK(*ParseTimeArg(std::to_string(kNow / 1000) + "s", kNow) == 0);  // exactly the epoch
}

TEST_CASE("FormatTimeRfc3339: whole seconds round down, and read back", "[time_arg][fuzz]") {
  CHECK(FormatTimeRfc3339(1500) == "1970-01-01T00:00:01Z");
  CHECK(FormatTimeRfc3339(-500) == "1969-12-31T23:59:59Z");  // floor, not toward zero
  for (int64_t ms : {int64_t{0}, int64_t{999}, kNow + 123, int64_t{253402300799999}}) {
    auto back = ParseTimeArg(FormatTimeRfc3339(ms), kNow);
    REQUIRE(back.ok());
    CHECK(*back == ms - ms % 1000);
  }
}

struct ScanResult {
  int replies = 0;
  int errors = 0;
  bool protocol_error = false;
};

ScanResult Scan(ReplyScanner* scanner, std::string_view bytes) {
  ScanResult out;
  scanner->Feed(bytes.data(), bytes.size());
  for (;;) {
    std::string_view text;
    auto r = scanner->Next(&text);
    if (r == ReplyScanner::Result::kIncomplete) break;
    if (r == ReplyScanner::Result::kProtocolError) {
      out.protocol_error = true;
      break;
    }
    ++out.replies;
    if (r == ReplyScanner::Result::kError) ++out.errors;
  }
  return out;
}

ScanResult Scan(std::string_view bytes) {
  ReplyScanner scanner;
  return Scan(&scanner, bytes);
}

TEST_CASE("ReplyScanner: Reset after a protocol error scans the next connection's replies",
          "[redis][fuzz]") {
  ReplyScanner scanner;
  CHECK(Scan(&scanner, "HTTP/1.1 400\r\n").protocol_error);
  scanner.Reset();
  ScanResult after = Scan(&scanner, ":1\r\n+OK\r\n");
  CHECK_FALSE(after.protocol_error);
  CHECK(after.replies == 2);
}

TEST_CASE("ReplyScanner: a bulk string must end in CRLF", "[redis][fuzz]") {
  CHECK(Scan("$3\r\nabcXY:1\r\n").protocol_error);
  CHECK(Scan("*1\r\n$1\r\na\n\r:1\r\n").protocol_error);
  ScanResult ok = Scan("$3\r\na\r\n\r\n:1\r\n");  // CRLF inside the payload is data
  CHECK_FALSE(ok.protocol_error);
  CHECK(ok.replies == 2);
}

TEST_CASE("ReplyScanner: integers and lengths beyond 64 bits are protocol errors",
          "[redis][fuzz]") {
  CHECK(Scan(":9223372036854775807\r\n").replies == 1);
  CHECK(Scan(":-9223372036854775808\r\n").replies == 1);
  CHECK(Scan(":9223372036854775808\r\n").protocol_error);
  CHECK(Scan(":99999999999999999999\r\n").protocol_error);
  CHECK(Scan("$18446744073709551617\r\nab\r\n").protocol_error);
  CHECK(Scan("*18446744073709551617\r\n:1\r\n").protocol_error);
}

}  // namespace
}  // namespace ef
