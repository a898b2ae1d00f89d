#include "redis/expire_cache.h"

#include "bloom/hash.h"

namespace ef {

ExpireCache::ExpireCache(size_t capacity, int64_t refresh_s, int64_t min_remaining_s)
    : generation_capacity_(capacity / 2 + (capacity % 2)),
      refresh_s_(refresh_s),
      min_remaining_s_(min_remaining_s) {
  if (capacity == 0) generation_capacity_ = 0;
}

uint64_t ExpireCache::KeyHash(std::string_view key) {
  // MurmurHash3 x64 128, as for items; a different seed keeps it independent.
  return HashItem(key, 0x65787069).h1;
}

bool ExpireCache::Fresh(const Entry& e, int64_t expire_at, int64_t now_s) const {
  return e.expire_at == expire_at && now_s - e.set_at_s < refresh_s_ &&
         expire_at - now_s >= min_remaining_s_;
}

bool ExpireCache::Known(std::string_view key, int64_t expire_at, int64_t now_s) const {
  if (!generation_capacity_) return false;
  const uint64_t h = KeyHash(key);
  auto it = current_.find(h);
  if (it != current_.end()) return Fresh(it->second, expire_at, now_s);
  it = previous_.find(h);
  return it != previous_.end() && Fresh(it->second, expire_at, now_s);
}

void ExpireCache::Remember(std::string_view key, int64_t expire_at, int64_t now_s) {
  if (!generation_capacity_) return;
  const uint64_t h = KeyHash(key);
  auto it = current_.find(h);
  if (it != current_.end()) {
    it->second = {expire_at, now_s};
    return;
  }
  if (current_.size() >= generation_capacity_) {
    previous_.swap(current_);
    current_.clear();
  }
  current_.emplace(h, Entry{expire_at, now_s});
}

void ExpireCache::Clear() {
  current_.clear();
  previous_.clear();
}

}  // namespace ef
