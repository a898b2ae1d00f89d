// libFuzzer target: ParseTimeArg (common/time_arg.h) and ParseDurationMs /
// FormatDurationMs (common/duration.h) on arbitrary text.
// Properties checked (any violation aborts, which libFuzzer records as a crash):
// - durations: a parsed value is >= 0, Format(Parse(s)) parses back to the same
//   value, and Format(v) of any v >= 0 parses back to v;
// - time args: a bare number is refused, "@<digits>" is that many seconds since
//   1970 whatever now is, a relative time is now - the duration; an absolute one does not
//   depend on now, has digits wherever RFC 3339 has digits, lies in 1970..9999,
//   and FormatTimeRfc3339 of it parses back to the same whole second; a canonical
//   "YYYY-MM-DDTHH:MM:SSZ" or "YYYY-MM-DD" text formats back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/duration.h"
#include "common/time_arg.h"

namespace {

constexpr int64_t kNow = 1795305600123;       // 2026-11-22T00:00:00.123Z
constexpr int64_t kOtherNow = 1700000000456;  // another clock reading
constexpr int64_t kMaxMs = 253402300799999;   // 9999-12-31T23:59:59.999Z

[[noreturn]] void Fail(const char* what, std::string_view text) {
  std::fprintf(stderr, "time_arg_fuzz: %s: '%.*s'\n", what, static_cast<int>(text.size()),
               text.data());
  std::abort();
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool DigitsAt(std::string_view s, std::initializer_list<size_t> positions) {
  for (size_t p : positions) {
    if (p >= s.size() || !IsDigit(s[p])) return false;
  }
  return true;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

void CheckDuration(std::string_view s) {
  auto d = ef::ParseDurationMs(s);
  if (!d.ok()) {
    if (d.status().message().empty()) Fail("duration error without a message", s);
    return;
  }
  if (*d < 0) Fail("negative duration accepted", s);
  if (!IsDigit(s.front())) Fail("duration accepted without a leading digit", s);
  const std::string formatted = ef::FormatDurationMs(*d);
  auto back = ef::ParseDurationMs(formatted);
  if (!back.ok() || *back != *d)
    Fail("FormatDurationMs(ParseDurationMs(s)) does not parse back", s);
}

void CheckFormatDuration(int64_t ms) {
  const std::string text = ef::FormatDurationMs(ms);
  auto back = ef::ParseDurationMs(text);
  if (ms >= 0 && (!back.ok() || *back != ms)) Fail("Format then Parse differs", text);
  if (ms < 0 && back.ok()) Fail("a negative duration's text parses", text);
}

void CheckTimeArg(std::string_view s) {
  auto t = ef::ParseTimeArg(s, kNow);
  if (!t.ok()) {
    if (t.status().message().empty()) Fail("time error without a message", s);
    return;
  }
  if (s.front() == '@') {  // @seconds since 1970: digits only, the same at any now
    if (!DigitsAt(s, {1}) || s.find_first_not_of("0123456789", 1) != std::string_view::npos)
      Fail("@ time accepted with a non-digit", s);
    auto t2 = ef::ParseTimeArg(s, kOtherNow);
    if (!t2.ok() || *t2 != *t || *t % 1000 != 0 || *t > kMaxMs) Fail("bad @ time", s);
    return;
  }
  if (s.find_first_not_of("0123456789") == std::string_view::npos)
    Fail("a bare number accepted as a time", s);
  const bool relative = s.size() < 10 || s[4] != '-';
  if (relative) {
    auto d = ef::ParseDurationMs(s);
    if (!d.ok()) Fail("relative time accepted that is no duration", s);
    if (*t != kNow - *d) Fail("relative time is not now - duration", s);
    if (*t < 0) Fail("relative time before 1970 accepted", s);
    return;
  }
  auto t2 = ef::ParseTimeArg(s, kOtherNow);
  if (!t2.ok() || *t2 != *t) Fail("absolute time depends on now", s);
  if (!DigitsAt(s, {0, 1, 2, 3, 5, 6, 8, 9})) Fail("date with a non-digit accepted", s);
  if (s.size() > 10 && !DigitsAt(s, {11, 12, 14, 15, 17, 18}))
    Fail("time with a non-digit accepted", s);
  if (*t < 0 || *t > kMaxMs) Fail("time outside 1970..9999 accepted", s);
  const int64_t whole = FloorDiv(*t, 1000) * 1000;
  const std::string formatted = ef::FormatTimeRfc3339(*t);
  auto back = ef::ParseTimeArg(formatted, kNow);
  if (!back.ok() || *back != whole) Fail("FormatTimeRfc3339 does not parse back", s);
  // A canonical text is what Format writes: it must come back unchanged (this
  // catches out-of-range fields such as February 31 or minute 60).
  const bool canonical_full = s.size() == 20 && s[10] == 'T' && s[19] == 'Z' && s[17] != '6';
  if (canonical_full && formatted != s) Fail("canonical RFC 3339 text does not format back", s);
  if (s.size() == 10 && formatted.compare(0, 10, s) != 0) Fail("date does not format back", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  CheckDuration(s);
  CheckTimeArg(s);
  if (size >= 8) {
    int64_t ms;
    std::memcpy(&ms, data, sizeof ms);
    CheckFormatDuration(ms);
  }
  return 0;
}
