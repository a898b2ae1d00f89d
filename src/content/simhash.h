// The content fingerprint contract (docs/CONTENT.md "1. Fingerprint"): Charikar's
// Simhash of weighted tokens, as in the course chapter (seed 003) and Manku et
// al. (WWW 2007). For tokens t_i with weights w_i (integers, 0 .. 2^32 - 1):
//   h_i = XXH64(UTF-8 bytes of t_i, seed)             (xxHash's XXH64, 64 bits)
//   V[b] = sum over i of (bit b of h_i ? +w_i : -w_i)   for b = 0 .. 63 (exact, int64)
//   fingerprint bit b = 1 iff V[b] > 0                 (0 at a tie, and for no tokens)
// where bit b of x is (x >> b) & 1. A token listed twice counts with both weights.
// Two contents are near-duplicates when the Hamming distance of their
// fingerprints is at most content.max_distance (default 3).
// Pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ef::content {

struct WeightedToken {
  std::string token;  // UTF-8
  uint32_t weight = 1;
};

// XXH64 of the token's bytes with `seed`.
uint64_t TokenHash(std::string_view token, uint64_t seed);

// The fingerprint of the tokens (rule above).
uint64_t Simhash(const std::vector<WeightedToken>& tokens, uint64_t seed);

// The same from token hashes already computed (TokenHash) and their weights.
uint64_t SimhashOfHashes(const uint64_t* hashes, const uint32_t* weights, size_t n);

inline int HammingDistance(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

}  // namespace ef::content
