#include "pipeline/clusters.h"

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
  auto found = index_->Lookup(ask);
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

ClusterCache::Hit ClusterCache::Find(std::string_view item, int64_t now_ms,
                                     std::string_view* cluster) {
  if (capacity_ == 0) return Hit::kNone;
  auto it = newer_.find(item);
  if (it == newer_.end()) {
    auto old = older_.find(item);
    if (old == older_.end()) return Hit::kNone;
    Entry e = std::move(old->second);
    older_.erase(old);
    Insert(item, std::move(e));
    it = newer_.find(item);
    if (it == newer_.end()) return Hit::kNone;
  }
  const Entry& e = it->second;
  if (e.cluster.empty()) return now_ms - e.miss_at_ms < kMissRetryMs ? Hit::kMiss : Hit::kNone;
  *cluster = e.cluster;
  return Hit::kCluster;
}

void ClusterCache::Put(std::string_view item, std::string_view cluster, int64_t now_ms) {
  if (capacity_ == 0) return;
  if (auto old = older_.find(item); old != older_.end()) older_.erase(old);
  auto it = newer_.find(item);
  if (it != newer_.end()) {
    it->second.cluster.assign(cluster);
    it->second.miss_at_ms = now_ms;
    return;
  }
  Insert(item, Entry{std::string(cluster), now_ms});
}

void ClusterCache::Insert(std::string_view item, Entry entry) {
  if (newer_.size() >= (capacity_ + 1) / 2) {
    older_ = std::move(newer_);
    newer_ = Map();
  }
  newer_.emplace(std::string(item), std::move(entry));
}

}  // namespace ef
