// Durations in config and CLI: "<integer><unit>" with unit ms, s, m, h, d
// (e.g. "500ms", "10s", "30d"); a bare integer means seconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ef {

// Milliseconds. Strict: no whitespace, sign or fraction. Errors
// (kInvalidArgument, quoting the text): empty, negative, unknown unit, overflow
// of int64 milliseconds.
StatusOr<int64_t> ParseDurationMs(std::string_view text);
// Shortest exact form: 86400000 -> "1d", 5400000 -> "90m", 1500 -> "1500ms",
// 0 -> "0s". ParseDurationMs(FormatDurationMs(ms)) == ms for every ms >= 0.
// A negative ms is written with a leading '-' (which Parse rejects).
std::string FormatDurationMs(int64_t ms);

// A command-line duration option: what ParseDurationMs reads, or a plain
// number of seconds with a fraction ("0.5" = 500 ms; past the third decimal
// ignored). Same errors, naming the text.
StatusOr<int64_t> ParseDurationOptionMs(std::string_view text);

// A duration for people, from seconds: below a minute one decimal ("3.2s",
// "0.0s"), then the two or three largest whole units ("4m 5s", "19h 44m",
// "1d 19h 44m"). Negative values get a leading '-'.
std::string FormatDurationHuman(double seconds);

}  // namespace ef
