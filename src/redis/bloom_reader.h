// BloomReader: the read side. For one user and candidate items, reads every live
// bucket of the user with one MGET (one round trip; all keys share the user's
// hash tag, so this also works on Redis Cluster) and tests each item's k bits.
// An item is seen if all k bits are set in at least one live bucket; a missing
// key is an empty filter (contract v1, rule 6).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/layout.h"
#include "common/status.h"
#include "redis/connection.h"

namespace ef {

struct CheckResult {
  std::vector<bool> seen;            // per item, in input order
  std::vector<int64_t> seen_bucket;  // bucket start (epoch s) of the newest matching bucket, or -1
  size_t buckets_present = 0;        // live bucket keys that exist
};

class BloomReader {
 public:
  BloomReader(RedisConnection& conn, Layout layout) : conn_(conn), layout_(std::move(layout)) {}
  StatusOr<CheckResult> Check(std::string_view user, const std::vector<std::string>& items,
                              int64_t now_seconds);

 private:
  RedisConnection& conn_;
  Layout layout_;
};

// Pure part of Check: bucket values (oldest first; empty = missing) → result.
CheckResult TestItems(const Layout& layout, const std::vector<std::string>& bucket_values,
                      const std::vector<int64_t>& bucket_starts,
                      const std::vector<std::string>& items);

}  // namespace ef
