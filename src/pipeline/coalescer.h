// Coalescer: decoded events → a BitBatch with one entry per Redis key
// (user × bucket of event.ts_ms, the write time: the decoder has already limited it
// to its clock, docs/FORMAT.md rule 4), each item hashed once and its k positions
// merged (stage 0's positions, by the rule of the key's bucket; none for a key
// with a size class, layout v4; the item hashes are kept too, for the writer to
// place in later stages or to compute again by another rule); Seal() sorts and
// dedupes each key's positions. Reuses all storage
// across batches: in a steady state Add, Seal and Clear allocate nothing. Not
// thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/bit_batch.h"
#include "bloom/layout.h"
#include "bloom/unique_positions.h"
#include "event/event.h"
#include "pipeline/key_index.h"

namespace ef {

class Coalescer {
 public:
  explicit Coalescer(Layout layout);

  // The stored layout's rules (the writer's effective layout): keys of buckets
  // from v3_from on get rule 9's positions, if v3; keys of buckets from v4_from on
  // get none, if v4 (KeyBits::classed: their class's positions are the writer's
  // to plan). Takes effect for keys added from now on. (A key whose rule turns out
  // wrong is not lost: the writer computes its positions again from its items.)
  void SetStoredRules(bool v3, int64_t v3_from, bool v4, int64_t v4_from) {
    layout_.v3 = v3;
    layout_.v3_from = v3_from;
    layout_.v4 = v4;
    layout_.v4_from = v4_from;
  }

  // Adds every item of the event to its key, the bucket of event.ts_ms. The event
  // must have passed decoding (a valid user ID, non-empty items, ts inside the
  // window and not later than the decoder's clock).
  // hashes (if given): HashItem(event.items[i], the layout's seed) for each
  // item, computed by the caller (the near-duplicate path needs them first).
  void Add(const Event& event, const Hash128* hashes = nullptr);
  // Sorts and dedupes positions; the batch is then ready to write.
  void Seal();
  const BitBatch& batch() const { return batch_; }
  bool empty() const { return batch_.empty(); }
  void Clear();

 private:
  // FormatBucket(bucket_start), cached for the last few buckets seen.
  std::string_view BucketName(int64_t bucket_start);
  static constexpr size_t kBucketNameSlots = 8;

  struct BucketNameSlot {
    bool valid = false;
    int64_t start = 0;
    std::string name;
  };

  Layout layout_;
  BitBatch batch_;
  // Key hash → entry of batch_.keys; entry i is batch_.keys[i].
  KeyIndex index_;
  // Indexed by bucket number (bucket start / bucket_seconds) mod the size.
  std::array<BucketNameSlot, kBucketNameSlots> bucket_names_;
  std::string scratch_key_;
  UniquePositions unique_;  // Seal's sort and dedupe
};

}  // namespace ef
