// BloomReader: the read side. For one user and candidate items, reads the user's
// live buckets and the next one (ReadBuckets: tolerates writer clocks up to one
// bucket ahead) with one MGET (one round trip; all keys share the user's hash tag,
// so this also works on Redis Cluster) and tests each item's positions in every
// stage the value holds. An item is seen if all k_s positions of some stage s are
// set in at least one bucket read; a missing key is an empty filter (docs/FORMAT.md
// rule 6; v2 rule 8). The layout must be the stored one (redis/meta.h ReadLayout). A user ID that
// has no valid key (rule 4: empty, or starting with '}') is an error, not an empty result.
// With clusters (docs/CONTENT.md rule 5, filter.near_duplicates), TestItems also
// tells near duplicates: see TestItems with `clusters` below.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/layout.h"
#include "common/status.h"
#include "redis/connection.h"

namespace ef {

// Candidate items, read in place from a vector of strings or an array of views
// (no copy of either). A parameter type: it holds a pointer to the caller's
// items, which must outlive it (it binds to a temporary vector too, which lives
// only to the end of the call's full expression).
class ItemList {
 public:
  ItemList() = default;                            // no items
  ItemList(const std::vector<std::string>& items)  // NOLINT: implicit on purpose
      : strings_(items.data()), size_(items.size()) {}
  ItemList(std::span<const std::string_view> items)  // NOLINT: implicit on purpose
      : views_(items.data()), size_(items.size()) {}
  size_t size() const { return size_; }
  std::string_view operator[](size_t i) const {
    return strings_ != nullptr ? std::string_view(strings_[i]) : views_[i];
  }

 private:
  const std::string* strings_ = nullptr;
  const std::string_view* views_ = nullptr;
  size_t size_ = 0;
};

struct CheckResult {
  std::vector<bool> seen;            // per item, in input order
  size_t seen_count = 0;             // true entries of seen
  std::vector<int64_t> seen_bucket;  // bucket start (epoch s) of the newest matching bucket, or -1
  size_t buckets_present = 0;        // keys read (ReadBuckets) that exist
  // Of those, version-4 keys whose header names no size class (docs/FORMAT.md
  // rule 11: not valid; not tested, the answer comes from the other keys).
  size_t invalid_keys = 0;
  // Per item: not seen, but in the user's served ring (rule 10, a pseudo-exposure:
  // a recall service returned it recently). Empty when no ring was given.
  std::vector<bool> served;
  size_t served_count = 0;  // true entries of served
  // docs/CONTENT.md rule 5, only from TestItems with clusters (else empty): per
  // item, not seen, but its cluster C != the item is set (or, while revision-1
  // buckets are read, token(C)). seen, near_duplicate and served exclude each other.
  std::vector<bool> near_duplicate;
  size_t near_duplicate_count = 0;  // true entries of near_duplicate
};

// The keys a check of `user` at `now_seconds` reads, oldest first, with their
// bucket starts (ReadBuckets). kInvalidArgument naming the user if the user ID is
// not valid (CheckUserId). Pure.
struct ReadPlan {
  std::vector<int64_t> bucket_starts;
  std::vector<std::string> keys;  // the bucket keys
  std::string served_key;         // rule 10: read with them, after the last one
};
StatusOr<ReadPlan> PlanRead(const Layout& layout, std::string_view user, int64_t now_seconds);

class ClusterRouter;

class BloomReader {
 public:
  BloomReader(RedisConnection& conn, Layout layout) : conn_(&conn), layout_(std::move(layout)) {}
  // On a Redis Cluster: the MGET goes to the user's slot's master through the
  // router (redirections followed, within the router's deadline; a TRYAGAIN
  // during a migration is retried as the router's options say). For tools and
  // tests; exposure_filter::Client is the service read path.
  BloomReader(ClusterRouter& router, Layout layout)
      : router_(&router), layout_(std::move(layout)) {}
  // PlanRead, one MGET (the bucket keys and the served key), TestItems. Errors: PlanRead's (before
  // any command is sent), connection failures, and error replies (e.g. CROSSSLOT) naming the
  // server.
  StatusOr<CheckResult> Check(std::string_view user, const std::vector<std::string>& items,
                              int64_t now_seconds);

 private:
  RedisConnection* conn_ = nullptr;
  ClusterRouter* router_ = nullptr;
  Layout layout_;
};

// Pure part of Check: bucket values (oldest first; empty = missing) → result.
// buckets_present counts the non-empty values. Each item is hashed once, and each
// of its positions computed once and tested in every bucket at the same time (up
// to 64 buckets; more are tested one after the other, with the same result): the
// read side's hot path (exposure_filter::Client). Stages small enough for the
// number of items are bit-sliced first (bloom/bit_slice.h), so a probe is one
// load for all buckets. Thread-safe (keeps per-thread scratch buffers).
// served_value: the user's served key as read ("" = missing, or no ring): an
// item not seen is then also tested against the ring (CheckResult::served).
CheckResult TestItems(const Layout& layout, const std::vector<std::string_view>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items,
                      std::string_view served_value = {});
CheckResult TestItems(const Layout& layout, const std::vector<std::string>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items,
                      std::string_view served_value = {});

// TestItems with near-duplicate clusters (docs/CONTENT.md rule 5, revision 2,
// bloom/cluster_token.h): clusters is empty (none known: exactly TestItems above)
// or one per item, "" for an item whose cluster is unknown. Item J with cluster C
// is seen when J is set; else near_duplicate when C != J and C is set; an item
// with no cluster, or that is its own cluster (a founder), is one probe. While
// layout.ReadsClusterTokens(bucket_starts.front()) (a bucket read may come from
// revision-1 writers), token(C) is tested too and also makes J a near duplicate.
// The extra probes join the items in one TestItems pass. With a served ring: an
// item neither seen nor a near duplicate is served when the ring holds it or one
// of its extra probes, as the client marks a page (a served near duplicate).
// seen_bucket: for seen items only. Requires clusters.size() is 0 or items.size().
CheckResult TestItems(const Layout& layout, const std::vector<std::string_view>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items, ItemList clusters,
                      std::string_view served_value);

}  // namespace ef
