#include "common/duration.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
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

StatusOr<int64_t> ParseDurationOptionMs(std::string_view text) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos) return ParseDurationMs(text);
  // "<digits>.<digits>": seconds with a fraction.
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = text.substr(dot + 1);
  auto digits = [](std::string_view d) {
    for (char c : d)
      if (c < '0' || c > '9') return false;
    return true;
  };
  if (whole.empty() || frac.empty() || !digits(whole) || !digits(frac)) {
    return InvalidArgument("duration " + Quoted(text) +
                           " must be a number of seconds (0.5) or an integer with a unit "
                           "(500ms, 10s, 30d)");
  }
  auto seconds = ParseDurationMs(whole);
  if (!seconds.ok()) return seconds.status();
  int64_t ms = 0;
  int64_t scale = 100;
  for (size_t i = 0; i < frac.size() && scale > 0; ++i, scale /= 10) ms += (frac[i] - '0') * scale;
  if (*seconds > std::numeric_limits<int64_t>::max() - ms)
    return InvalidArgument("duration " + Quoted(text) + " is too large");
  return *seconds + ms;
}

std::string FormatDurationHuman(double seconds) {
  if (std::isnan(seconds)) return "?";
  if (seconds < 0) return "-" + FormatDurationHuman(-seconds);
  char buf[64];
  if (seconds < 59.95) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
  }
  if (seconds > 9.2e18) return "> 100000000000d";
  const int64_t s = std::llround(seconds);  // 59.97 is 1m 0s
  const int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
  if (d > 0) {
    std::snprintf(buf, sizeof buf, "%lldd %lldh %lldm", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m));
  } else if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lldh %lldm", static_cast<long long>(h),
                  static_cast<long long>(m));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm %llds", static_cast<long long>(m),
                  static_cast<long long>(sec));
  }
  return buf;
}

}  // namespace ef
