#include "content/simhash.h"

#include <xxhash.h>

#include <array>

namespace ef::content {

uint64_t TokenHash(std::string_view token, uint64_t seed) {
  return XXH64(token.data(), token.size(), seed);
}

uint64_t SimhashOfHashes(const uint64_t* hashes, const uint32_t* weights, size_t n) {
  // V[b] = 2 * (sum of weights with bit b set) - (sum of all weights): one add
  // per set bit instead of one add or subtract per bit.
  std::array<int64_t, 64> ones{};
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t w = weights[i];
    total += w;
    for (uint64_t h = hashes[i]; h != 0; h &= h - 1)
      ones[static_cast<size_t>(__builtin_ctzll(h))] += w;
  }
  uint64_t fp = 0;
  for (int b = 0; b < 64; ++b)
    if (2 * ones[static_cast<size_t>(b)] - total > 0) fp |= uint64_t{1} << b;
  return fp;
}

uint64_t Simhash(const std::vector<WeightedToken>& tokens, uint64_t seed) {
  std::vector<uint64_t> hashes(tokens.size());
  std::vector<uint32_t> weights(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    hashes[i] = TokenHash(tokens[i].token, seed);
    weights[i] = tokens[i].weight;
  }
  return SimhashOfHashes(hashes.data(), weights.data(), tokens.size());
}

}  // namespace ef::content
