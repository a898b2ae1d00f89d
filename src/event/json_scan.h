// JSON scanning that simdjson's on-demand API leaves to its callers, shared by
// the exposure-event decoder (event/decoder.h) and the items-topic decoder
// (event/item_decoder.h): stage 1 only delimits atoms and checks UTF-8, so the
// number grammar, whole-document validation and the 64-bit fingerprint forms
// are checked here. Pure functions; thread-safe.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace ef::json {

namespace od = simdjson::ondemand;

// Nesting limit, the top-level object being depth 1. simdjson's parser tracks at
// most DEFAULT_MAX_DEPTH (1024) open containers, the document root included, and
// checks that in debug builds only: staying below it keeps the behaviour the same
// in every build and bounds the recursion of Validate.
constexpr int kMaxDepth = simdjson::DEFAULT_MAX_DEPTH - 1;

// Exponents beyond this cannot change a number's use here (any non-zero digit is
// then far out of range or truncated away); SplitNumber saturates to it.
constexpr int64_t kExponentCap = 1'000'000'000;

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// raw_json_token() runs up to the next structural character, so it carries the
// whitespace that separates the value from the following ',', ']' or '}'.
inline std::string_view TrimRight(std::string_view t) {
  size_t n = t.size();
  while (n > 0 && IsSpace(t[n - 1])) --n;
  return t.substr(0, n);
}

// A number token split by the RFC 8259 grammar: "12x", "01", "-" or "1.5e" arrive
// as tokens and are not valid.
struct NumberToken {
  bool valid = false;
  bool negative = false;
  bool is_integer = false;  // no fraction and no exponent
  std::string_view int_digits;
  std::string_view frac_digits;
  int64_t exponent = 0;  // saturated to +-kExponentCap
};
// Inline: the decoders call it per number token, on their hot path.
inline NumberToken SplitNumber(std::string_view t) {
  NumberToken n;
  const size_t size = t.size();
  size_t i = 0;
  if (i < size && t[i] == '-') {
    n.negative = true;
    ++i;
  }
  const size_t int_begin = i;
  if (i < size && t[i] == '0') {
    ++i;
  } else if (i < size && t[i] >= '1' && t[i] <= '9') {
    while (i < size && IsDigit(t[i])) ++i;
  } else {
    return n;
  }
  n.int_digits = t.substr(int_begin, i - int_begin);
  if (i == size) {
    n.valid = n.is_integer = true;
    return n;
  }
  if (t[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < size && IsDigit(t[i])) ++i;
    if (i == frac_begin) return n;
    n.frac_digits = t.substr(frac_begin, i - frac_begin);
  }
  if (i < size && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < size && (t[i] == '+' || t[i] == '-')) exp_negative = t[i++] == '-';
    const size_t exp_begin = i;
    int64_t e = 0;
    while (i < size && IsDigit(t[i])) {
      if (e < kExponentCap) e = e * 10 + (t[i] - '0');
      ++i;
    }
    if (i == exp_begin) return n;
    e = std::min(e, kExponentCap);
    n.exponent = exp_negative ? -e : e;
  }
  n.valid = i == size;
  return n;
}

// Plain strings are used in place, but must still be consumed: when simdjson
// skips an unconsumed string it takes a following ':' for the end of a key, so
// {"a":"b":[1],...} would be accepted.
inline bool ConsumePlainString(od::value& v) {
  return v.get_raw_json_string().error() == simdjson::SUCCESS;
}

// Whether the key starting at `key` (just past its opening quote) has an escape.
// Stage 1 guarantees the closing quote; `end` only guards against a broken index.
inline bool KeyHasEscape(const char* key, const char* end) {
  for (const char* p = key; p < end && *p != '"'; ++p) {
    if (*p == '\\') return true;
  }
  return false;
}

// Walks v whole (on-demand skips what it is not asked for, unchecked), so that
// malformed JSON anywhere in it is seen: strings' escapes, keys, the number
// grammar, literals, and nesting up to kMaxDepth (v being at `depth`). buf_end:
// one past the document's bytes.
bool Validate(od::value& v, int depth, const char* buf_end);

// A content fingerprint (docs/CONTENT.md, docs/EVENTS.md) as a string: exactly 16
// hex digits, either case.
bool ParseHex64(std::string_view s, uint64_t* out);
// A content fingerprint as an integer token: decimal digits only (no sign, no
// leading zero unless "0", no fraction or exponent), at most 2^64 - 1.
bool ParseUint64(std::string_view token, uint64_t* out);

}  // namespace ef::json
