// UniquePositions: sorts bit positions ascending and drops repeats, as the
// writers need them (a position repeated in one BITFIELD reads 1 the second time,
// which the lost-key check would take for old data). Through a bitmap of one bit
// per position of a range [base, base + max_bits) plus one summary bit per
// bitmap word: every position is read once, then the distinct ones are written
// back in order by scanning the summary's set bits, so a call costs O(n + bits
// set + max_bits / 4096) instead of std::sort's O(n log n). Measured (ef_microbench
// BM_Coalesce_*, BM_StagePlan/*): the bitmap beats std::sort at every size for
// ranges up to 16,384 bits, and for larger ranges (up to kMaxBitmapBits) once
// there are more than 16 positions and at least half as many as summary words
// (max_bits / 4096); otherwise Run uses std::sort + std::unique.
// Owns max_bits / 8 bytes of scratch for the largest range seen (grown on first
// use, then reused: no allocation in a steady state), all zero between calls.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ef {

class UniquePositions {
 public:
  // Ranges above this many bits always use std::sort (the bitmap would be over
  // 128 KiB: it would not stay in cache).
  static constexpr uint64_t kMaxBitmapBits = uint64_t{1} << 20;

  // Sorts [first, last) ascending and removes repeats; every value v must satisfy
  // base <= v < base + max_bits. Returns the new end (the distinct values are at
  // [first, end)).
  uint32_t* Run(uint32_t* first, uint32_t* last, uint32_t base, uint64_t max_bits);

 private:
  uint32_t* RunBitmap(uint32_t* first, uint32_t* last, uint32_t base, uint64_t summary_words);

  std::vector<uint64_t> words_;    // one bit per position of the range
  std::vector<uint64_t> summary_;  // one bit per non-zero word of words_
};

}  // namespace ef
