#include "common/printable.h"

namespace ef {

std::string Printable(std::string_view bytes, size_t max_len) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string_view shown = bytes.substr(0, max_len);
  std::string out;
  out.reserve(shown.size() + 16);
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (IsControlByte(c)) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += ch;
        }
    }
  }
  if (shown.size() < bytes.size()) out += "...(" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

}  // namespace ef
