// ExpireCache: which keys already carry their EXPIREAT, so the writer sends it
// once per key lifetime instead of once per batch (for hot users, EXPIREAT is
// otherwise about half of all commands). With each key it keeps a sentinel: one
// bit position the writer set in the key in the write that carried the
// acknowledged EXPIREAT; the writer reads that bit back to notice that the key
// was lost and re-created since (write/bit_writer.h).
// Bounded and conservative: two generations of at most `capacity / 2` entries
// each (when the current one fills up, the older is dropped: recently written
// keys survive); an entry is trusted for at most `refresh_s` seconds, so a key
// that was deleted behind the daemon's back gets its expiry again on a later
// write; a key whose expiry is less than `min_remaining_s` away is never
// trusted (clock skew between the daemon and Redis). The writer clears it when
// its connection is re-established (Redis may have restarted empty) and forgets
// the keys of a write that failed.
// With layouts v2 and v3 it also keeps each key's stage state (docs/FORMAT.md rule
// 8): the stage the writer fills and exactly how many of its bits are set, learnt
// by reading the key and kept up to date from the old bits the writes return (the
// writer also reads a key whose stage may fill within a batch, which restarts the
// trust period); trusted for kStageRefreshS after the last read, then the key is
// read again (bits other writers set meanwhile are not counted in between; the
// writer also forgets all stage states when its partitions are revoked). Forget and Clear drop it
// with the expiry. capacity 0 disables the cache. Keys are remembered by a 64-bit hash, in flat
// open-addressing tables (32 bytes a slot, at most half full, grown on demand):
// no allocation per key. Times are epoch seconds up to 2106. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ef {

class ExpireCache {
 public:
  static constexpr int64_t kStageRefreshS = 3600;

  ExpireCache(size_t capacity, int64_t refresh_s, int64_t min_remaining_s = 3600);

  // True if EXPIREAT key expire_at need not be sent at time now_s; then
  // *sentinel (if given) is the position remembered with it.
  bool Known(std::string_view key, int64_t expire_at, int64_t now_s,
             uint32_t* sentinel = nullptr) const;
  // Records that Redis acknowledged EXPIREAT key expire_at at time now_s, after
  // the bit at `sentinel` was set in the key.
  void Remember(std::string_view key, int64_t expire_at, int64_t now_s, uint32_t sentinel = 0);
  // The key's stage state at time now_s, if known and read from Redis less than
  // kStageRefreshS ago.
  bool StageKnown(std::string_view key, int64_t now_s, uint32_t* stage, uint32_t* fill) const;
  // Records the key's stage state; `read` = just read from Redis (restarts the
  // trust period), else updated from a write's replies (keeps it).
  void RememberStage(std::string_view key, int64_t now_s, uint32_t stage, uint32_t fill, bool read);
  // Nothing about the key is trusted any more (Known and StageKnown are false
  // until Remember / RememberStage).
  void Forget(std::string_view key);
  void Clear();
  // Every key's stage state is no longer trusted (expiries stay).
  void ForgetStages();
  size_t size() const { return current_.used + previous_.used; }
  bool enabled() const { return generation_capacity_ > 0; }

  static uint64_t KeyHash(std::string_view key);
  // The same calls with the key given by KeyHash(key), for callers that make
  // several calls per key.
  bool Known(uint64_t key_hash, int64_t expire_at, int64_t now_s, uint32_t* sentinel) const;
  void Remember(uint64_t key_hash, int64_t expire_at, int64_t now_s, uint32_t sentinel);
  // header: layout v4, the key's first byte (its size class + 1; 0 below v4), kept
  // with the stage state.
  bool StageKnown(uint64_t key_hash, int64_t now_s, uint32_t* stage, uint32_t* fill,
                  uint8_t* header = nullptr) const;
  void RememberStage(uint64_t key_hash, int64_t now_s, uint32_t stage, uint32_t fill, bool read,
                     uint8_t header = 0);
  void Forget(uint64_t key_hash);

 private:
  struct Slot {
    uint64_t hash = 0;       // 0 = empty (a key hashing to 0 is stored as 1)
    uint32_t expire_at = 0;  // 0 = expiry unknown
    uint32_t set_at_s = 0;
    uint32_t sentinel = 0;
    uint32_t stage_read_s = 0;
    uint32_t fill = 0;
    uint8_t stage = 0;
    uint8_t has_stage = 0;
    uint8_t header = 0;  // with the stage state: layout v4's class header (0: none)
  };
  static_assert(sizeof(Slot) == 32, "the cache's memory figure is 32 bytes a slot");
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
  const Slot* Lookup(uint64_t hash) const;
  // The key's slot in the current generation (carried over from the previous
  // one, or new and empty); rotates the generations when the current one is full.
  Slot* Touch(uint64_t hash);

  size_t generation_capacity_;
  int64_t refresh_s_;
  int64_t min_remaining_s_;
  Table current_;
  Table previous_;
};

}  // namespace ef
