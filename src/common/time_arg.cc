#include "common/time_arg.h"

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

// Exactly n ASCII digits at pos (std::from_chars alone would also take a '-').
bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos > s.size() || n > s.size() - pos) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

constexpr int64_t kMaxMs = 253402300799999;  // 9999-12-31T23:59:59.999Z

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

StatusOr<int64_t> ParseTimeArg(std::string_view s, int64_t now_ms) {
  const std::string quoted = "time '" + std::string(s) + "'";
  const std::string bad = quoted +
                          ": expected RFC 3339 (2026-11-22T08:00:00Z), a date (2026-11-22), "
                          "@seconds since 1970 (@1795305600) or a duration ago (2h, 3d)";
  if (s.empty()) return InvalidArgument(bad);
  if (s.front() == '@') {
    int64_t seconds = 0;
    const std::string_view digits = s.substr(1);
    bool ok = !digits.empty() && digits.size() <= 12;
    for (char c : digits) {
      ok = ok && c >= '0' && c <= '9';
      if (ok) seconds = seconds * 10 + (c - '0');
    }
    if (!ok) return InvalidArgument(bad);
    if (seconds * 1000 > kMaxMs) {
      return InvalidArgument(quoted + ": outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z");
    }
    return seconds * 1000;
  }
  if (s.find_first_not_of("0123456789") == std::string_view::npos) {
    return InvalidArgument(quoted + ": a bare number is ambiguous: write " + std::string(s) +
                           "s for that long ago, or @" + std::string(s) +
                           " for seconds since 1970-01-01");
  }
  if (s.size() < 10 || s[4] != '-') {
    auto ago = ParseDurationMs(s);
    if (!ago.ok()) return InvalidArgument(bad);
    if (*ago > now_ms) return InvalidArgument(quoted + ": that long ago is before 1970-01-01");
    return now_ms - *ago;
  }
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (!Digits(s, 0, 4, &y) || s[4] != '-' || !Digits(s, 5, 2, &mo) || s[7] != '-' ||
      !Digits(s, 8, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo))
    return InvalidArgument(bad);
  int64_t ms = 0;
  int64_t offset_s = 0;
  if (s.size() > 10) {
    // sec 60 (a leap second) reads as the first second of the next minute.
    if (s.size() < 19 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !Digits(s, 11, 2, &h) ||
        s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' || !Digits(s, 17, 2, &sec) ||
        h > 23 || mi > 59 || sec > 60)
      return InvalidArgument(bad);
    size_t i = 19;
    if (i < s.size() && s[i] == '.') {
      const size_t first = ++i;
      int64_t scale = 100;  // digits past the third are read and dropped
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        ms += (s[i] - '0') * scale;
        scale /= 10;
      }
      if (i == first) return InvalidArgument(bad);
    }
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
      ++i;
    } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      int oh, om;
      if (!Digits(s, i + 1, 2, &oh) || s.size() < i + 6 || s[i + 3] != ':' ||
          !Digits(s, i + 4, 2, &om) || oh > 23 || om > 59)
        return InvalidArgument(bad);
      offset_s = (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
      i += 6;
    } else {
      return InvalidArgument(bad + " (the time zone, Z or +hh:mm, is required)");
    }
    if (i != s.size()) return InvalidArgument(bad);
  }
  const int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t result = (days * 86400 + h * 3600 + mi * 60 + sec - offset_s) * 1000 + ms;
  if (result < 0 || result > kMaxMs) {
    return InvalidArgument(quoted + ": outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z");
  }
  return result;
}

std::string FormatTimeRfc3339(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(FloorDiv(ms, 1000));  // 23:59:59.5 is :59
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ef
