#include "pipeline/coalescer.h"

#include <algorithm>
#include <utility>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/positions.h"

namespace ef {

Coalescer::Coalescer(Layout layout) : layout_(std::move(layout)) {}

void Coalescer::Add(const Event& event, const Hash128* hashes) {
  int64_t ts_s = event.ts_ms >= 0 ? event.ts_ms / 1000 : -((-event.ts_ms + 999) / 1000);
  int64_t bucket = BucketStart(ts_s, layout_.bucket_seconds);
  // The bucket's name is formatted once per bucket instead of once per event.
  scratch_key_.clear();
  AppendKeyWithBucketName(layout_.prefix, event.user, BucketName(bucket), &scratch_key_);
  bool added = false;
  const uint32_t idx = index_.FindOrAdd(
      HashKeyBytes(scratch_key_),
      [this](uint32_t entry) { return batch_.keys[entry].key == scratch_key_; }, &added);
  if (added) {
    // Entries are numbered as batch_ numbers its keys: idx == batch_.size.
    ++batch_.size;
    if (idx == batch_.keys.size()) batch_.keys.emplace_back();
    KeyBits& kb = batch_.keys[idx];
    kb.key.assign(scratch_key_);
    kb.bucket_start = bucket;
    kb.expire_at = ExpireAt(bucket, layout_.bucket_seconds, layout_.window_seconds);
    kb.rule = layout_.RuleFor(bucket);
    kb.classed = layout_.HasClass(bucket);
    kb.positions.clear();
    kb.items.clear();
  }
  KeyBits& kb = batch_.keys[idx];
  // The hashes go to kb.items first, the positions are computed from there. (Hash
  // and push_back in one loop had the compiler reload each returned hash from the
  // stack as one 16-byte load over two 8-byte stores: a failed store forwarding
  // that waits for every older store, the cold positions' included, and cost the
  // loop ~28 ns per item, BM_Coalesce_List10 +21% against layout v2's coalescer.)
  const size_t first = kb.items.size();
  kb.items.resize(first + event.items.size());
  Hash128* h = kb.items.data() + first;
  if (hashes) {
    std::copy(hashes, hashes + event.items.size(), h);
  } else {
    for (size_t i = 0; i < event.items.size(); ++i) h[i] = HashItem(event.items[i], layout_.seed);
  }
  if (kb.classed) return;  // the writer plans its class's positions from kb.items
  std::vector<uint32_t>& positions = kb.positions;
  const size_t old_size = positions.size();
  positions.resize(old_size + event.items.size() * layout_.k);
  uint32_t* out = positions.data() + old_size;
  const PositionRule rule = kb.rule;
  for (size_t i = 0; i < event.items.size(); ++i) {
    ComputePositions(h[i], layout_.m, layout_.k, rule, out);
    out += layout_.k;
  }
}

std::string_view Coalescer::BucketName(int64_t bucket_start) {
  const auto slot = static_cast<uint64_t>(bucket_start / layout_.bucket_seconds);
  BucketNameSlot& s = bucket_names_[slot % kBucketNameSlots];
  if (!s.valid || s.start != bucket_start) {
    s.valid = true;
    s.start = bucket_start;
    s.name = FormatBucket(bucket_start, layout_.bucket_seconds);
  }
  return s.name;
}

void Coalescer::Seal() {
  for (size_t i = 0; i < batch_.size; ++i) {
    std::vector<uint32_t>& p = batch_.keys[i].positions;
    uint32_t* end = unique_.Run(p.data(), p.data() + p.size(), 0, layout_.m);
    p.resize(static_cast<size_t>(end - p.data()));
  }
}

void Coalescer::Clear() {
  batch_.Clear();
  index_.Clear();
}

}  // namespace ef
