// Contract rule 5 of docs/CONTENT.md ("5. Filtering by cluster", revision 2): how
// a near-duplicate cluster lives in a user's bucket keys, beside the item IDs.
//
// - A cluster C is named by its founder's item ID (rule 3: the first item of the
//   cluster). Writers: an exposure of item I whose cluster C is known sets I,
//   and also C itself when C != I (WritesClusterMark). An item that is its own
//   cluster (the founder, and every item with no near duplicate) costs no extra
//   item.
// - Readers: a candidate J with cluster C (known) is `seen` when J is set; else
//   `near_duplicate` when C != J and C is set. A founder (C == J) is one probe,
//   and reads `seen` once any member of its cluster was exposed; a member costs
//   two probes, so its false-positive rate is at most twice the filter's.
// - Revision 1 (before docs/FORMAT.md rule 7's field founder_marks_from):
//   writers set the token of C, the byte 0xFF followed by C's bytes, instead of
//   C. Item IDs are UTF-8 text, where 0xFF never occurs, so a token never equals
//   an item ID. Readers also test token(C) while a bucket they read may hold
//   tokens (Layout::ReadsClusterTokens).
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace ef {

inline constexpr char kClusterTokenByte = '\xFF';

// Revision 1: appends token(cluster) to *out.
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
// True when a writer sets the cluster (its founder's ID) beside `item`.
inline bool WritesClusterMark(std::string_view item, std::string_view cluster) {
  return !cluster.empty() && cluster != item;
}

}  // namespace ef
