// Layout v4's size classes (docs/FORMAT.md rule 11; the design and its model in
// docs/DESIGN.md, "Per-user sizes: layout version 4"). A v4 value starts with one
// header byte, `class + 1`, and its stage 0 has the class's m instead of the
// meta's: class c occupies S_c = (4 + c mod 4) * 2^(c div 4 + 4) bytes of
// allocation (64, 80, 96, 112, 128, 160, ...: four per octave, jemalloc's size
// classes), and its stage 0 m_c = 8 * (S_c - 17) bits, so that a value created at
// its full stage-0 length (S_c - 16 bytes) fits one allocation with Redis's string
// header and NUL. Every other stage follows rule 8 with m_c in place of m, from
// bit 8, up to the class's own stage limit (ClassStageLimit: a small class has
// more stages, so that every class caps a key at about the capacity of the
// layout's stage limit). Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "bloom/stages.h"
#include "common/status.h"

namespace ef {

inline constexpr uint32_t kSizeClassHeaderBits = 8;
// Classes 0 .. kSizeClassLimit - 1 at most (the shift below stays in 64 bits).
inline constexpr uint32_t kSizeClassLimit = 112;
// The class rule sizes stage 0 for 1 / kClassSplit of the estimate: stages 0 and
// 1 (twice the capacity, rule 8 with growth 2) hold it together, and a day
// lighter than the one before allocates stage 0 alone.
inline constexpr uint32_t kClassSplit = 3;
// The class rule keeps the previous key's class when it is at most this many
// classes above the one the estimate chooses (never below: a smaller class would
// grow a third stage). A class step is 2^(1/4) = 1.19x, about the span of the
// day-to-day noise of a steady user, whose class otherwise flips between two
// neighbours: two stage tables in one read (docs/DESIGN.md).
inline constexpr uint32_t kClassKeep = 1;

// S_c, the allocation the class's stage-0 value fills (c < kSizeClassLimit).
inline uint64_t SizeClassBytes(uint32_t c) {
  return static_cast<uint64_t>(4 + c % 4) << (c / 4 + 4);
}

// m_c, stage 0's bits in class c.
inline uint64_t SizeClassBits(uint32_t c) { return 8 * (SizeClassBytes(c) - 17); }

// The stage limit of class c in a layout whose stage 0 has m bits and whose
// stage limit is `stages`: stages + e, where e is the smallest integer (negative
// for a class larger than m) with m_c * 2^e >= m, at most 32. 0 when that is
// below 1: the class is too large for the layout and never used.
uint32_t ClassStageLimit(uint64_t m, uint32_t stages, uint32_t c);

// The stage table of class c for the layout's parameters `p` (p.m0 = the meta's
// m, p.stages its stage limit): rule 8 with m0 = m_c, ClassStageLimit stages,
// the first stage at bit 8. kInvalidArgument when the class has no stage (limit
// 0) or its table does not fit Redis's 2^32-bit strings.
StatusOr<std::vector<Stage>> ComputeClassStages(StageParams p, uint32_t c);

// The number of classes valid for `p` (classes 0 .. n-1; the first class whose
// table is invalid ends the list).
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

// Rule 11's class choice (a writer's rule: readers take the class from the
// header). `estimate`: the smaller EstimateItems of the user's previous two
// buckets that exist, none if neither does. Without one, the default class
// (SmallestClassWithBits(p.m0)); with one, the smallest class whose stage-0
// capacity (StageCapacity of m_c, p.k0, p.fill_ppm) is at least estimate /
// kClassSplit. Either is capped at class_count - 1 (class_count >= 1:
// SizeClassCount(p)). `previous`: the class named by the newer of those two
// buckets' keys that names one; the choice c becomes `previous` when c <=
// previous <= c + kClassKeep (hysteresis: a user whose estimate moves by less
// than a class step keeps one class, so a read meets one stage table).
uint32_t ChooseClass(const StageParams& p, uint32_t class_count, std::optional<double> estimate,
                     std::optional<uint32_t> previous = std::nullopt);

}  // namespace ef
