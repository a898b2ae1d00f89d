#include "event/json_scan.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ef::json {

bool Validate(od::value& v, int depth, const char* buf_end) {
  if (depth > kMaxDepth) return false;
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return false;
  switch (token[0]) {
    case '"': {
      if (token.size() < 2 || token.back() != '"') return false;
      if (std::memchr(token.data(), '\\', token.size()) == nullptr) return ConsumePlainString(v);
      std::string_view unescaped;  // unescaping checks the escapes
      return v.get_string().get(unescaped) == simdjson::SUCCESS;
    }
    case 't':
      return token == "true";
    case 'f':
      return token == "false";
    case 'n':
      return token == "null";
    case '[': {
      od::array array;
      if (v.get_array().get(array) != simdjson::SUCCESS) return false;
      for (auto element : array) {
        od::value child;
        if (std::move(element).get(child) != simdjson::SUCCESS) return false;
        if (!Validate(child, depth + 1, buf_end)) return false;
      }
      return true;
    }
    case '{': {
      od::object object;
      if (v.get_object().get(object) != simdjson::SUCCESS) return false;
      for (auto field_result : object) {
        od::field field;
        if (std::move(field_result).get(field) != simdjson::SUCCESS) return false;
        std::string_view unescaped;  // unescaping checks the escapes
        if (KeyHasEscape(field.key().raw(), buf_end) &&
            field.unescaped_key().get(unescaped) != simdjson::SUCCESS) {
          return false;
        }
        if (!Validate(field.value(), depth + 1, buf_end)) return false;
      }
      return true;
    }
    default:
      return SplitNumber(token).valid;
  }
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t x = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    x = (x << 4) | static_cast<uint64_t>(d);
  }
  *out = x;
  return true;
}

bool ParseUint64(std::string_view token, uint64_t* out) {
  if (token.empty() || (token.size() > 1 && token[0] == '0')) return false;
  uint64_t x = 0;
  for (char c : token) {
    if (!IsDigit(c)) return false;
    const auto d = static_cast<uint64_t>(c - '0');
    if (x > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;  // > 2^64 - 1
    x = x * 10 + d;
  }
  *out = x;
  return true;
}

}  // namespace ef::json
