// Test batches by hand: one key's items with their hashes and stage-0
// positions, as the Coalescer makes them (sorted, unique).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bloom/bit_batch.h"
#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"

namespace ef::test {

// "<tag>-0" .. "<tag>-<n-1>".
inline std::vector<std::string> Items(const std::string& tag, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(tag + "-" + std::to_string(i));
  return out;
}

// The start of the bucket whose keys expire at expire_at (rule 4).
inline int64_t BucketOfExpiry(const Layout& l, int64_t expire_at) {
  return expire_at - l.bucket_seconds - l.window_seconds;
}

// One key holding `items`, with the positions of its bucket's rule (the bucket
// whose keys expire at expire_at).
inline KeyBits KeyOfItems(const Layout& l, const std::string& key,
                          const std::vector<std::string>& items, int64_t expire_at) {
  KeyBits kb;
  kb.key = key;
  kb.expire_at = expire_at;
  kb.bucket_start = BucketOfExpiry(l, expire_at);
  kb.rule = l.RuleFor(kb.bucket_start);
  std::vector<uint32_t> pos(l.k);
  for (const std::string& item : items) {
    const Hash128 h = HashItem(item, l.seed);
    kb.items.push_back(h);
    ComputePositions(h, l.m, l.k, kb.rule, pos.data());
    kb.positions.insert(kb.positions.end(), pos.begin(), pos.end());
  }
  std::sort(kb.positions.begin(), kb.positions.end());
  kb.positions.erase(std::unique(kb.positions.begin(), kb.positions.end()), kb.positions.end());
  return kb;
}

// One key holding the n items "<tag>-0" .. "<tag>-<n-1>".
inline KeyBits ItemsKey(const Layout& l, const std::string& key, const std::string& tag, int n,
                        int64_t expire_at) {
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back(tag + "-" + std::to_string(i));
  return KeyOfItems(l, key, items, expire_at);
}

}  // namespace ef::test
