#include "pipeline/coalescer.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/positions.h"

namespace ef {

Coalescer::Coalescer(Layout layout) : layout_(std::move(layout)) {
  if (layout_.m <= kMaxBitmapBits) {
    words_.assign((layout_.m + 63) / 64, 0);
    summary_.assign((words_.size() + 63) / 64, 0);
  }
}

void Coalescer::Add(const Event& event) {
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
    kb.expire_at = ExpireAt(bucket, layout_.bucket_seconds, layout_.window_seconds);
    kb.positions.clear();
    kb.items.clear();
  }
  KeyBits& kb = batch_.keys[idx];
  std::vector<uint32_t>& positions = kb.positions;
  const size_t old_size = positions.size();
  positions.resize(old_size + event.items.size() * layout_.k);
  uint32_t* out = positions.data() + old_size;
  const bool keep_items = layout_.stages > 1;
  for (std::string_view item : event.items) {
    const Hash128 h = HashItem(item, layout_.seed);
    ComputePositions(h, layout_.m, layout_.k, out);
    out += layout_.k;
    if (keep_items) kb.items.push_back(h);
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

void Coalescer::SortUniqueBitmap(std::vector<uint32_t>* p) {
  uint64_t* const words = words_.data();
  uint32_t* out = p->data();
  // Emits the set bits of words[w] (which must be non-zero) and zeroes it.
  auto drain = [words, &out](size_t w) {
    uint64_t bits = words[w];
    words[w] = 0;
    const auto base = static_cast<uint32_t>(w * 64);
    do {
      *out++ = base + static_cast<uint32_t>(std::countr_zero(bits));
      bits &= bits - 1;
    } while (bits != 0);
  };
  // Every position is read before the distinct ones are written back in order.
  if (summary_.size() == 1) {
    // m <= 4096: the summary fits in a register (a memory one would chain every
    // update through store forwarding).
    uint64_t sw = 0;
    for (const uint32_t x : *p) {
      words[x >> 6] |= uint64_t{1} << (x & 63);
      sw |= uint64_t{1} << (x >> 6);
    }
    for (; sw != 0; sw &= sw - 1) drain(static_cast<size_t>(std::countr_zero(sw)));
  } else {
    uint64_t* const summary = summary_.data();
    for (const uint32_t x : *p) {
      words[x >> 6] |= uint64_t{1} << (x & 63);
      summary[x >> 12] |= uint64_t{1} << ((x >> 6) & 63);
    }
    for (size_t s = 0; s < summary_.size(); ++s) {
      uint64_t sw = summary[s];
      summary[s] = 0;
      for (; sw != 0; sw &= sw - 1) drain(s * 64 + static_cast<size_t>(std::countr_zero(sw)));
    }
  }
  p->resize(static_cast<size_t>(out - p->data()));
}

void Coalescer::Seal() {
  for (size_t i = 0; i < batch_.size; ++i) {
    std::vector<uint32_t>& p = batch_.keys[i].positions;
    if (p.size() <= 1) continue;
    // Measured: the bitmap beats std::sort at every size for m <= 16384, and
    // above 16 positions for m up to kMaxBitmapBits; below that sort wins on the
    // sparse scan of a large bitmap.
    if (!words_.empty() && (summary_.size() <= 4 || p.size() > 16)) {
      SortUniqueBitmap(&p);
    } else {
      std::sort(p.begin(), p.end());
      p.erase(std::unique(p.begin(), p.end()), p.end());
    }
  }
}

void Coalescer::Clear() {
  batch_.Clear();
  index_.Clear();
}

}  // namespace ef
