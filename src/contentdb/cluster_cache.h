// The local cache of the content map (docs/CONTENT.md rule 4: item -> cluster)
// that both sides keep in front of Redis: the daemon's writers (`run`, `replay`:
// pipeline/clusters.h) and the readers (the client library and `serve`:
// client/impl.h). One table, one rule for both:
//   - a cluster found is kept until evicted or for kRefreshMs (a day), whichever
//     comes first. An assignment never changes once made (CONTENT.md rule 3,
//     "An item already in the map item -> cluster keeps its cluster"; rule 3's
//     "Clusters are never merged": "An item joins one existing cluster and
//     nothing moves it later"), so a kept cluster is right for as long as the
//     item's map entry lives. The day bounds how long a copy outlives an entry
//     that expired (content.retention without an assignment or an exposure) and
//     was assigned anew; for the daemon the day's lookup is also the one that
//     renews the entry (rule 5, "The map outlives the exposures");
//   - "the map does not know the item" (not indexed yet, expired, or a value
//     that is no map entry) is kept for kMissRetryMs (10 s) only: the items topic
//     may index the item any moment, and the next lookup after that finds it;
//   - bounded by a byte budget (the tables' slots and the clusters' bytes, as
//     allocated), and optionally by an item count too: whichever is reached
//     first. 0 in either means nothing is kept.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bloom/hash.h"
#include "common/zeroed_pages.h"

namespace ef::contentdb {

// What a ClusterCache may hold.
struct ClusterCacheLimits {
  static constexpr size_t kUnlimited = std::numeric_limits<size_t>::max();
  // Items (at most this many, in two generations of ceil(items / 2) each).
  size_t items = kUnlimited;
  // Bytes of slots and cluster bytes, as allocated (ClusterCache::memory_bytes),
  // at rest: a table that grows holds its old slots too for the instant it
  // copies them (half or two thirds of the new ones), and a compaction the arena's old bytes.
  size_t bytes = kUnlimited;
};

// Item -> cluster, bounded: two generations (the newer takes what is put or
// found; when it cannot take one more entry within half the limits it becomes
// the older and the older is dropped), so what is used stays and memory is
// bounded. A miss (the map did not know the item) is kept for kMissRetryMs, then
// the item is looked up again; a cluster found is kept for kRefreshMs, then
// looked up again. Not thread-safe (SharedClusterCache is). Items are keyed by
// their 128-bit hash (docs/FORMAT.md rule 1, HashItem with the filter's seed:
// items with equal hashes are one item to the filter too), and each generation
// is one flat open-addressing table of 32-byte slots in zeroed memory (huge
// pages from 2 MiB: common/zeroed_pages.h), the clusters' bytes in one arena: a
// lookup is about one cache line. The table (linear probing) is kept at most
// half full while it grows by doubling, up to its largest (max_slots_: 3/4 of a
// generation's bytes, any count of slots), which it fills to 3/4: so a byte
// budget holds about 43 bytes of slots an item, and twice that in two
// generations. An item whose cluster changes gets its new bytes
// appended; the arena is compacted when its bytes no longer held by any slot
// exceed the live ones, kArenaSlackBytes and 8 bytes a slot, so a generation's
// arena holds at most 2 x max(live bytes, kArenaSlackBytes, 8 x slots) + one
// cluster however often clusters change (bytes()). With an item limit, slots are
// at most 2 x ceil(items / 2) per generation; with a byte limit, each generation's
// slots and arena (capacities) stay within bytes / 2 (memory_bytes() <= bytes).
class ClusterCache {
 public:
  static constexpr int64_t kMissRetryMs = 10000;
  static constexpr int64_t kRefreshMs = int64_t{86400} * 1000;  // one day
  static constexpr size_t kArenaSlackBytes = 64 * 1024;

  // At most `capacity` items, no byte limit (the daemon's content.cache_items).
  explicit ClusterCache(size_t capacity) : ClusterCache(ClusterCacheLimits{capacity}) {}
  explicit ClusterCache(ClusterCacheLimits limits);
  enum class Hit { kNone, kCluster, kSelf, kMiss };
  // kCluster with *cluster set (valid until the next Put or Find); kSelf for an
  // item that is its own cluster (most items: it writes no token, and its bytes
  // are not kept, so such a hit reads one slot and nothing else); kMiss for a
  // fresh miss; kNone when not kept (or a stale miss, or a cluster put
  // kRefreshMs or more before now_ms: look it up again).
  Hit Find(const Hash128& item, int64_t now_ms, std::string_view* cluster);
  // item_id: the item whose hash `item` is. cluster "" records a miss at now_ms;
  // cluster == item_id is kept as kSelf. An entry that does not fit an empty
  // generation (a cluster longer than the byte limit allows) is not kept.
  void Put(const Hash128& item, std::string_view item_id, std::string_view cluster, int64_t now_ms);
  // Brings the slots a Find of item reads first into the CPU's cache; changes
  // nothing. A batch of Finds (SharedClusterCache::FindMany) prefetches a few
  // items ahead, so that their memory latencies overlap: with a cache larger
  // than the CPU's, a Find is otherwise one or two misses of memory (and TLB).
  void Prefetch(const Hash128& item) const {
    newer_.Prefetch(item);
    older_.Prefetch(item);
  }
  size_t size() const { return newer_.count + older_.count; }
  // The bytes the two generations' arenas hold (the clusters' bytes).
  size_t bytes() const { return newer_.arena.size() + older_.arena.size(); }
  // Everything the two generations hold: slots and arenas, as allocated.
  size_t memory_bytes() const { return newer_.MemoryBytes() + older_.MemoryBytes(); }

 private:
  // cluster_len of an empty slot: all zero bytes are an empty slot, so a new
  // table (ZeroedPages) needs no pass that marks its slots empty.
  static constexpr uint32_t kFreeLen = 0;
  static constexpr uint32_t kSelfLen = UINT32_MAX;      // cluster_len of a kSelf slot
  static constexpr uint32_t kMissLen = UINT32_MAX - 1;  // cluster_len of a miss
  // 32 bytes, aligned: two slots a cache line, none across two. No initialisers:
  // slots live in zeroed memory (all zero = empty).
  struct alignas(32) Slot {
    uint64_t h1, h2;
    // kFreeLen = not used, kMissLen = a miss, kSelfLen = kSelf; else the
    // cluster's length (1 or more) and its offset in the arena.
    uint32_t cluster_off, cluster_len;
    int64_t miss_at_ms;  // when it was put (a miss, or a cluster)
    bool used() const { return cluster_len != kFreeLen; }
    // Refers to bytes of the arena.
    bool has_bytes() const {
      return cluster_len != kFreeLen && cluster_len != kMissLen && cluster_len != kSelfLen;
    }
  };
  static_assert(sizeof(Slot) == 32);
  static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_destructible_v<Slot>);
  struct Table {
    // slot_count slots (any count, or none), zero-filled when made: huge
    // pages for a table of 2 MiB or more (common/zeroed_pages.h).
    ZeroedPages memory;
    size_t slot_count = 0;
    std::vector<char> arena;  // the clusters' bytes (a vector: reserve allocates exactly)
    size_t count = 0;
    size_t live_bytes = 0;  // arena bytes some slot refers to; the rest is garbage
    Slot* slots() const { return static_cast<Slot*>(memory.data()); }
    // item's first slot among n (n > 0): its hash scaled to [0, n) (Lemire's
    // multiply-shift), so n need not be a power of two.
    static size_t HomeIn(const Hash128& item, size_t n) {
      const uint64_t h = item.h1 ^ (item.h2 >> 17);
      return static_cast<size_t>((static_cast<unsigned __int128>(h) * n) >> 64);
    }
    // The slot of `item`, or the empty slot where it goes (slot_count > 0).
    Slot* Probe(const Hash128& item);
    void Prefetch(const Hash128& item) const {
      if (slot_count != 0) __builtin_prefetch(&slots()[HomeIn(item, slot_count)]);
    }
    std::string_view Cluster(const Slot& s) const {
      return {arena.data() + s.cluster_off, s.cluster_len};
    }
    size_t MemoryBytes() const { return slot_count * sizeof(Slot) + arena.capacity(); }
    void Grow(size_t new_slot_count);
    // Empty, with new_slot_count slots (the same memory, zeroed, when the
    // count is unchanged).
    void Clear(size_t new_slot_count);
    void Compact();  // the arena rebuilt from the live slots' bytes
  };
  // Makes item's entry in t (if any) answer kNone: a miss put long ago.
  static void Forget(Table& t, const Hash128& item);
  static constexpr int64_t kForgottenMs = std::numeric_limits<int64_t>::min() / 2;
  // The slot count and arena capacity `t` needs to take one more entry with
  // `add` cluster bytes; false when that exceeds half the limits.
  bool Fits(const Table& t, size_t add, size_t* slot_count, size_t* arena_capacity) const;
  // Adds (or overwrites) item in newer_, flipping the generations first when full.
  // self: the item is its own cluster (cluster is then ignored). False when the
  // entry does not fit an empty generation (not kept).
  bool Insert(const Hash128& item, std::string_view cluster, bool self, int64_t miss_at_ms);
  size_t items_per_generation_;  // ceil(items / 2); 0 = nothing is kept
  size_t bytes_per_generation_;  // bytes / 2
  // The most slots a generation's table has: 3/4 of bytes_per_generation_ (the
  // rest for clusters' bytes), and 2 x items_per_generation_.
  size_t max_slots_;
  Table newer_, older_;
};

// ClusterCache for many threads (the client library): kShards caches, each
// behind its own mutex and given 1 / kShards of the limits; an item's shard is
// picked by its hash. Every member function may be called concurrently. The
// batch calls take each shard's lock once, and prefetch (ClusterCache::Prefetch)
// the items ahead of the one they find.
class SharedClusterCache {
 public:
  static constexpr size_t kShards = 16;
  explicit SharedClusterCache(ClusterCacheLimits limits);
  // As ClusterCache::Find for items[i], i < n: hits[i], and clusters[i] (the
  // bytes copied) for a kCluster.
  void FindMany(const Hash128* items, size_t n, int64_t now_ms, ClusterCache::Hit* hits,
                std::string* clusters);
  // As ClusterCache::Put for (items[i], item_ids[i], clusters[i]), i < n.
  void PutMany(const Hash128* items, const std::string_view* item_ids,
               const std::string_view* clusters, size_t n, int64_t now_ms);
  // Sums over the shards (each read under its lock).
  size_t size() const;
  size_t memory_bytes() const;

 private:
  struct alignas(64) Shard {
    explicit Shard(ClusterCacheLimits l) : cache(l) {}
    mutable std::mutex mu;
    ClusterCache cache;
  };
  static size_t ShardOf(const Hash128& item) { return static_cast<size_t>(item.h2 >> 60); }
  static_assert(kShards == 16, "ShardOf takes the top 4 bits");
  // fn(cache, i) for each i < n, grouped by shard under its lock, items
  // prefetched ahead.
  template <typename Fn>
  void ForEachByShard(const Hash128* items, size_t n, Fn fn);
  std::array<std::unique_ptr<Shard>, kShards> shards_;
};

}  // namespace ef::contentdb
