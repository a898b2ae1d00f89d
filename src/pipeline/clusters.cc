#include "pipeline/clusters.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace ef {

Status ContentIndexClusters::Clusters(const std::vector<ClusterQuery>& items,
                                      std::vector<std::string>* clusters) {
  clusters->assign(items.size(), std::string());
  std::vector<std::string> ask;
  std::vector<size_t> where;  // ask[j] is items[where[j]]
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].item.empty() || items[i].item.size() > contentdb::kMaxContentItemBytes) continue;
    ask.emplace_back(items[i].item);
    where.push_back(i);
  }
  if (ask.empty()) return Status::Ok();
  auto found = index_->Lookup(ask, /*renew=*/true);  // exposed: their entries live on
  if (!found.ok()) return found.status();
  std::vector<contentdb::ContentItem> file;
  std::vector<size_t> filed;  // file[j] is items[filed[j]]
  for (size_t j = 0; j < ask.size(); ++j) {
    const auto& c = (*found)[j];
    if (c.has_value()) {
      (*clusters)[where[j]] = *c;
    } else if (items[where[j]].has_simhash) {
      file.push_back({std::move(ask[j]), items[where[j]].simhash});
      filed.push_back(where[j]);
    }
  }
  if (file.empty()) return Status::Ok();
  auto assigned = index_->Assign(file);
  if (!assigned.ok()) return assigned.status();
  for (size_t j = 0; j < file.size(); ++j) (*clusters)[filed[j]] = (*assigned)[j].cluster;
  return Status::Ok();
}

ClusterCache::Slot* ClusterCache::Table::Probe(const Hash128& item) {
  const size_t mask = slots.size() - 1;
  for (size_t i = static_cast<size_t>(item.h1 ^ (item.h2 >> 17)) & mask;; i = (i + 1) & mask) {
    Slot& s = slots[i];
    if (!s.used || (s.h1 == item.h1 && s.h2 == item.h2)) return &s;
  }
}

void ClusterCache::Table::Grow() {
  std::vector<Slot> old = std::move(slots);
  slots.assign(old.empty() ? 1024 : old.size() * 2, Slot());
  for (const Slot& s : old) {
    if (s.used) *Probe({s.h1, s.h2}) = s;
  }
}

void ClusterCache::Table::Clear() {
  std::fill(slots.begin(), slots.end(), Slot());
  arena.clear();
  count = 0;
  live_bytes = 0;
}

void ClusterCache::Table::Compact() {
  std::string fresh;
  fresh.reserve(live_bytes);
  for (Slot& s : slots) {
    if (!s.used || s.cluster_len == 0 || s.cluster_len == kSelfLen) continue;
    const uint32_t off = static_cast<uint32_t>(fresh.size());
    fresh.append(Cluster(s));
    s.cluster_off = off;
  }
  arena = std::move(fresh);
}

ClusterCache::Hit ClusterCache::Find(const Hash128& item, int64_t now_ms,
                                     std::string_view* cluster) {
  if (capacity_ == 0) return Hit::kNone;
  const Slot* s = newer_.slots.empty() ? nullptr : newer_.Probe(item);
  if (s == nullptr || !s->used) {
    const Slot* o = older_.slots.empty() ? nullptr : older_.Probe(item);
    if (o == nullptr || !o->used) return Hit::kNone;
    // Used again: into the newer generation (its bytes are copied first, as the
    // insert may flip the generations and clear the older one).
    const bool self = o->cluster_len == kSelfLen;
    const std::string cluster_copy(self ? std::string_view() : older_.Cluster(*o));
    Insert(item, cluster_copy, self, o->miss_at_ms);
    s = newer_.Probe(item);
  }
  if (s->cluster_len == 0) {
    return now_ms - s->miss_at_ms < kMissRetryMs ? Hit::kMiss : Hit::kNone;
  }
  if (now_ms - s->miss_at_ms >= kRefreshMs) return Hit::kNone;  // renew it (Lookup)
  if (s->cluster_len == kSelfLen) return Hit::kSelf;
  *cluster = newer_.Cluster(*s);
  return Hit::kCluster;
}

void ClusterCache::Put(const Hash128& item, std::string_view item_id, std::string_view cluster,
                       int64_t now_ms) {
  if (capacity_ == 0) return;
  const bool self = !cluster.empty() && cluster == item_id;
  Insert(item, self ? std::string_view() : cluster, self, now_ms);
}

void ClusterCache::Insert(const Hash128& item, std::string_view cluster, bool self,
                          int64_t miss_at_ms) {
  // Full, or its arena's 32-bit offsets would overflow: a new generation.
  if (newer_.count >= (capacity_ + 1) / 2 ||
      newer_.arena.size() + cluster.size() > std::numeric_limits<uint32_t>::max()) {
    std::swap(newer_, older_);
    newer_.Clear();
  }
  if ((newer_.count + 1) * 2 > newer_.slots.size()) newer_.Grow();
  Slot* s = newer_.Probe(item);
  if (!s->used) {
    s->used = true;
    s->h1 = item.h1;
    s->h2 = item.h2;
    ++newer_.count;
  }
  const bool had_bytes = s->cluster_len != kSelfLen && s->cluster_len != 0;
  if (self) {
    if (had_bytes) newer_.live_bytes -= s->cluster_len;
    s->cluster_len = kSelfLen;
  } else if (!had_bytes || newer_.Cluster(*s) != cluster) {
    // A changed cluster is appended anew; the old bytes are garbage until the
    // generation flips or the arena is compacted.
    if (had_bytes) newer_.live_bytes -= s->cluster_len;
    s->cluster_off = static_cast<uint32_t>(newer_.arena.size());
    s->cluster_len = static_cast<uint32_t>(cluster.size());
    newer_.arena.append(cluster);
    newer_.live_bytes += cluster.size();
    const size_t garbage = newer_.arena.size() - newer_.live_bytes;
    // Compaction visits every slot: waiting for 8 bytes of garbage a slot keeps
    // its cost per put constant (amortised).
    if (garbage > std::max({newer_.live_bytes, kArenaSlackBytes, 8 * newer_.slots.size()}))
      newer_.Compact();
  }
  s->miss_at_ms = miss_at_ms;
}

}  // namespace ef
