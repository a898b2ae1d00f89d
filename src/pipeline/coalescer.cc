#include "pipeline/coalescer.h"

#include <algorithm>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/positions.h"

namespace ef {

Coalescer::Coalescer(Layout layout) : layout_(std::move(layout)), scratch_pos_(layout_.k) {}

void Coalescer::Add(const Event& event) {
  int64_t ts_s = event.ts_ms >= 0 ? event.ts_ms / 1000 : -((-event.ts_ms + 999) / 1000);
  int64_t bucket = BucketStart(ts_s, layout_.bucket_seconds);
  scratch_key_.clear();
  AppendKey(layout_.prefix, event.user, bucket, layout_.bucket_seconds, &scratch_key_);
  auto it = index_.find(scratch_key_);
  size_t idx;
  if (it == index_.end()) {
    idx = batch_.size++;
    if (idx == batch_.keys.size()) batch_.keys.emplace_back();
    KeyBits& kb = batch_.keys[idx];
    kb.key.assign(scratch_key_);
    kb.expire_at = ExpireAt(bucket, layout_.bucket_seconds, layout_.window_seconds);
    kb.positions.clear();
    index_.emplace(scratch_key_, idx);
  } else {
    idx = it->second;
  }
  std::vector<uint32_t>& positions = batch_.keys[idx].positions;
  for (std::string_view item : event.items) {
    ComputePositions(HashItem(item, layout_.seed), layout_.m, layout_.k, scratch_pos_.data());
    positions.insert(positions.end(), scratch_pos_.begin(), scratch_pos_.end());
  }
}

void Coalescer::Seal() {
  for (size_t i = 0; i < batch_.size; ++i) {
    auto& p = batch_.keys[i].positions;
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
}

void Coalescer::Clear() {
  batch_.Clear();
  index_.clear();
}

}  // namespace ef
