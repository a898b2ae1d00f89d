// Contract v1, rule 2: for i = 0..k-1, p_i = ((h1 + i*h2) mod 2^64) mod m.
// (Guava MURMUR128_MITZ_64 index rule without the sign mask; rueidisprob.)
#pragma once

#include <cstdint>

#include "bloom/hash.h"

namespace ef {

// Writes k positions to out[0..k-1]. Pure; thread-safe.
inline void ComputePositions(Hash128 h, uint32_t m, uint32_t k, uint32_t* out) {
  uint64_t x = h.h1;
  for (uint32_t i = 0; i < k; ++i) {
    out[i] = static_cast<uint32_t>(x % m);
    x += h.h2;  // unsigned wrap-around is the mod 2^64 of the contract
  }
}

// Bit test on a Redis bitmap value (bit 0 = MSB of byte 0). Bits beyond the
// value's length are 0, as Redis defines them.
inline bool TestBit(const char* data, size_t len, uint32_t pos) {
  size_t byte = pos >> 3;
  if (byte >= len) return false;
  return (static_cast<unsigned char>(data[byte]) >> (7 - (pos & 7))) & 1;
}

}  // namespace ef
