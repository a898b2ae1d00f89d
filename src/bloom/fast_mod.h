// x mod m for a 64-bit x and a fixed 32-bit m > 0, by multiplications instead
// of a 64-bit division: the quotient by Granlund and Montgomery's round-up
// method ("Division by Invariant Integers using Multiplication", 1994), in the
// branch-free form that always uses the 65-bit magic number (the one libdivide
// calls branchfree): q = (((x - t) >> 1) + t) >> shift with t = mulhi(x, magic),
// then x - q * m. Exact for every x and m (it computes floor(x / m)), so the
// positions of the contract (rule 2, bloom/positions.h) do not change;
// tests/unit/bloom/fast_mod_test.cc checks it against %.
//
// Where it pays: many remainders by one m that do not wait on each other
// (TestItems' probe rounds: two multiplications instead of a 64-bit DIV).
#pragma once

#include <bit>
#include <cstdint>

namespace ef {

class FastMod {
 public:
  explicit FastMod(uint32_t m) : m_(m) {
    if (m <= 1) {  // x % 1 == 0: the mask clears whatever the quotient is
      mask_ = 0;
      return;
    }
    const int log2 = 63 - std::countl_zero(uint64_t{m});
    if ((m & (m - 1)) == 0) {  // a power of two: t = 0, q = (x >> 1) >> (log2 - 1)
      magic_ = 0;
      shift_ = log2 - 1;
      return;
    }
    // magic = floor(2^(64 + log2 + 1) / m) + 1 - 2^64, in 64 bits.
    const unsigned __int128 num = static_cast<unsigned __int128>(1) << (64 + log2);
    uint64_t proposed = static_cast<uint64_t>(num / m);
    const uint64_t rem = static_cast<uint64_t>(num % m);
    const uint64_t twice_rem = rem + rem;
    proposed += proposed;
    if (twice_rem >= m || twice_rem < rem) proposed += 1;
    magic_ = proposed + 1;
    shift_ = log2;
  }

  uint32_t Mod(uint64_t x) const {
    const uint64_t t = static_cast<uint64_t>((static_cast<unsigned __int128>(x) * magic_) >> 64);
    const uint64_t q = (((x - t) >> 1) + t) >> shift_;
    return static_cast<uint32_t>((x - q * m_) & mask_);
  }

  uint32_t m() const { return static_cast<uint32_t>(m_); }
  // The parts of Mod, for vector forms of it (bloom/probe_rounds.cc).
  uint64_t magic() const { return magic_; }
  int shift() const { return shift_; }
  uint64_t mask() const { return mask_; }

 private:
  uint64_t magic_ = 0;
  uint64_t m_ = 0;
  uint64_t mask_ = ~uint64_t{0};
  int shift_ = 0;
};

}  // namespace ef
