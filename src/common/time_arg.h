// Points in time on the command line (replay --since/--until, check --at):
// RFC 3339 ("2026-11-22T08:00:00Z", "2026-11-22T08:00:00.250+01:00",
// "2026-11-22" = midnight UTC), seconds since 1970 after an '@' ("@1795305600",
// as date(1) writes them), or relative to now with a unit ("2h", "3d", "90m",
// "0s": that long ago; see common/duration.h). A bare number is refused: it
// could mean either of the last two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ef {

// Epoch milliseconds. Errors name the text and the accepted forms. Strict: every
// field is exactly its digits (no sign), the date exists (no February 30), hour
// <= 23, minute <= 59, second <= 60 (a leap second reads as the next minute's
// first), a fraction has at least one digit (past the third ignored), offsets
// +-hh:mm up to 23:59. The result must lie in 1970-01-01T00:00:00Z ..
// 9999-12-31T23:59:59.999Z, for a duration ago too ("30000d" is an error, not a
// negative time, which Kafka's offset lookup would read as "latest").
StatusOr<int64_t> ParseTimeArg(std::string_view text, int64_t now_ms);

// "2026-11-22T08:00:00Z" (UTC, whole seconds, rounded down): what ParseTimeArg
// reads back, for any ms in ParseTimeArg's range.
std::string FormatTimeRfc3339(int64_t ms);

}  // namespace ef
