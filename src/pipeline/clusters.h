// Content clusters of exposed items for the ingest pipeline (filter.near_duplicates,
// docs/CONTENT.md rule 5): where they come from (ClusterSource: the content
// index in `run` and `replay`, an in-memory fake in unit tests) and the bounded
// cache in front of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "common/status.h"
#include "contentdb/index.h"

namespace ef {

struct ClusterQuery {
  std::string_view item;
  bool has_simhash = false;  // the exposure carried the item's fingerprint
  uint64_t simhash = 0;
};

class ClusterSource {
 public:
  virtual ~ClusterSource() = default;
  // One batched call: (*clusters)[i] = the cluster of items[i], "" when the
  // content map does not know it. An item that carries a simhash and is not in
  // the map is filed in the index first (and gets its cluster). Items are
  // distinct. kUnavailable (or kInternal) on a transport failure: nothing may be
  // assumed; call again.
  virtual Status Clusters(const std::vector<ClusterQuery>& items,
                          std::vector<std::string>* clusters) = 0;
};

// The content index (contentdb) as a ClusterSource: Lookup (renewing: the
// exposed items' map entries and buckets live on while they are exposed), then
// Assign for the items with a simhash the map does not know. Items longer than the index takes
// (contentdb::kMaxContentItemBytes) are never in it: "" without asking.
class ContentIndexClusters : public ClusterSource {
 public:
  explicit ContentIndexClusters(std::unique_ptr<contentdb::ContentIndex> index)
      : index_(std::move(index)) {}
  Status Clusters(const std::vector<ClusterQuery>& items,
                  std::vector<std::string>* clusters) override;

 private:
  std::unique_ptr<contentdb::ContentIndex> index_;
};

// Item -> cluster, bounded: at most 2 * ceil(capacity / 2) entries, in two
// generations (the newer takes what is put or found; when it holds
// ceil(capacity / 2) entries it becomes the older and the older is dropped), so
// what is used stays and memory is bounded. A miss (the map did not know the
// item) is kept for kMissRetryMs, then the item is looked up again (the items
// topic may index it meanwhile); a cluster found is kept for kRefreshMs, then
// looked up again, which renews the item's map entry and buckets (an item
// exposed for longer than content.retention keeps its cluster for readers). capacity 0: nothing is
// kept. Not thread-safe. On the ingest path for every exposed item, so items are keyed by their
// 128-bit hash (docs/FORMAT.md rule 1, HashItem with the filter's seed: the
// pipeline computes it anyway, and items with equal hashes are one item to the
// filter too), and each generation is one flat open-addressing table (linear
// probing, at most half full, grown by doubling) of 40-byte slots, the clusters'
// bytes in one arena: a lookup is about one cache line. An item whose cluster
// changes gets its new bytes appended; the arena is compacted when its bytes no
// longer held by any slot exceed the live ones, kArenaSlackBytes and 8 bytes a
// slot, so a generation's arena holds at most 2 x max(live bytes,
// kArenaSlackBytes, 8 x slots) + one cluster however often clusters change
// (bytes(); slots are at most 4 x capacity / 2).
class ClusterCache {
 public:
  static constexpr int64_t kMissRetryMs = 10000;
  static constexpr int64_t kRefreshMs = int64_t{86400} * 1000;  // one day
  static constexpr size_t kArenaSlackBytes = 64 * 1024;

  explicit ClusterCache(size_t capacity) : capacity_(capacity) {}
  enum class Hit { kNone, kCluster, kSelf, kMiss };
  // kCluster with *cluster set (valid until the next Put or Find); kSelf for an
  // item that is its own cluster (most items: it writes no token, and its bytes
  // are not kept, so such a hit reads one slot and nothing else); kMiss for a
  // fresh miss; kNone when not kept (or a stale miss, or a cluster put
  // kRefreshMs or more before now_ms: look it up again).
  Hit Find(const Hash128& item, int64_t now_ms, std::string_view* cluster);
  // item_id: the item whose hash `item` is. cluster "" records a miss at now_ms;
  // cluster == item_id is kept as kSelf.
  void Put(const Hash128& item, std::string_view item_id, std::string_view cluster, int64_t now_ms);
  size_t size() const { return newer_.count + older_.count; }
  // The bytes the two generations' arenas hold (the clusters' bytes).
  size_t bytes() const { return newer_.arena.size() + older_.arena.size(); }

 private:
  static constexpr uint32_t kSelfLen = UINT32_MAX;  // cluster_len of a kSelf slot
  struct Slot {
    uint64_t h1 = 0, h2 = 0;
    uint32_t cluster_off = 0, cluster_len = 0;  // cluster_len 0 = a miss, kSelfLen = kSelf
    int64_t miss_at_ms = 0;                     // when it was put (a miss, or a cluster)
    bool used = false;
  };
  struct Table {
    std::vector<Slot> slots;  // size a power of two, or empty
    std::string arena;        // the clusters' bytes
    size_t count = 0;
    size_t live_bytes = 0;  // arena bytes some slot refers to; the rest is garbage
    // The slot of `item`, or the empty slot where it goes (slots not empty).
    Slot* Probe(const Hash128& item);
    std::string_view Cluster(const Slot& s) const {
      return {arena.data() + s.cluster_off, s.cluster_len};
    }
    void Grow();
    void Clear();
    void Compact();  // the arena rebuilt from the live slots' bytes
  };
  // Adds (or overwrites) item in newer_, flipping the generations first when full.
  // self: the item is its own cluster (cluster is then ignored).
  void Insert(const Hash128& item, std::string_view cluster, bool self, int64_t miss_at_ms);
  size_t capacity_;
  Table newer_, older_;
};

}  // namespace ef
