// FastMod (src/bloom/fast_mod.h): x % m by multiplications, exact for every
// 64-bit x and 32-bit m > 0.
#include "bloom/fast_mod.h"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

namespace ef {
namespace {

TEST_CASE("FastMod: equals x % m for edge and random divisors and numerators", "[fast_mod]") {
  std::mt19937_64 rng(3);
  std::vector<uint32_t> divisors = {
      1,     2,     3,     5,          7,          8,          9,          10,
      31,    32,    33,    1000,       1023,       1024,       1025,       9585,
      65535, 65536, 65537, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff};
  for (int i = 0; i < 300; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 0xffffffffu));
  for (int i = 0; i < 300; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 100000));
  size_t checked = 0;
  for (const uint32_t m : divisors) {
    const FastMod mod(m);
    CHECK(mod.m() == m);
    auto check = [&](uint64_t x) {
      if (mod.Mod(x) != x % m) {
        INFO("m " << m << ", x " << x);
        CHECK(mod.Mod(x) == x % m);
      }
      ++checked;
    };
    for (uint64_t x = 0; x < 70; ++x) check(x);
    for (uint64_t x = 0; x < 70; ++x) check(~uint64_t{0} - x);
    for (int j = 0; j < 2000; ++j) {
      const uint64_t x = rng();
      check(x);
      const uint64_t q = x / m;  // multiples of m and their neighbours
      check(q * m);
      check(q * m - 1);
      check(q * m + m - 1);
    }
  }
  CHECK(checked > 4'000'000);
}

}  // namespace
}  // namespace ef
