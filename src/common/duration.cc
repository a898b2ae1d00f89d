#include "common/duration.h"

#include <array>
#include <charconv>
#include <limits>
#include <system_error>

namespace ef {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t ms;
};

// Largest first: FormatDurationMs takes the first unit that divides exactly.
constexpr std::array<Unit, 5> kUnits = {{
    {"d", 86400000},
    {"h", 3600000},
    {"m", 60000},
    {"s", 1000},
    {"ms", 1},
}};

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

}  // namespace

StatusOr<int64_t> ParseDurationMs(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty duration");
  if (text.front() == '-') {
    return InvalidArgument("negative duration " + Quoted(text) + " (durations are >= 0)");
  }
  // from_chars accepts no sign, whitespace or base prefix: exactly what we want.
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ptr == begin) {
    return InvalidArgument("duration " + Quoted(text) +
                           " must start with a non-negative integer, e.g. 500ms, 10s, 30d");
  }
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument("duration " + Quoted(text) + " is too large");
  }
  const std::string_view suffix(ptr, static_cast<size_t>(end - ptr));
  int64_t unit_ms = 0;
  if (suffix.empty()) {
    unit_ms = 1000;  // bare integer: seconds
  } else {
    for (const Unit& unit : kUnits) {
      if (suffix == unit.suffix) unit_ms = unit.ms;
    }
  }
  if (unit_ms == 0) {
    return InvalidArgument("duration " + Quoted(text) + " has unknown unit " + Quoted(suffix) +
                           " (use ms, s, m, h or d)");
  }
  if (value > std::numeric_limits<int64_t>::max() / unit_ms) {
    return InvalidArgument("duration " + Quoted(text) + " is too large");
  }
  return value * unit_ms;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms == 0) return "0s";
  // Negative values are never parsed back, but must still print sensibly;
  // INT64_MIN is a whole number of ms only, hence the unsigned magnitude.
  const bool negative = ms < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(ms) : static_cast<uint64_t>(ms);
  for (const Unit& unit : kUnits) {
    const uint64_t per = static_cast<uint64_t>(unit.ms);
    if (magnitude % per == 0) {
      return (negative ? "-" : "") + std::to_string(magnitude / per) + std::string(unit.suffix);
    }
  }
  return std::to_string(ms) + "ms";  // unreachable: 1 ms divides everything
}

}  // namespace ef
