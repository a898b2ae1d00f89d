// BitBatch: the bits one batch sets, coalesced per Redis key. Built by the
// pipeline's Coalescer, written by a BitSink. Storage is reused across batches:
// Clear() keeps capacity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/positions.h"

namespace ef {

struct KeyBits {
  std::string key;                  // `<prefix>{<user>}:<bucket>`
  int64_t expire_at = 0;            // EXPIREAT, epoch seconds
  std::vector<uint32_t> positions;  // stage 0's, sorted, unique once the batch is sealed
  // The items' hashes, in arrival order (repeats possible): the writer places
  // them in later stages, or computes the positions again by another rule.
  std::vector<Hash128> items;
  int64_t bucket_start = 0;  // the bucket the key names, epoch seconds
  // The rule `positions` follow (the coalescer's guess of the bucket's rule: a
  // writer whose stored layout says otherwise computes them again from `items`).
  PositionRule rule = PositionRule::kModulo;
  // The coalescer left `positions` empty: by the layout it knew, the key has a
  // size class (docs/FORMAT.md rule 11), whose positions follow the class's table
  // and are planned by the writer from `items`. A writer whose stored layout says
  // the key has no class computes them from `items` (as for another rule).
  bool classed = false;
};

struct BitBatch {
  std::vector<KeyBits> keys;  // only the first `size` entries are live
  size_t size = 0;

  void Clear() { size = 0; }
  bool empty() const { return size == 0; }
  uint64_t TotalBits() const {
    uint64_t n = 0;
    for (size_t i = 0; i < size; ++i) n += keys[i].positions.size();
    return n;
  }
};

}  // namespace ef
