// Contract rule 10 (docs/FORMAT.md "10. Served items"): the C++ ring
// (bloom/served.h) against the vectors of "Served ring (rule 10)", read out of
// FORMAT.md (they were printed by the document's Python reference), malformed
// values, and the SHA-1 that names the script (FIPS 180 examples).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bloom/hash.h"
#include "bloom/served.h"
#include "common/sha1.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

// The ``` blocks (without fences) under `heading`, up to the next heading.
std::vector<std::string> CodeBlocks(const std::string& heading) {
  const std::string section = test::DocSection("FORMAT.md", heading);
  std::vector<std::string> out;
  for (size_t at = section.find("```\n"); at != std::string::npos;) {
    const size_t end = section.find("\n```", at + 4);
    REQUIRE(end != std::string::npos);
    out.push_back(section.substr(at + 4, end - at - 4));
    at = section.find("```\n", end + 4);
  }
  return out;
}

std::string FromHex(const std::string& text) {
  std::string out;
  int half = -1;
  for (char c : text) {
    if (c == ' ' || c == '\n') continue;
    const int v = c <= '9' ? c - '0' : c - 'a' + 10;
    REQUIRE(v >= 0);
    REQUIRE(v < 16);
    if (half < 0) {
      half = v;
    } else {
      out.push_back(static_cast<char>(half * 16 + v));
      half = -1;
    }
  }
  REQUIRE(half < 0);
  return out;
}

std::string Fps(const std::vector<std::string>& items, uint32_t width) {
  std::vector<Hash128> hs;
  for (const auto& i : items) hs.push_back(HashItem(i, 0));
  std::string out;
  AppendServedFingerprints(hs.data(), hs.size(), width, &out);
  return out;
}

TEST_CASE("contract rule 10: the served ring's vectors of FORMAT.md", "[contract][served]") {
  CHECK(ServedKey("ef:", "u1") == "ef:{u1}:served");
  CHECK(ServedWidth(500, 0.0001) == 3);
  CHECK(ServedWidth(500, 0.01) == 2);
  CHECK(ServedWidth(1u << 20, 1e-30) == 8);
  const Hash128 hello = HashItem("hello", 0);
  CHECK(ServedFingerprint(hello, 2) == 0xcbd8);
  CHECK(ServedFingerprint(hello, 3) == 0xcbd8a7);
  CHECK(ServedFingerprint(hello, 8) == 0xcbd8a7b341bd9b02ull);
  for (uint32_t w = 2; w <= 8; ++w) CHECK(ServedFingerprint(HashItem("", 0), w) == 1);

  const std::vector<std::string> blocks = CodeBlocks("### Served ring (rule 10)");
  REQUIRE(blocks.size() == 2);
  const std::string first = ApplyServed("", 4, 3, Fps({"hello", "i9", "item-123456"}, 3));
  CHECK(first == FromHex(blocks[0]));
  const std::string second = ApplyServed(first, 4, 3, Fps({"123456789", "", "hello"}, 3));
  CHECK(second == FromHex(blocks[1]));
  ServedSet set;
  REQUIRE(set.Parse(second));
  CHECK(set.filled() == 4);
  CHECK(set.width() == 3);
  for (const char* in : {"hello", "item-123456", "123456789", ""})
    CHECK(set.Contains(HashItem(in, 0)));
  CHECK_FALSE(set.Contains(HashItem("i9", 0)));
}

TEST_CASE("contract rule 10: values that are no ring read as none, and a write starts anew",
          "[contract][served]") {
  const std::string ring = ApplyServed("", 8, 4, Fps({"a", "b"}, 4));
  ServedSet set;
  REQUIRE(set.Parse(ring));
  CHECK(set.Contains(HashItem("a", 0)));
  auto broken = [&](size_t at, char c) {
    std::string v = ring;
    v[at] = c;
    return v;
  };
  // Magic, revision, width, the zero byte, C, next >= C, filled > C; a length off by one.
  for (const std::string& v :
       {broken(0, 'T'), broken(1, 2), broken(2, 1), broken(2, 9), broken(3, 1), broken(4, 9),
        broken(8, 8), broken(12, 9), ring.substr(0, ring.size() - 1), ring + '\0',
        std::string("not a ring"), std::string()}) {
    CHECK_FALSE(set.Parse(v));
    CHECK(set.empty());
    CHECK_FALSE(set.Contains(HashItem("a", 0)));
    // A write replaces it with a new ring holding just the new items.
    const std::string w = ApplyServed(v, 8, 4, Fps({"c"}, 4));
    CHECK(w == ApplyServed("", 8, 4, Fps({"c"}, 4)));
  }
  // Another shape is another ring: replaced too.
  CHECK(ApplyServed(ring, 8, 3, Fps({"c"}, 3)) == ApplyServed("", 8, 3, Fps({"c"}, 3)));
  CHECK(ApplyServed(ring, 9, 4, Fps({"c"}, 4)) == ApplyServed("", 9, 4, Fps({"c"}, 4)));
}

TEST_CASE("contract rule 10: the ring keeps the newest C items in order", "[contract][served]") {
  for (const uint32_t c : {1u, 3u, 10u}) {
    std::string v;
    std::vector<std::string> all;
    for (int i = 0; i < 40; ++i) all.push_back("n" + std::to_string(i));
    // Writes of 1, 2, 3, ... items: fewer than C, exactly C and more than C at once.
    size_t at = 0;
    for (size_t n = 1; at < all.size(); ++n) {
      const size_t take = std::min(n, all.size() - at);
      v = ApplyServed(v, c, 3,
                      Fps(std::vector<std::string>(all.begin() + static_cast<long>(at),
                                                   all.begin() + static_cast<long>(at + take)),
                          3));
      at += take;
      ServedSet set;
      REQUIRE(set.Parse(v));
      CHECK(set.filled() == std::min<size_t>(at, c));
      for (size_t i = 0; i < at; ++i)
        CHECK(set.Contains(HashItem(all[i], 0)) == (i + c >= at));  // exactly the newest c
    }
  }
}

TEST_CASE("SHA-1: FIPS 180 examples", "[served][sha1]") {
  CHECK(Sha1Hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(Sha1Hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(Sha1Hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // The padding's one- and two-block cases (55/56, 63/64/65, 119/120 bytes), values
  // from Python's hashlib.
  const std::pair<size_t, const char*> as[] = {{55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},
                                               {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
                                               {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
                                               {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
                                               {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
                                               {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
                                               {120, "f34c1488385346a55709ba056ddd08280dd4c6d6"}};
  for (const auto& [n, hex] : as) CHECK(Sha1Hex(std::string(n, 'a')) == hex);
}

}  // namespace
}  // namespace ef
