// ExpireCache: which keys already carry their EXPIREAT, so the writer sends it
// once per key lifetime instead of once per batch (for hot users, EXPIREAT is
// otherwise about half of all commands). With each key it keeps a sentinel: one
// bit position the writer set in the key in the write that carried the
// acknowledged EXPIREAT; the writer reads that bit back to notice that the key
// was lost and re-created since (redis/bit_writer.h).
// Bounded and conservative: two generations of at most `capacity / 2` entries
// each (when the current one fills up, the older is dropped: recently written
// keys survive); an entry is trusted for at most `refresh_s` seconds, so a key
// that was deleted behind the daemon's back gets its expiry again on a later
// write; a key whose expiry is less than `min_remaining_s` away is never
// trusted (clock skew between the daemon and Redis). The writer clears it when
// its connection is re-established (Redis may have restarted empty) and forgets
// the keys of a write that failed.
// capacity 0 disables the cache. Keys are remembered by a 64-bit hash, in flat
// open-addressing tables (24 bytes a slot, at most half full, grown on demand):
// no allocation per key. Times are epoch seconds up to 2106. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ef {

class ExpireCache {
 public:
  ExpireCache(size_t capacity, int64_t refresh_s, int64_t min_remaining_s = 3600);

  // True if EXPIREAT key expire_at need not be sent at time now_s; then
  // *sentinel (if given) is the position remembered with it.
  bool Known(std::string_view key, int64_t expire_at, int64_t now_s,
             uint32_t* sentinel = nullptr) const;
  // Records that Redis acknowledged EXPIREAT key expire_at at time now_s, after
  // the bit at `sentinel` was set in the key.
  void Remember(std::string_view key, int64_t expire_at, int64_t now_s, uint32_t sentinel = 0);
  // The key's expiry is no longer trusted (Known is false until Remember).
  void Forget(std::string_view key);
  void Clear();
  size_t size() const { return current_.used + previous_.used; }
  bool enabled() const { return generation_capacity_ > 0; }

  static uint64_t KeyHash(std::string_view key);

 private:
  struct Slot {
    uint64_t hash = 0;  // 0 = empty (a key hashing to 0 is stored as 1)
    int64_t expire_at = 0;
    uint32_t set_at_s = 0;
    uint32_t sentinel = 0;
  };
  struct Table {
    std::vector<Slot> slots;  // size a power of two, or empty
    size_t used = 0;
    const Slot* Find(uint64_t hash) const;
    Slot* Find(uint64_t hash) {
      return const_cast<Slot*>(static_cast<const Table*>(this)->Find(hash));
    }
    Slot* FindOrInsert(uint64_t hash);  // grows as needed
    void Clear();
  };
  bool Fresh(const Slot& e, int64_t expire_at, int64_t now_s) const;

  size_t generation_capacity_;
  int64_t refresh_s_;
  int64_t min_remaining_s_;
  Table current_;
  Table previous_;
};

}  // namespace ef
