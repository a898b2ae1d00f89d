// Printable (common/printable.h): external bytes made safe for one log line.
#include "common/printable.h"

#include <catch2/catch.hpp>
#include <string>

namespace ef {
namespace {

bool HasControlByte(const std::string& s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

TEST_CASE("Printable: plain text and UTF-8 pass unchanged", "[printable]") {
  CHECK(Printable("ef:{user-42}:20400") == "ef:{user-42}:20400");
  CHECK(Printable("") == "");
  CHECK(Printable("J\xc3\xbcrgen") == "J\xc3\xbcrgen");
}

TEST_CASE("Printable: CR, LF, tab, other control bytes and backslash are escaped", "[printable]") {
  CHECK(Printable("u1\r\n2026-01-01 [error] forged") == "u1\\r\\n2026-01-01 [error] forged");
  CHECK(Printable("a\tb") == "a\\tb");
  CHECK(Printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(Printable("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  // Backslash is escaped too, so an escape in the output is never ambiguous.
  CHECK(Printable("a\\nb") == "a\\\\nb");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  CHECK_FALSE(HasControlByte(Printable(all, all.size())));
}

TEST_CASE("Printable: long values are cut at max_len with the full length", "[printable]") {
  const std::string id(1000, 'x');
  const std::string p = Printable(id);
  CHECK(p == std::string(256, 'x') + "...(1000 bytes)");
  CHECK(Printable("abcdef", 3) == "abc...(6 bytes)");
  CHECK(Printable("abc", 3) == "abc");
  CHECK(Printable("a\nbcdef", 2) == "a\\n...(7 bytes)");
}

}  // namespace
}  // namespace ef
