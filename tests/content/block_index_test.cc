// The permuted-block tables (src/content/block_index.h, docs/CONTENT.md rule 3):
// recall 100% by construction, checked against a brute-force scan of 1M random
// fingerprints with planted neighbours at distances 0 .. k + 1.
#include "content/block_index.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "content/simhash.h"

namespace ef::test {
namespace {

uint64_t FlipBits(uint64_t fp, int bits, std::mt19937_64& rng) {
  std::vector<int> pos(64);
  for (int i = 0; i < 64; ++i) pos[static_cast<size_t>(i)] = i;
  std::shuffle(pos.begin(), pos.end(), rng);
  for (int i = 0; i < bits; ++i) fp ^= uint64_t{1} << pos[static_cast<size_t>(i)];
  return fp;
}

TEST_CASE("block scheme tables, keys and bad block counts", "[content]") {
  auto s = content::BlockScheme::Make(5, 3);
  REQUIRE(s.ok());
  CHECK(s->tables() == 10);
  // Blocks of 13, 13, 13, 13, 12 bits; table 0 keeps blocks 0 and 1 (26 bits),
  // the last table blocks 3 and 4 (25 bits).
  CHECK(s->key_bits(0) == 26);
  CHECK(s->key_bits(9) == 25);
  const uint64_t fp = 0x0123456789abcdefULL;
  CHECK(s->Key(0, fp) == (((fp & 0x1fff) << 13) | ((fp >> 13) & 0x1fff)));
  CHECK(s->Key(9, fp) == (((fp >> 39) & 0x1fff) << 12 | ((fp >> 52) & 0xfff)));
  CHECK(content::BlockScheme::Make(4, 3)->tables() == 4);
  CHECK(content::BlockScheme::Make(6, 3)->tables() == 20);
  CHECK(content::BlockScheme::Make(1, 0)->Key(0, fp) == fp);
  auto bad = content::BlockScheme::Make(3, 3);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "content.index_blocks (3) must be > content.max_distance (3) and <= 16");
  auto many = content::BlockScheme::Make(16, 8);
  REQUIRE_FALSE(many.ok());
  CHECK(many.status().message().find("12870 tables, more than 128") != std::string::npos);
}

TEST_CASE("the block index finds every fingerprint a brute-force scan finds (1M)", "[content]") {
  const int k = 3;
  auto scheme = content::BlockScheme::Make(5, k);
  REQUIRE(scheme.ok());
  std::mt19937_64 rng(31);
  const size_t n = 1'000'000;
  std::vector<uint64_t> fps(n);
  for (auto& fp : fps) fp = rng();
  // Planted: 20 groups of neighbours at each distance 0 .. k + 1 of a stored one,
  // stored too, so each probe below has known answers at every distance.
  std::vector<uint64_t> probes;
  for (int d = 0; d <= k + 1; ++d) {
    for (int g = 0; g < 200; ++g) {
      uint64_t base = fps[rng() % n];
      fps[rng() % n] = FlipBits(base, d, rng);
      probes.push_back(FlipBits(base, static_cast<int>(rng() % (k + 2)), rng));
    }
  }
  for (int i = 0; i < 1000; ++i) probes.push_back(rng());  // mostly nothing near
  content::MemoryIndex index(*scheme);
  for (size_t i = 0; i < n; ++i) index.Add(fps[i], static_cast<uint32_t>(i));
  index.Seal();
  size_t found = 0, candidates = 0;
  for (uint64_t probe : probes) {
    std::vector<uint32_t> want;
    for (size_t i = 0; i < n; ++i) {
      if (content::HammingDistance(fps[i], probe) <= k) want.push_back(static_cast<uint32_t>(i));
    }
    std::vector<uint32_t> got = index.Probe(probe, &candidates);
    REQUIRE(got == want);
    found += got.size();
  }
  // The planted neighbours are found: the test is not vacuous.
  CHECK(found >= 600);
  INFO("candidates per probe " << double(candidates) / probes.size());
  CHECK(candidates < probes.size() * 10);
}

}  // namespace
}  // namespace ef::test
