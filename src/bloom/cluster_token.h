// Contract rule 5 of docs/CONTENT.md ("5. Filtering by cluster"): how a
// near-duplicate cluster lives in a user's bucket keys, beside the item IDs.
//
// - The cluster token of cluster C is the byte 0xFF followed by C's bytes. It
//   is hashed and placed like any item (docs/FORMAT.md rules 1 to 9, the key's
//   own rule). Item IDs are UTF-8 text (JSON strings or integers), where 0xFF
//   never occurs, so a token never equals an item ID.
// - Writers: an exposure of item I whose cluster C is known sets I, and also
//   token(C) when C != I. An item that is its own cluster (the first of its
//   cluster, and every item with no near-duplicate) costs no extra item.
// - Readers: a candidate J with cluster C (known) is `seen` when J is set; else
//   `near_duplicate` when token(C) is set, or when C != J and C itself is set
//   (the user saw the cluster's first item). With no known cluster, J alone is
//   tested. So a candidate with a cluster costs up to three tests, and its
//   false-positive rate is at most three times the filter's.
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace ef {

inline constexpr char kClusterTokenByte = '\xFF';

// Appends token(cluster) to *out.
inline void AppendClusterToken(std::string_view cluster, std::string* out) {
  out->push_back(kClusterTokenByte);
  out->append(cluster);
}
inline std::string ClusterToken(std::string_view cluster) {
  std::string out;
  out.reserve(cluster.size() + 1);
  AppendClusterToken(cluster, &out);
  return out;
}
// True when a writer sets token(cluster) for an exposure of `item`.
inline bool WritesClusterToken(std::string_view item, std::string_view cluster) {
  return !cluster.empty() && cluster != item;
}

}  // namespace ef
