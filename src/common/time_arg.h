// Points in time on the command line: RFC 3339 ("2026-11-22T08:00:00Z",
// "2026-11-22T08:00:00.250+01:00", "2026-11-22" = midnight UTC) or relative
// to now ("2h", "3d", "90m": that long ago; see common/duration.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ef {

// Epoch milliseconds. Errors name the text and the accepted forms.
StatusOr<int64_t> ParseTimeArg(std::string_view text, int64_t now_ms);

// "2026-11-22T08:00:00Z" (UTC, whole seconds): what ParseTimeArg reads back.
std::string FormatTimeRfc3339(int64_t ms);

}  // namespace ef
