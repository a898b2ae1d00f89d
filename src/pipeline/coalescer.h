// Coalescer: decoded events → a BitBatch with one entry per Redis key
// (user × bucket of the event time), each item hashed once and its k positions
// merged; Seal() sorts and dedupes each key's positions. Reuses all storage
// across batches. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "bloom/bit_batch.h"
#include "bloom/layout.h"
#include "event/event.h"

namespace ef {

class Coalescer {
 public:
  explicit Coalescer(Layout layout);

  // Adds every item of the event to its key. The event must have passed
  // decoding (non-empty user and items, ts inside the window).
  void Add(const Event& event);
  // Sorts and dedupes positions; the batch is then ready to write.
  void Seal();
  const BitBatch& batch() const { return batch_; }
  bool empty() const { return batch_.empty(); }
  void Clear();

 private:
  Layout layout_;
  BitBatch batch_;
  std::unordered_map<std::string, size_t> index_;
  std::string scratch_key_;
  std::vector<uint32_t> scratch_pos_;
};

}  // namespace ef
