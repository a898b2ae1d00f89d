#include "contentdb/cluster_cache.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

namespace ef::contentdb {

namespace {

// A new table's slots (fewer when a generation's bytes cannot hold them), and
// the fewest worth having.
constexpr size_t kInitialSlots = 1024;
constexpr size_t kMinSlots = 16;
constexpr size_t kMinArena = 256;
// The share of a generation's bytes its slots may take (the rest is the
// arena's), and how full its table may get: half while it can still double,
// three quarters at its largest (linear probing then reads about 8.5 slots for
// an item it does not hold, 2.5 for one it does: Knuth, TAOCP vol. 3, 6.4).
constexpr size_t kSlotShareNum = 3, kSlotShareDen = 4;
constexpr size_t kFullNum = 3, kFullDen = 4;

}  // namespace

ClusterCache::ClusterCache(ClusterCacheLimits limits)
    : items_per_generation_(limits.items / 2 + limits.items % 2),
      bytes_per_generation_(limits.bytes / 2) {
  // With an item limit, twice its generation's items (half full) is enough.
  const size_t by_items = items_per_generation_ > std::numeric_limits<size_t>::max() / 4
                              ? std::numeric_limits<size_t>::max()
                              : 2 * items_per_generation_;
  max_slots_ =
      std::min(by_items, bytes_per_generation_ / sizeof(Slot) / kSlotShareDen * kSlotShareNum);
}

ClusterCache::Slot* ClusterCache::Table::Probe(const Hash128& item) {
  Slot* const at = slots();
  for (size_t i = HomeIn(item, slot_count);;) {
    Slot& s = at[i];
    if (!s.used() || (s.h1 == item.h1 && s.h2 == item.h2)) return &s;
    if (++i == slot_count) i = 0;
  }
}

void ClusterCache::Table::Grow(size_t new_slot_count) {
  ZeroedPages old = std::exchange(memory, ZeroedPages(new_slot_count * sizeof(Slot)));
  const size_t old_count = std::exchange(slot_count, new_slot_count);
  const Slot* const from = static_cast<const Slot*>(old.data());
  for (size_t i = 0; i < old_count; ++i) {
    if (from[i].used()) *Probe({from[i].h1, from[i].h2}) = from[i];
  }
}

void ClusterCache::Table::Clear(size_t new_slot_count) {
  if (new_slot_count == slot_count) {
    memory.Zero();
  } else {
    memory = ZeroedPages(new_slot_count * sizeof(Slot));
    slot_count = new_slot_count;
  }
  arena.clear();
  count = 0;
  live_bytes = 0;
}

void ClusterCache::Table::Compact() {
  std::vector<char> fresh;
  fresh.reserve(live_bytes);
  for (Slot& s : std::span(slots(), slot_count)) {
    if (!s.has_bytes()) continue;
    const uint32_t off = static_cast<uint32_t>(fresh.size());
    const std::string_view c = Cluster(s);
    fresh.insert(fresh.end(), c.begin(), c.end());
    s.cluster_off = off;
  }
  arena = std::move(fresh);
}

void ClusterCache::Forget(Table& t, const Hash128& item) {
  if (t.slot_count == 0) return;
  Slot* s = t.Probe(item);
  if (!s->used()) return;
  if (s->has_bytes()) t.live_bytes -= s->cluster_len;
  s->cluster_len = kMissLen;  // a miss too old to answer: kNone
  s->miss_at_ms = kForgottenMs;
}

bool ClusterCache::Fits(const Table& t, size_t add, size_t* slot_count,
                        size_t* arena_capacity) const {
  if (t.count >= items_per_generation_) return false;
  // Offsets are 32 bits.
  if (t.arena.size() + add > std::numeric_limits<uint32_t>::max()) return false;
  size_t slots = t.slot_count;
  if (slots == 0) {
    // At most half the generation's bytes at first: the rest is the arena's.
    slots = kInitialSlots;
    while (slots > kMinSlots && slots * sizeof(Slot) > bytes_per_generation_ / 2) slots /= 2;
    slots = std::min(slots, max_slots_);
    if (slots == 0) return false;
  } else if ((t.count + 1) * 2 > slots && slots < max_slots_) {
    slots = std::min(2 * slots, max_slots_);  // doubled, up to the largest table
  }
  // Half full while the table can still grow, three quarters at its largest.
  const size_t most = slots >= max_slots_ ? slots / kFullDen * kFullNum : slots / 2;
  if (t.count + 1 > most) return false;
  // slots <= max_slots_: at most 3/4 of the generation's bytes.
  const size_t room = bytes_per_generation_ - slots * sizeof(Slot);
  const size_t need = t.arena.size() + add;
  size_t capacity = t.arena.capacity();
  if (need > capacity) capacity = std::min(std::max({need, 2 * capacity, kMinArena}), room);
  if (need > capacity || capacity > room) return false;
  *slot_count = slots;
  *arena_capacity = capacity;
  return true;
}

ClusterCache::Hit ClusterCache::Find(const Hash128& item, int64_t now_ms,
                                     std::string_view* cluster) {
  if (items_per_generation_ == 0 || bytes_per_generation_ == 0) return Hit::kNone;
  const Slot* s = newer_.slot_count == 0 ? nullptr : newer_.Probe(item);
  if (s == nullptr || !s->used()) {
    const Slot* o = older_.slot_count == 0 ? nullptr : older_.Probe(item);
    if (o == nullptr || !o->used()) return Hit::kNone;
    // Used again: into the newer generation (its bytes are copied first, as the
    // insert may flip the generations and clear the older one).
    const bool self = o->cluster_len == kSelfLen;
    const std::string cluster_copy(o->has_bytes() ? older_.Cluster(*o) : std::string_view());
    if (!Insert(item, cluster_copy, self, o->miss_at_ms)) return Hit::kNone;
    s = newer_.Probe(item);
  }
  if (s->cluster_len == kMissLen) {
    return now_ms - s->miss_at_ms < kMissRetryMs ? Hit::kMiss : Hit::kNone;
  }
  if (now_ms - s->miss_at_ms >= kRefreshMs) return Hit::kNone;  // look it up (renew it) again
  if (s->cluster_len == kSelfLen) return Hit::kSelf;
  *cluster = newer_.Cluster(*s);
  return Hit::kCluster;
}

void ClusterCache::Put(const Hash128& item, std::string_view item_id, std::string_view cluster,
                       int64_t now_ms) {
  if (items_per_generation_ == 0 || bytes_per_generation_ == 0) return;
  const bool self = !cluster.empty() && cluster == item_id;
  (void)Insert(item, self ? std::string_view() : cluster, self, now_ms);
}

bool ClusterCache::Insert(const Hash128& item, std::string_view cluster, bool self,
                          int64_t miss_at_ms) {
  const size_t add = self ? 0 : cluster.size();
  size_t slot_count = 0, arena_capacity = 0;
  if (!Fits(Table(), add, &slot_count, &arena_capacity)) {
    // Not kept, and no older answer may stand for it.
    Forget(newer_, item);
    Forget(older_, item);
    return false;
  }
  if (!Fits(newer_, add, &slot_count, &arena_capacity)) {
    // Full: a new generation.
    std::swap(newer_, older_);
    // As many slots as the generation that just filled, at once, rather than
    // doubling up to them (each doubling copies the table): it will fill too.
    const bool as_many =
        newer_.slot_count < older_.slot_count &&
        older_.slot_count * sizeof(Slot) + newer_.arena.capacity() <= bytes_per_generation_;
    newer_.Clear(as_many ? older_.slot_count : newer_.slot_count);
    if (!Fits(newer_, add, &slot_count, &arena_capacity)) {
      // What the cleared table kept allocated (an arena sized for long clusters,
      // say) leaves no room: start it anew. Still too big: not kept.
      newer_ = Table();
      (void)Fits(newer_, add, &slot_count, &arena_capacity);  // true: checked above
    }
  }
  if (slot_count != newer_.slot_count) newer_.Grow(slot_count);
  if (arena_capacity > newer_.arena.capacity()) newer_.arena.reserve(arena_capacity);
  Slot* s = newer_.Probe(item);
  if (!s->used()) {
    s->cluster_len = kMissLen;  // used: its value is set below
    s->h1 = item.h1;
    s->h2 = item.h2;
    ++newer_.count;
  }
  const bool had_bytes = s->has_bytes();
  if (self) {
    if (had_bytes) newer_.live_bytes -= s->cluster_len;
    s->cluster_len = kSelfLen;
  } else if (cluster.empty()) {  // a miss
    if (had_bytes) newer_.live_bytes -= s->cluster_len;
    s->cluster_len = kMissLen;
  } else if (!had_bytes || newer_.Cluster(*s) != cluster) {
    // A changed cluster is appended anew; the old bytes are garbage until the
    // generation flips or the arena is compacted.
    if (had_bytes) newer_.live_bytes -= s->cluster_len;
    s->cluster_off = static_cast<uint32_t>(newer_.arena.size());
    s->cluster_len = static_cast<uint32_t>(cluster.size());
    newer_.arena.insert(newer_.arena.end(), cluster.begin(), cluster.end());
    newer_.live_bytes += cluster.size();
    const size_t garbage = newer_.arena.size() - newer_.live_bytes;
    // Compaction visits every slot: waiting for 8 bytes of garbage a slot keeps
    // its cost per put constant (amortised).
    if (garbage > std::max({newer_.live_bytes, kArenaSlackBytes, 8 * newer_.slot_count}))
      newer_.Compact();
  }
  s->miss_at_ms = miss_at_ms;
  return true;
}

namespace {

ClusterCacheLimits ShardLimits(ClusterCacheLimits l, size_t shards) {
  if (l.items != ClusterCacheLimits::kUnlimited) l.items = (l.items + shards - 1) / shards;
  if (l.bytes != ClusterCacheLimits::kUnlimited) l.bytes /= shards;
  return l;
}

}  // namespace

SharedClusterCache::SharedClusterCache(ClusterCacheLimits limits) {
  for (auto& s : shards_) s = std::make_unique<Shard>(ShardLimits(limits, kShards));
}

template <typename Fn>
void SharedClusterCache::ForEachByShard(const Hash128* items, size_t n, Fn fn) {
  // Counting sort by shard: at[s] .. at[s + 1] of `order` are shard s's items.
  std::array<size_t, kShards + 1> at{};
  for (size_t i = 0; i < n; ++i) ++at[ShardOf(items[i]) + 1];
  for (size_t s = 0; s < kShards; ++s) at[s + 1] += at[s];
  std::vector<uint32_t> order(n);
  std::array<size_t, kShards> next{};
  for (size_t s = 0; s < kShards; ++s) next[s] = at[s];
  for (size_t i = 0; i < n; ++i) order[next[ShardOf(items[i])]++] = static_cast<uint32_t>(i);
  // 32: a single thread probing a table of 1.8M items (128 MiB) took 31 ns a
  // lookup without prefetching, 20 with 8 ahead, 17 with 16 to 64 ahead; in
  // serve, where Redis shares the cores and caches, 8 -> 32 took the map phase of
  // scripts/bench-read.sh --near-duplicates from 451 to 418 us of serve CPU per
  // request (medians of 8 runs each, 2026-12-03; docs/PERFORMANCE.md).
  constexpr size_t kAhead = 32;
  for (size_t s = 0; s < kShards; ++s) {
    if (at[s] == at[s + 1]) continue;
    Shard& shard = *shards_[s];
    std::lock_guard lock(shard.mu);
    for (size_t p = at[s]; p < at[s + 1] && p < at[s] + kAhead; ++p)
      shard.cache.Prefetch(items[order[p]]);
    for (size_t p = at[s]; p < at[s + 1]; ++p) {
      if (p + kAhead < at[s + 1]) shard.cache.Prefetch(items[order[p + kAhead]]);
      fn(shard.cache, order[p]);
    }
  }
}

void SharedClusterCache::FindMany(const Hash128* items, size_t n, int64_t now_ms,
                                  ClusterCache::Hit* hits, std::string* clusters) {
  ForEachByShard(items, n, [&](ClusterCache& cache, size_t i) {
    std::string_view c;
    hits[i] = cache.Find(items[i], now_ms, &c);
    if (hits[i] == ClusterCache::Hit::kCluster) clusters[i].assign(c);
  });
}

void SharedClusterCache::PutMany(const Hash128* items, const std::string_view* item_ids,
                                 const std::string_view* clusters, size_t n, int64_t now_ms) {
  ForEachByShard(items, n, [&](ClusterCache& cache, size_t i) {
    cache.Put(items[i], item_ids[i], clusters[i], now_ms);
  });
}

size_t SharedClusterCache::size() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->cache.size();
  }
  return n;
}

size_t SharedClusterCache::memory_bytes() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->cache.memory_bytes();
  }
  return n;
}

}  // namespace ef::contentdb
