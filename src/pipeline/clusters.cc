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

}  // namespace ef
