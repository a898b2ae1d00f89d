#include "common/time_arg.h"

#include <catch2/catch.hpp>

namespace ef {

TEST_CASE("ParseTimeArg: RFC 3339, dates and durations ago", "[replay]") {
  const int64_t now = 1795305600000;  // 2026-11-22T00:00:00Z (date -u -d ... +%s)
  CHECK(*ParseTimeArg("2026-11-22T00:00:00Z", now) == now);
  CHECK(*ParseTimeArg("2026-11-22", now) == now);
  CHECK(*ParseTimeArg("2026-11-22T08:30:15.250Z", now) == now + (8 * 3600 + 30 * 60 + 15) * 1000 + 250);
  CHECK(*ParseTimeArg("2026-11-22T09:00:00+01:00", now) == now + 8 * 3600 * 1000);
  CHECK(*ParseTimeArg("2026-11-21T19:00:00-05:00", now) == now);
  CHECK(*ParseTimeArg("1970-01-01T00:00:00Z", now) == 0);
  CHECK(*ParseTimeArg("2024-02-29T00:00:00Z", now) == 1709164800000);
  CHECK(*ParseTimeArg("2h", now) == now - 2 * 3600 * 1000);
  CHECK(*ParseTimeArg("3d", now) == now - 3 * 86400 * 1000);
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-11-22T08:00:00", "2026-11-22T25:00:00Z",
                          "2026-11-22T08:00Z", "2026-11-22T08:00:00Zjunk", "-2h"}) {
    INFO(bad);
    auto r = ParseTimeArg(bad, now);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("RFC 3339") != std::string::npos);
  }
}

TEST_CASE("ParseTimeArg: @epoch seconds, and a bare number is refused as ambiguous", "[replay]") {
  const int64_t now = 1795305600000;
  CHECK(*ParseTimeArg("@1795305600", now) == now);
  CHECK(*ParseTimeArg("@0", now) == 0);
  CHECK(*ParseTimeArg("0s", now) == now);
  for (const char* bad : {"@", "@-1", "@1.5", "@12x", "@9999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseTimeArg(bad, now).ok());
  }
  for (const char* bare : {"0", "3600", "1795305600"}) {
    INFO(bare);
    auto r = ParseTimeArg(bare, now);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(std::string("@") + bare) != std::string::npos);
    CHECK(r.status().message().find(std::string(bare) + "s") != std::string::npos);
  }
}

}  // namespace ef
