// What the tests on a real Redis Cluster check in the end: the produced items the
// cluster's filters do not report as seen (false negatives), read the way a
// recall service reads (one MGET of the user's live bucket keys through a
// ClusterRouter, then TestItems).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "support/redis_cluster.h"
#include "support/stack.h"

namespace ef::test {

// "user/item" of every item of `events` not seen now; the test fails if a read fails.
inline std::vector<std::string> ClusterMissing(const LocalRedisCluster& cluster,
                                               const Layout& layout,
                                               const std::vector<TestEvent>& events) {
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  std::map<std::string, std::vector<std::string>> by_user;
  for (const auto& e : events)
    for (const auto& i : e.items) by_user[e.user].push_back(i);
  const int64_t now_s = SystemClock().NowMs() / 1000;
  std::vector<std::string> missing;
  for (const auto& [user, items] : by_user) {
    auto plan = PlanRead(layout, user, now_s);
    REQUIRE(plan.ok());
    std::vector<std::string> args = {"MGET"};
    args.insert(args.end(), plan->keys.begin(), plan->keys.end());
    auto reply = router.Command(plan->keys.front(), args);
    REQUIRE(reply.ok());
    REQUIRE(reply->type == RedisReply::Type::kArray);
    std::vector<std::string> values;
    for (auto& e : reply->elements) values.push_back(e.str);
    const CheckResult r = TestItems(layout, values, plan->bucket_starts, items);
    for (size_t i = 0; i < items.size(); ++i)
      if (!r.seen[i]) missing.push_back(user + "/" + items[i]);
  }
  return missing;
}

}  // namespace ef::test
