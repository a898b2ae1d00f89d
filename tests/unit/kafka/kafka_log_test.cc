// ParseOffsetReset (kafka/log.h): the one place librdkafka 2.0 reports that a
// consumer's position was deleted by retention is a warning in its log; the
// daemon counts lost messages from it (issue 26 item 10).
#include <catch2/catch.hpp>

#include "kafka/log.h"

namespace ef::kafka {

TEST_CASE("ParseOffsetReset reads librdkafka's out-of-range reset line", "[kafka][retention]") {
  OffsetReset r;
  // As librdkafka 2.0.2 logs it (captured from the development broker).
  REQUIRE(ParseOffsetReset(
      "OFFSET",
      "[thrd:main]: exposures [0]: offset reset (at offset 500, broker 1) to cached BEGINNING "
      "offset 2498: fetch failed due to requested offset not available on the broker: Broker: "
      "Offset out of range",
      &r));
  CHECK(r.topic == "exposures");
  CHECK(r.partition == 0);
  CHECK(r.from == 500);
  CHECK(r.to == 2498);

  // Without the thread prefix, a topic with spaces-free dots, an END reset.
  REQUIRE(ParseOffsetReset("OFFSET",
                           "feed.exposures [12]: offset reset (at offset 7, broker 3) to END "
                           "offset 90: fetch failed: Broker: Offset out of range",
                           &r));
  CHECK(r.topic == "feed.exposures");
  CHECK(r.partition == 12);
  CHECK(r.from == 7);
  CHECK(r.to == 90);
}

TEST_CASE("ParseOffsetReset ignores resets that lose nothing and other lines",
          "[kafka][retention]") {
  OffsetReset r;
  // No committed offset yet: the group starts at auto.offset.reset.
  CHECK_FALSE(ParseOffsetReset("OFFSET",
                               "exposures [0]: offset reset (at offset INVALID, broker 1) to "
                               "BEGINNING offset 0: no previously committed offset available: "
                               "Offset out of range",
                               &r));
  // Another facility, or no out-of-range error.
  CHECK_FALSE(ParseOffsetReset("FETCH",
                               "exposures [0]: offset reset (at offset 5, broker 1) to offset 9: "
                               "Offset out of range",
                               &r));
  CHECK_FALSE(ParseOffsetReset("OFFSET",
                               "exposures [0]: offset reset (at offset 5, broker 1) to offset 9: "
                               "Local: No offset stored",
                               &r));
  CHECK_FALSE(ParseOffsetReset("OFFSET", "Offset out of range", &r));
  CHECK_FALSE(
      ParseOffsetReset("OFFSET", "x [y]: offset reset (at offset 5) Offset out of range", &r));
}

}  // namespace ef::kafka
