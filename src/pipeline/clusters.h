// Content clusters of exposed items for the ingest pipeline (filter.near_duplicates,
// docs/CONTENT.md rule 5): where they come from (ClusterSource: the content
// index in `run` and `replay`, an in-memory fake in unit tests); the bounded
// cache in front of it is contentdb/cluster_cache.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "common/status.h"
#include "contentdb/cluster_cache.h"
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

// The daemon's cache in front of the ClusterSource: contentdb/cluster_cache.h,
// the same table and rule as the readers'.
using contentdb::ClusterCache;
using contentdb::ClusterCacheLimits;

}  // namespace ef
