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
#include <unordered_map>
#include <vector>

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

// The content index (contentdb) as a ClusterSource: Lookup, then Assign for the
// items with a simhash the map does not know. Items longer than the index takes
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
// what is used stays and memory is bounded. A miss (the map did not know the item) is kept for kMissRetryMs, then
// the item is looked up again (the items topic may index it meanwhile).
// capacity 0: nothing is kept. Not thread-safe.
class ClusterCache {
 public:
  static constexpr int64_t kMissRetryMs = 10000;

  explicit ClusterCache(size_t capacity) : capacity_(capacity) {}
  enum class Hit { kNone, kCluster, kMiss };
  // kCluster with *cluster set; kMiss for a fresh miss; kNone when not kept (or a
  // stale miss).
  Hit Find(std::string_view item, int64_t now_ms, std::string_view* cluster);
  // cluster "" records a miss at now_ms.
  void Put(std::string_view item, std::string_view cluster, int64_t now_ms);
  size_t size() const { return newer_.size() + older_.size(); }

 private:
  struct Entry {
    std::string cluster;  // "" = a miss
    int64_t miss_at_ms = 0;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Map = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;
  void Insert(std::string_view item, Entry entry);
  size_t capacity_;
  Map newer_, older_;
};

}  // namespace ef
