#include "common/time_arg.h"

#include <charconv>
#include <ctime>
#include <string>

#include "common/duration.h"

namespace ef {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + n, *out);
  return ec == std::errc() && p == s.data() + pos + n;
}

}  // namespace

StatusOr<int64_t> ParseTimeArg(std::string_view s, int64_t now_ms) {
  const std::string bad = "time '" + std::string(s) +
                          "': expected RFC 3339 (2026-11-22T08:00:00Z), a date (2026-11-22) "
                          "or a duration ago (2h, 3d)";
  if (s.empty()) return InvalidArgument(bad);
  if (s.size() < 10 || s[4] != '-') {
    auto ago = ParseDurationMs(s);
    if (!ago.ok()) return InvalidArgument(bad);
    return now_ms - *ago;
  }
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (!Digits(s, 0, 4, &y) || s[4] != '-' || !Digits(s, 5, 2, &mo) || s[7] != '-' ||
      !Digits(s, 8, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > 31)
    return InvalidArgument(bad);
  int64_t ms = 0;
  int64_t offset_s = 0;
  if (s.size() > 10) {
    if ((s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !Digits(s, 11, 2, &h) || s[13] != ':' ||
        !Digits(s, 14, 2, &mi) || s.size() < 19 || s[16] != ':' || !Digits(s, 17, 2, &sec) ||
        h > 23 || mi > 59 || sec > 60)
      return InvalidArgument(bad);
    size_t i = 19;
    if (i < s.size() && s[i] == '.') {
      int64_t scale = 100;
      for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        ms += (s[i] - '0') * scale;
        scale /= 10;
      }
    }
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
      ++i;
    } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      int oh, om;
      if (!Digits(s, i + 1, 2, &oh) || s.size() < i + 6 || s[i + 3] != ':' ||
          !Digits(s, i + 4, 2, &om))
        return InvalidArgument(bad);
      offset_s = (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
      i += 6;
    } else {
      return InvalidArgument(bad + " (the time zone, Z or +hh:mm, is required)");
    }
    if (i != s.size()) return InvalidArgument(bad);
  }
  const int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return (days * 86400 + h * 3600 + mi * 60 + sec - offset_s) * 1000 + ms;
}

std::string FormatTimeRfc3339(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ef
