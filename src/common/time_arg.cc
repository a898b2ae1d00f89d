#include "common/time_arg.h"

#include <ctime>
#include <optional>
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

// Which of the accepted forms a text is, decided from its first characters
// alone; reading it may still fail.
enum class TimeForm {
  kEmpty,
  kEpochSeconds,  // "@1795305600"
  kBareNumber,    // "1795305600": refused, ambiguous
  kAgo,           // "2h": a duration before now
  kRfc3339,       // "2026-11-22T08:00:00Z" or "2026-11-22"
};

TimeForm FormOf(std::string_view s) {
  if (s.empty()) return TimeForm::kEmpty;
  if (s.front() == '@') return TimeForm::kEpochSeconds;
  if (s.find_first_not_of("0123456789") == std::string_view::npos) return TimeForm::kBareNumber;
  if (s.size() < 10 || s[4] != '-') return TimeForm::kAgo;
  return TimeForm::kRfc3339;
}

// The digits after '@' as seconds: 1 to 12 ASCII digits, else nullopt.
std::optional<int64_t> ReadEpochSeconds(std::string_view digits) {
  if (digits.empty() || digits.size() > 12) return std::nullopt;
  int64_t seconds = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds;
}

// How reading an RFC 3339 text, or one of its parts, ended.
enum class Verdict {
  kOk,
  kMalformed,
  kNoZone,  // a time of day without Z or +hh:mm
};

// The fields of an RFC 3339 text as read; a date alone is midnight UTC.
struct Rfc3339Fields {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t ms = 0;        // from the fraction's first three digits
  int64_t offset_s = 0;  // east of UTC
};

// One part read from position `next` on: its verdict, its value and the
// position after it.
struct PartRead {
  Verdict verdict;
  int64_t value;
  size_t next;
};

// "2026-11-22" at 0: a date that exists (no February 30).
bool ReadDate(std::string_view s, Rfc3339Fields* f) {
  return Digits(s, 0, 4, &f->year) && s[4] == '-' && Digits(s, 5, 2, &f->month) && s[7] == '-' &&
         Digits(s, 8, 2, &f->day) && f->month >= 1 && f->month <= 12 && f->day >= 1 &&
         f->day <= DaysInMonth(f->year, f->month);
}

// "T08:00:00" at 10 ('T', 't' or ' '): hour <= 23, minute <= 59, second <= 60
// (sec 60, a leap second, reads as the first second of the next minute).
bool ReadClock(std::string_view s, Rfc3339Fields* f) {
  if (s.size() < 19 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ')) return false;
  return Digits(s, 11, 2, &f->hour) && s[13] == ':' && Digits(s, 14, 2, &f->minute) &&
         s[16] == ':' && Digits(s, 17, 2, &f->second) && f->hour <= 23 && f->minute <= 59 &&
         f->second <= 60;
}

// ".250" at i: milliseconds (digits past the third are read and dropped); 0 with
// nothing read when there is no '.'; malformed when the '.' has no digit.
PartRead ReadFraction(std::string_view s, size_t i) {
  if (i >= s.size() || s[i] != '.') return {Verdict::kOk, 0, i};
  const size_t first = ++i;
  int64_t ms = 0;
  int64_t scale = 100;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    ms += (s[i] - '0') * scale;
    scale /= 10;
  }
  if (i == first) return {Verdict::kMalformed, 0, i};
  return {Verdict::kOk, ms, i};
}

// "Z" (or "z") or "+hh:mm" / "-hh:mm" up to 23:59 at i: the offset east of UTC
// in seconds.
PartRead ReadZone(std::string_view s, size_t i) {
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) return {Verdict::kOk, 0, i + 1};
  if (i >= s.size() || (s[i] != '+' && s[i] != '-')) return {Verdict::kNoZone, 0, i};
  int oh, om;
  if (!Digits(s, i + 1, 2, &oh) || s.size() < i + 6 || s[i + 3] != ':' ||
      !Digits(s, i + 4, 2, &om) || oh > 23 || om > 59)
    return {Verdict::kMalformed, 0, i};
  return {Verdict::kOk, (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60), i + 6};
}

// A whole RFC 3339 text (or a date alone) into its fields, nothing left over.
Verdict ReadRfc3339(std::string_view s, Rfc3339Fields* f) {
  if (!ReadDate(s, f)) return Verdict::kMalformed;
  if (s.size() == 10) return Verdict::kOk;
  if (!ReadClock(s, f)) return Verdict::kMalformed;
  const PartRead fraction = ReadFraction(s, 19);
  if (fraction.verdict != Verdict::kOk) return fraction.verdict;
  const PartRead zone = ReadZone(s, fraction.next);
  if (zone.verdict != Verdict::kOk) return zone.verdict;
  if (zone.next != s.size()) return Verdict::kMalformed;
  f->ms = fraction.value;
  f->offset_s = zone.value;
  return Verdict::kOk;
}

int64_t EpochMsOf(const Rfc3339Fields& f) {
  const int64_t days =
      DaysFromCivil(f.year, static_cast<unsigned>(f.month), static_cast<unsigned>(f.day));
  return (days * 86400 + f.hour * 3600 + f.minute * 60 + f.second - f.offset_s) * 1000 + f.ms;
}

}  // namespace

StatusOr<int64_t> ParseTimeArg(std::string_view s, int64_t now_ms) {
  const std::string quoted = "time '" + std::string(s) + "'";
  const std::string bad = quoted +
                          ": expected RFC 3339 (2026-11-22T08:00:00Z), a date (2026-11-22), "
                          "@seconds since 1970 (@1795305600) or a duration ago (2h, 3d)";
  const std::string outside = quoted + ": outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z";
  switch (FormOf(s)) {
    case TimeForm::kEmpty:
      return InvalidArgument(bad);
    case TimeForm::kEpochSeconds: {
      const std::optional<int64_t> seconds = ReadEpochSeconds(s.substr(1));
      if (!seconds) return InvalidArgument(bad);
      if (*seconds * 1000 > kMaxMs) return InvalidArgument(outside);
      return *seconds * 1000;
    }
    case TimeForm::kBareNumber:
      return InvalidArgument(quoted + ": a bare number is ambiguous: write " + std::string(s) +
                             "s for that long ago, or @" + std::string(s) +
                             " for seconds since 1970-01-01");
    case TimeForm::kAgo: {
      auto ago = ParseDurationMs(s);
      if (!ago.ok()) return InvalidArgument(bad);
      if (*ago > now_ms) return InvalidArgument(quoted + ": that long ago is before 1970-01-01");
      return now_ms - *ago;
    }
    case TimeForm::kRfc3339:
      break;
  }
  Rfc3339Fields fields;
  switch (ReadRfc3339(s, &fields)) {
    case Verdict::kOk:
      break;
    case Verdict::kMalformed:
      return InvalidArgument(bad);
    case Verdict::kNoZone:
      return InvalidArgument(bad + " (the time zone, Z or +hh:mm, is required)");
  }
  const int64_t result = EpochMsOf(fields);
  if (result < 0 || result > kMaxMs) return InvalidArgument(outside);
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
