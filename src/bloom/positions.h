// The position rules of the contract (docs/FORMAT.md):
// - rule 2 (versions 1 and 2, and in version 3 the buckets before v3_from):
//   for i = 0..k-1, p_i = ((h1 + i*h2) mod 2^64) mod m;
// - rule 9 (version 3, the buckets from v3_from on): RemixV3 then ReduceV3 below.
// Pure and thread-safe.
#pragma once

#include <cstdint>

#include "bloom/hash.h"

namespace ef {

// Which rule a bucket's key follows (Layout::RuleFor picks it by bucket start).
enum class PositionRule : uint8_t {
  kModulo,  // rule 2: x mod m
  kRemix,   // rule 9 (version 3): mulhi(remix(x), m)
};

// Writes k positions to out[0..k-1]. Pure; thread-safe.
inline void ComputePositions(Hash128 h, uint32_t m, uint32_t k, uint32_t* out) {
  uint64_t x = h.h1;
  for (uint32_t i = 0; i < k; ++i) {
    out[i] = static_cast<uint32_t>(x % m);
    x += h.h2;  // unsigned wrap-around is the mod 2^64 of the contract
  }
}

// The position rule of layout version 3 (issue 29; docs/FORMAT.md gets it with
// the version): for i = 0..k-1,
//   x   = (h1 + i*h2) mod 2^64
//   y   = ((x XOR (x >> 32)) * 0xff51afd7ed558ccd) mod 2^64
//   p_i = floor(y * m / 2^64)          (the high word of a 64x64->128 product)
// The xorshift-multiply remix makes the k positions behave as independent draws
// (no false-positive floor at small m: docs/perf-history.md, "Layout v3: the
// position rule"); the multiply-shift replaces the 64-bit division. Integers only.
inline constexpr uint64_t kV3Remix = 0xff51afd7ed558ccdULL;  // MurmurHash3 fmix64's first

inline uint64_t RemixV3(uint64_t x) { return (x ^ (x >> 32)) * kV3Remix; }

inline uint32_t ReduceV3(uint64_t y, uint32_t m) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(y) * m) >> 64);
}

// Writes the k version-3 positions in [0, m) to out[0..k-1]. Pure; thread-safe.
inline void ComputePositionsV3(Hash128 h, uint32_t m, uint32_t k, uint32_t* out) {
  uint64_t x = h.h1;
  for (uint32_t i = 0; i < k; ++i) {
    out[i] = ReduceV3(RemixV3(x), m);
    x += h.h2;
  }
}

// Position of progression value x (= h1 + i*h2 mod 2^64) in [0, m) by `rule`.
inline uint32_t PositionOf(PositionRule rule, uint64_t x, uint32_t m) {
  return rule == PositionRule::kRemix ? ReduceV3(RemixV3(x), m) : static_cast<uint32_t>(x % m);
}

// The k positions of h in [0, m) by `rule`.
inline void ComputePositions(Hash128 h, uint32_t m, uint32_t k, PositionRule rule, uint32_t* out) {
  if (rule == PositionRule::kRemix) return ComputePositionsV3(h, m, k, out);
  ComputePositions(h, m, k, out);
}

// Bit test on a Redis bitmap value (bit 0 = MSB of byte 0). Bits beyond the
// value's length are 0, as Redis defines them.
inline bool TestBit(const char* data, size_t len, uint32_t pos) {
  size_t byte = pos >> 3;
  if (byte >= len) return false;
  return (static_cast<unsigned char>(data[byte]) >> (7 - (pos & 7))) & 1;
}

}  // namespace ef
