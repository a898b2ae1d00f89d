// HashItem (bloom/hash.h, contract v1 rule 1) for many items at once: eight
// MurmurHash3_x64_128 computations side by side in 64-bit vector lanes where
// the CPU has AVX-512 (F, DQ, BW, VL), else the reference library item by item.
// Both give HashItem's result bit for bit (tests/unit/bloom/hash_batch_test.cc checks
// every length up to 80 bytes, mixed lengths in one batch, random lengths to 600
// bytes, empty views without data, and items that end at an unmapped page).
//
// The read side hashes every candidate of a request (read/bloom_reader.cc
// TestItems); item by item, the reference code's tail switch (a jump on the
// length) and its serial multiplications cost most of a request's hashing.
// Measured 2026-11-25 (docs/PERFORMANCE.md "Read side"): ef_microbench
// BM_HashAll, 1,000 10-byte IDs: 6.06 us one by one, 2.47 us here (24-byte hex
// IDs: 6.46 and 3.46 us); BM_TestItems light/heavy/top 26.2/41.7/61.8 ->
// 20.5/35.9/56.1 us; `serve` 125 -> 117 us of CPU per request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "bloom/hash.h"

namespace ef {

class ItemHasher {
 public:
  static constexpr size_t kLanes = 8;
  enum class Isa { kScalar, kAvx512 };

  // max_isa: the most HashArrays may use (tests pass kScalar to check that path too).
  explicit ItemHasher(Isa max_isa = Isa::kAvx512);
  Isa isa() const { return isa_; }

  // out[i] = HashItem(std::string_view(ptr[i], len[i]), seed) for i < n. Reads
  // no byte outside the items. Thread-safe (no state but the ISA).
  void HashArrays(const char* const* ptr, const uint32_t* len, size_t n, uint32_t seed,
                  Hash128* out) const;

  // out[i] = HashItem(item(i), seed) for i < n; `item(i)` returns a
  // std::string_view or a reference to a string (a string returned by value
  // would be gone before it is read: the static_assert refuses it), of a size
  // below 2^32. The items' addresses and sizes go through arrays on the stack,
  // kChunk at a time: the vector path loads eight of each at once, and they are
  // stored long enough before that for the loads to read the cache, not wait
  // for the stores.
  template <typename ItemAt>
  void HashAll(size_t n, const ItemAt& item, uint32_t seed, Hash128* out) const {
    using Returned = std::invoke_result_t<const ItemAt&, size_t>;
    static_assert(std::is_same_v<std::remove_cv_t<Returned>, std::string_view> ||
                      std::is_lvalue_reference_v<Returned>,
                  "item(i) must return a std::string_view or a reference to a string");
    const char* ptr[kChunk];
    uint32_t len[kChunk];
    for (size_t first = 0; first < n; first += kChunk) {
      const size_t count = n - first < kChunk ? n - first : kChunk;
      for (size_t j = 0; j < count; ++j) {
        const std::string_view v = item(first + j);
        ptr[j] = v.data();
        len[j] = static_cast<uint32_t>(v.size());
      }
      HashArrays(ptr, len, count, seed, out + first);
    }
  }

 private:
  static constexpr size_t kChunk = 128;
  Isa isa_ = Isa::kScalar;
};

// The best hasher this CPU has (constructed once; thread-safe).
const ItemHasher& DefaultItemHasher();

}  // namespace ef
