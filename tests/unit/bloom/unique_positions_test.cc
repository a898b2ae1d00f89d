// UniquePositions against std::sort + std::unique on random inputs, through every
// path: the bitmap with its summary in a register (ranges up to 4,096 bits) and in
// memory, std::sort for few positions in a large range and for ranges above
// kMaxBitmapBits, a non-zero base, and one object reused across ranges of
// different sizes (its scratch must be all zero again after each call).
#include "bloom/unique_positions.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace ef {
namespace {

std::vector<uint32_t> Expected(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<uint32_t> Random(std::mt19937_64& rng, size_t n, uint32_t base, uint64_t range) {
  std::uniform_int_distribution<uint64_t> d(0, range - 1);
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = base + static_cast<uint32_t>(d(rng));
  return v;
}

std::vector<uint32_t> Run(UniquePositions& u, std::vector<uint32_t> v, uint32_t base,
                          uint64_t range) {
  uint32_t* end = u.Run(v.data(), v.data() + v.size(), base, range);
  v.resize(static_cast<size_t>(end - v.data()));
  return v;
}

TEST_CASE("UniquePositions sorts and dedupes like std::sort + std::unique on every path",
          "[unique_positions]") {
  std::mt19937_64 rng(11);
  UniquePositions u;
  // {range, base}: register summary, memory summary (small and large), the
  // bitmap's limit, above it (std::sort), a range ending at 2^32.
  const std::vector<std::pair<uint64_t, uint32_t>> shapes = {
      {64, 0},
      {3345, 0},
      {4096, 7},
      {16384, 26760},
      {100000, 8192},
      {UniquePositions::kMaxBitmapBits, 1u << 20},
      {(1u << 20) + 1, 0},
      {1u << 24, 5},
      {uint64_t{1} << 20, UINT32_MAX - (1u << 20) + 1}};
  for (int round = 0; round < 3; ++round) {
    for (const auto& [range, base] : shapes) {
      for (size_t n : {0, 1, 2, 5, 16, 17, 40, 300, 5000}) {
        const std::vector<uint32_t> in = Random(rng, n, base, range);
        INFO("range " << range << " base " << base << " n " << n << " round " << round);
        CHECK(Run(u, in, base, range) == Expected(in));
      }
    }
  }
}

TEST_CASE("UniquePositions: every repeat is dropped, the extremes of the range kept",
          "[unique_positions]") {
  UniquePositions u;
  const uint32_t base = 1000;
  const uint64_t range = 20000;
  std::vector<uint32_t> in;
  for (int r = 0; r < 3; ++r)
    for (uint32_t x : {base, base + 63, base + 64, base + 4095, base + 4096, base + 19999})
      in.push_back(x);
  // 18 values: more than 16, so the bitmap path.
  CHECK(Run(u, in, base, range) ==
        std::vector<uint32_t>{base, base + 63, base + 64, base + 4095, base + 4096, base + 19999});
  // The scratch is clean afterwards: a disjoint set comes out alone.
  std::vector<uint32_t> other(20, base + 5);
  CHECK(Run(u, other, base, range) == std::vector<uint32_t>{base + 5});
}

}  // namespace
}  // namespace ef
