// Layout v4's size classes (issue 53; the design in docs/DESIGN.md, "Per-user
// sizes: layout version 4"; not in the contract yet). A v4 value starts with one
// header byte, `class + 1`, and its stage 0 has the class's m instead of the
// meta's: class c occupies S_c = (4 + c mod 4) * 2^(c div 4 + 5) bytes of
// allocation (128, 160, 192, 224, 256, 320, ...: four per octave, jemalloc's size
// classes), and its stage 0 m_c = 8 * (S_c - 17) bits, so that a value created at
// its full stage-0 length (S_c - 16 bytes) fits one allocation with Redis's string
// header (at most 10 bytes) and NUL. Every other stage follows rule 8 with m_c in
// place of m, from bit 8. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bloom/stages.h"
#include "common/status.h"

namespace ef {

inline constexpr uint32_t kSizeClassHeaderBits = 8;
// Classes 0 .. kSizeClassLimit - 1 at most (the shift below stays in 64 bits).
inline constexpr uint32_t kSizeClassLimit = 112;

// S_c, the allocation the class's stage-0 value fills (c < kSizeClassLimit).
inline uint64_t SizeClassBytes(uint32_t c) {
  return static_cast<uint64_t>(4 + c % 4) << (c / 4 + 5);
}

// m_c, stage 0's bits in class c.
inline uint64_t SizeClassBits(uint32_t c) { return 8 * (SizeClassBytes(c) - 17); }

// The stage table of class c: `p` with m0 = m_c and the first stage at bit 8.
// kInvalidArgument (as ComputeStages) when the class's table does not fit
// Redis's 2^32-bit strings.
StatusOr<std::vector<Stage>> ComputeClassStages(StageParams p, uint32_t c);

// The number of classes whose table is valid for `p` (classes 0 .. n-1; the
// tables grow with c, so the first invalid one ends the list).
uint32_t SizeClassCount(const StageParams& p);

// The smallest class whose stage 0 has at least `bits` bits (the default class:
// bits = the meta's m, v3's stage 0).
uint32_t SmallestClassWithBits(uint64_t bits);

// The items that set `set_bits` of `m` bits with `k` positions each, expected:
// -(m / k) * ln(1 - set_bits / m).
double ItemsForSetBits(double m, uint32_t k, double set_bits);

// Design capacity of stage 0 of `m` bits with `k` positions at fill_ppm:
// ItemsForSetBits at m * fill_ppm / 10^6.
double StageCapacity(uint64_t m, uint32_t k, uint32_t fill_ppm);

// The estimated number of distinct items in a value of this stage table, from
// the set bits X_s of each stage it holds: sum of -(m_s / k_s) ln(1 - X_s / m_s)
// (X_s capped at m_s - 1). 0 for an empty value.
double EstimateItems(std::string_view value, const std::vector<Stage>& stages);

}  // namespace ef
