#include "write/expire_cache.h"

#include <algorithm>
#include <climits>

#include "bloom/hash.h"

namespace ef {

ExpireCache::ExpireCache(size_t capacity, int64_t refresh_s, int64_t min_remaining_s)
    : generation_capacity_(capacity == 0 ? 0 : capacity / 2 + (capacity % 2)),
      refresh_s_(refresh_s),
      min_remaining_s_(min_remaining_s) {}

uint64_t ExpireCache::KeyHash(std::string_view key) {
  // MurmurHash3 x64 128, as for items; a different seed keeps it independent.
  const uint64_t h = HashItem(key, 0x65787069).h1;
  return h == 0 ? 1 : h;
}

const ExpireCache::Slot* ExpireCache::Table::Find(uint64_t hash) const {
  if (slots.empty()) return nullptr;
  const size_t mask = slots.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots[i];
    if (s.hash == hash) return &s;
    if (s.hash == 0) return nullptr;
  }
}

ExpireCache::Slot* ExpireCache::Table::FindOrInsert(uint64_t hash) {
  if (2 * (used + 1) > slots.size()) {
    // Keep the load at most 1/2: re-insert into a table twice the size.
    std::vector<Slot> old;
    old.swap(slots);
    slots.assign(std::max<size_t>(1024, old.size() * 2), Slot{});
    used = 0;
    for (const Slot& s : old) {
      if (s.hash != 0) *FindOrInsert(s.hash) = s;
    }
  }
  const size_t mask = slots.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    Slot& s = slots[i];
    if (s.hash == hash) return &s;
    if (s.hash == 0) {
      s.hash = hash;
      ++used;
      return &s;
    }
  }
}

void ExpireCache::Table::Clear() {
  std::fill(slots.begin(), slots.end(), Slot{});
  used = 0;
}

bool ExpireCache::Fresh(const Slot& e, int64_t expire_at, int64_t now_s) const {
  return e.expire_at != 0 && e.expire_at == expire_at &&
         now_s - static_cast<int64_t>(e.set_at_s) < refresh_s_ &&
         expire_at - now_s >= min_remaining_s_;
}

const ExpireCache::Slot* ExpireCache::Lookup(uint64_t hash) const {
  if (const Slot* s = current_.Find(hash)) return s;
  return previous_.Find(hash);
}

ExpireCache::Slot* ExpireCache::Touch(uint64_t hash) {
  if (Slot* s = current_.Find(hash)) return s;
  Slot carried;
  if (const Slot* old = previous_.Find(hash)) carried = *old;
  if (current_.used >= generation_capacity_) {
    // The current generation is full: it becomes the previous one (the older
    // is dropped), and the new current one reuses the dropped one's memory.
    std::swap(previous_, current_);
    current_.Clear();
  }
  Slot* s = current_.FindOrInsert(hash);
  if (carried.hash == hash) *s = carried;
  return s;
}

bool ExpireCache::Known(std::string_view key, int64_t expire_at, int64_t now_s,
                        uint32_t* sentinel) const {
  return generation_capacity_ && Known(KeyHash(key), expire_at, now_s, sentinel);
}

bool ExpireCache::Known(uint64_t key_hash, int64_t expire_at, int64_t now_s,
                        uint32_t* sentinel) const {
  if (!generation_capacity_) return false;
  const Slot* s = Lookup(key_hash);
  if (!s) return false;
  const bool fresh = Fresh(*s, expire_at, now_s);
  if (fresh && sentinel) *sentinel = s->sentinel;
  return fresh;
}

bool ExpireCache::StageKnown(std::string_view key, int64_t now_s, uint32_t* stage,
                             uint32_t* fill) const {
  return generation_capacity_ && StageKnown(KeyHash(key), now_s, stage, fill);
}

bool ExpireCache::StageKnown(uint64_t key_hash, int64_t now_s, uint32_t* stage, uint32_t* fill,
                             uint8_t* header) const {
  if (!generation_capacity_) return false;
  const Slot* s = Lookup(key_hash);
  if (!s || !s->has_stage || now_s - static_cast<int64_t>(s->stage_read_s) >= kStageRefreshS)
    return false;
  *stage = s->stage;
  *fill = s->fill;
  if (header) *header = s->header;
  return true;
}

void ExpireCache::Forget(std::string_view key) {
  if (generation_capacity_) Forget(KeyHash(key));
}

void ExpireCache::Forget(uint64_t h) {
  if (!generation_capacity_) return;
  for (Table* t : {&current_, &previous_}) {
    if (Slot* s = t->Find(h)) {
      s->expire_at = 0;
      s->has_stage = 0;
    }
  }
}

void ExpireCache::Remember(std::string_view key, int64_t expire_at, int64_t now_s,
                           uint32_t sentinel) {
  if (generation_capacity_) Remember(KeyHash(key), expire_at, now_s, sentinel);
}

void ExpireCache::Remember(uint64_t key_hash, int64_t expire_at, int64_t now_s, uint32_t sentinel) {
  if (!generation_capacity_) return;
  Slot* s = Touch(key_hash);
  s->expire_at = static_cast<uint32_t>(std::clamp<int64_t>(expire_at, 1, UINT32_MAX));
  s->set_at_s = static_cast<uint32_t>(now_s);
  s->sentinel = sentinel;
}

void ExpireCache::RememberStage(std::string_view key, int64_t now_s, uint32_t stage, uint32_t fill,
                                bool read) {
  if (generation_capacity_) RememberStage(KeyHash(key), now_s, stage, fill, read);
}

void ExpireCache::RememberStage(uint64_t key_hash, int64_t now_s, uint32_t stage, uint32_t fill,
                                bool read, uint8_t header) {
  if (!generation_capacity_) return;
  Slot* s = Touch(key_hash);
  if (read || !s->has_stage) s->stage_read_s = static_cast<uint32_t>(now_s);
  s->stage = static_cast<uint8_t>(stage);
  s->fill = fill;
  s->header = header;
  s->has_stage = 1;
}

void ExpireCache::ForgetStages() {
  for (Table* t : {&current_, &previous_})
    for (Slot& s : t->slots) s.has_stage = 0;
}

void ExpireCache::Clear() {
  current_.Clear();
  previous_.Clear();
}

}  // namespace ef
