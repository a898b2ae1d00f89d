// ItemHasher (src/bloom/hash_batch.h): both paths against HashItem (which
// tests/unit/bloom/bloom_test.cc checks against an independent MurmurHash3), lane by
// lane: every length up to 80 bytes, mixed in one batch; random lengths to 600
// bytes with empty views that have no data; items that end where an unmapped
// page begins (a read past an item's end would fault).
#include "bloom/hash_batch.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/cpu_paths.h"
#include "support/guard_page.h"

namespace ef {
namespace {

// Each kernel forced in turn: scalar everywhere, AVX-512 where the CPU has it
// (where it has, the hasher must use it, not fall back).
std::vector<ItemHasher> Hashers() {
  std::vector<ItemHasher> out{ItemHasher(ItemHasher::Isa::kScalar)};
  REQUIRE(out.front().isa() == ItemHasher::Isa::kScalar);
  test::ReportKernel("ItemHasher scalar", true);
  const ItemHasher avx512(ItemHasher::Isa::kAvx512);
  const bool has_avx512 = test::CpuHasAvx512Hash();
  REQUIRE(avx512.isa() == (has_avx512 ? ItemHasher::Isa::kAvx512 : ItemHasher::Isa::kScalar));
  if (has_avx512) out.push_back(avx512);
  test::ReportKernel("ItemHasher avx512", has_avx512, "AVX-512 F, DQ, BW and VL");
  return out;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);  // high bytes too
  return s;
}

void CheckAll(const ItemHasher& hasher, const std::vector<std::string>& items, uint32_t seed) {
  std::vector<Hash128> got(items.size(), Hash128{1, 1});
  hasher.HashAll(
      items.size(), [&](size_t i) { return std::string_view(items[i]); }, seed, got.data());
  for (size_t i = 0; i < items.size(); ++i) {
    const Hash128 want = HashItem(items[i], seed);
    INFO("isa " << static_cast<int>(hasher.isa()) << " item " << i << " length " << items[i].size()
                << " seed " << seed);
    CHECK(got[i].h1 == want.h1);
    CHECK(got[i].h2 == want.h2);
  }
}

TEST_CASE("ItemHasher: the contract's test vector", "[hash_batch]") {
  // The hasher the read path uses is the best this CPU has.
  CHECK(DefaultItemHasher().isa() ==
        (test::CpuHasAvx512Hash() ? ItemHasher::Isa::kAvx512 : ItemHasher::Isa::kScalar));
  for (const ItemHasher& hasher : Hashers()) {
    const std::vector<std::string> items(8, "hello");
    Hash128 out[8];
    hasher.HashAll(
        items.size(), [&](size_t i) { return std::string_view(items[i]); }, 0, out);
    for (const Hash128& h : out) {
      CHECK(h.h1 == 0xcbd8a7b341bd9b02ULL);
      CHECK(h.h2 == 0x5b1e906a48ae1d19ULL);
    }
  }
}

TEST_CASE("ItemHasher: every length to 80 bytes and mixed lengths per batch equal HashItem",
          "[hash_batch]") {
  std::mt19937_64 rng(20261125);
  for (const ItemHasher& hasher : Hashers()) {
    for (uint32_t seed : {0u, 1u, 0x9747b28cu, 0xffffffffu}) {
      // All eight lanes the same length, for each length.
      for (size_t len = 0; len <= 80; ++len) {
        std::vector<std::string> items;
        for (int j = 0; j < 8; ++j) items.push_back(RandomBytes(rng, len));
        CheckAll(hasher, items, seed);
      }
      // Mixed lengths in every batch (some lanes with blocks, some without),
      // and a count that leaves a remainder for the item-by-item path.
      std::vector<std::string> items;
      for (int i = 0; i < 1003; ++i) items.push_back(RandomBytes(rng, rng() % 81));
      CheckAll(hasher, items, seed);
    }
  }
}

TEST_CASE("ItemHasher: items ending at an unmapped page are read within their bytes",
          "[hash_batch]") {
  const test::GuardedBytes memory(4096);
  std::mt19937_64 rng(7);
  char* first = memory.EndingAtGuard(4096);
  for (size_t i = 0; i < 4096; ++i) first[i] = static_cast<char>(rng() & 0xff);
  for (const ItemHasher& hasher : Hashers()) {
    for (uint32_t len = 0; len <= 48; ++len) {
      // Lane j: an item of len + j bytes ending at the guard page.
      const char* ptr[8];
      uint32_t lens[8];
      for (uint32_t j = 0; j < 8; ++j) {
        lens[j] = len + j;
        ptr[j] = memory.EndingAtGuard(lens[j]);
      }
      Hash128 out[8];
      hasher.HashArrays(ptr, lens, 8, 42, out);
      for (int j = 0; j < 8; ++j) {
        const Hash128 want = HashItem(std::string_view(ptr[j], lens[j]), 42);
        INFO("isa " << static_cast<int>(hasher.isa()) << " length " << lens[j]);
        CHECK(out[j].h1 == want.h1);
        CHECK(out[j].h2 == want.h2);
      }
    }
  }
}

TEST_CASE("ItemHasher: long items with unequal block counts, and empty views with no data",
          "[hash_batch]") {
  std::mt19937_64 rng(31);
  for (const ItemHasher& hasher : Hashers()) {
    std::vector<std::string> storage;
    for (int i = 0; i < 400; ++i) storage.push_back(RandomBytes(rng, rng() % 600));
    // Views, a tenth of them std::string_view{} (data() == nullptr, size 0).
    std::vector<std::string_view> views;
    for (const std::string& s : storage)
      views.push_back(rng() % 10 == 0 ? std::string_view{} : std::string_view(s));
    std::vector<Hash128> got(views.size());
    hasher.HashAll(
        views.size(), [&](size_t i) { return views[i]; }, 99, got.data());
    for (size_t i = 0; i < views.size(); ++i) {
      const Hash128 want = HashItem(views[i], 99);
      INFO("isa " << static_cast<int>(hasher.isa()) << " item " << i << " length "
                  << views[i].size());
      CHECK(got[i].h1 == want.h1);
      CHECK(got[i].h2 == want.h2);
    }
  }
}

}  // namespace
}  // namespace ef
