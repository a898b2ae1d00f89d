// ClusterRouter (src/redis/cluster.h) through master failures on a real local
// Redis Cluster (tests/support/redis_cluster.h): a master killed and its
// replica promoted, a manual CLUSTER FAILOVER, and a slot range with no node
// left (the call fails after its deadline with the node and error named). One
// cluster for the file; each test leaves it healthy.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "redis/cluster.h"
#include "support/redis_cluster.h"
#include "support/wait.h"

namespace ef {
namespace {

using test::LocalRedisCluster;

LocalRedisCluster& Cluster() {
  static LocalRedisCluster cluster;
  return cluster;
}

// `n` SET commands of keys spread over every slot range, values tagged `round`.
std::vector<ClusterRouter::SlotCommand> Writes(const std::string& prefix, int n,
                                               const std::string& round) {
  std::vector<ClusterRouter::SlotCommand> out;
  for (int i = 0; i < n; ++i) {
    const std::string key = prefix + ":{u" + std::to_string(i) + "}";
    out.push_back({KeySlot(key), {"SET", key, round + std::to_string(i)}});
  }
  return out;
}

std::vector<ClusterRouter::SlotCommand> Reads(const std::string& prefix, int n) {
  std::vector<ClusterRouter::SlotCommand> out;
  for (int i = 0; i < n; ++i) {
    const std::string key = prefix + ":{u" + std::to_string(i) + "}";
    out.push_back({KeySlot(key), {"GET", key}});
  }
  return out;
}

void CheckValues(ClusterRouter& router, const std::string& prefix, int n,
                 const std::string& round) {
  auto r = router.Commands(Reads(prefix, n));
  REQUIRE(r.ok());
  for (int i = 0; i < n; ++i) {
    INFO("key " << i);
    REQUIRE((*r)[static_cast<size_t>(i)].str == round + std::to_string(i));
  }
}

TEST_CASE(
    "ClusterRouter: a master killed, its replica promoted - writes succeed within the "
    "deadline on the new master",
    "[cluster][failover]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions(30000));
  constexpr int kKeys = 1500;
  REQUIRE(router.Commands(Writes("kill", kKeys, "a")).ok());
  const uint16_t slot = KeySlot("kill:{u0}");
  const int victim = cluster.MasterForSlot(slot);
  const int replica = cluster.ReplicaOf(victim);
  REQUIRE(replica >= 0);
  // The replica has everything the master acknowledged before the kill (WAIT on
  // the router's connection, the one that wrote).
  auto synced = router.CommandInSlot(slot, {"WAIT", "1", "5000"});
  REQUIRE(synced.ok());
  REQUIRE(synced->integer == 1);

  cluster.Kill(victim);
  // Right away: the router's connection to the victim fails, the cluster has not
  // noticed yet; the call retries until the replica took over, and nothing that
  // was replicated is lost.
  CheckValues(router, "kill", kKeys, "a");
  auto w = router.Commands(Writes("kill", kKeys, "b"));
  REQUIRE(w.ok());
  for (const RedisReply& r : *w) REQUIRE(r.str == "OK");
  CHECK(router.stats().retries > 0);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(replica));
  cluster.AwaitHealthy();  // the victim still down: healthy = its replica took over
  CHECK(cluster.MasterForSlot(slot) == replica);
  CHECK(cluster.Command(replica, {"GET", "kill:{u0}"}).str == "b0");
  CheckValues(router, "kill", kKeys, "b");

  // The old master comes back as a replica of the new one.
  cluster.Start(victim);
  cluster.AwaitHealthy();
  CHECK(cluster.ReplicaOf(replica) == victim);
  CheckValues(router, "kill", kKeys, "b");
}

TEST_CASE("ClusterRouter: CLUSTER FAILOVER on a replica - the router follows the new master",
          "[cluster][failover]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions(20000));
  constexpr int kKeys = 1500;
  REQUIRE(router.Commands(Writes("manual", kKeys, "a")).ok());
  const uint16_t slot = KeySlot("manual:{u0}");
  const int old_master = cluster.MasterForSlot(slot);
  const int replica = cluster.ReplicaOf(old_master);
  REQUIRE(replica >= 0);
  const uint64_t moved_before = router.stats().moved;
  cluster.FailoverTo(replica);
  REQUIRE(cluster.MasterForSlot(slot) == replica);

  auto w = router.Commands(Writes("manual", kKeys, "b"));
  REQUIRE(w.ok());
  for (const RedisReply& r : *w) REQUIRE(r.str == "OK");
  // The old master, now a replica, answered MOVED for its former slots.
  CHECK(router.stats().moved > moved_before);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(replica));
  CHECK(cluster.Command(replica, {"GET", "manual:{u0}"}).str == "b0");
  CheckValues(router, "manual", kKeys, "b");
}

TEST_CASE(
    "ClusterRouter: slots with no node left - the call fails after its deadline naming "
    "the node and the error - and recovers once the nodes are back",
    "[cluster][failover]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions(1500));
  const std::string key = "down:{u1}";
  REQUIRE(router.Command(key, {"SET", key, "1"}).ok());
  const int master = cluster.MasterForSlot(KeySlot(key));
  const int replica = cluster.ReplicaOf(master);
  REQUIRE(replica >= 0);
  cluster.Kill(replica);
  cluster.Kill(master);

  auto r = router.Command(key, {"SET", key, "2"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  INFO(r.status().message());
  CHECK_THAT(r.status().message(),
             Catch::Contains("1 of 1 commands") && Catch::Contains("after 1500 ms"));
  // The last error names a node: the dead master, or a live one saying CLUSTERDOWN.
  CHECK_THAT(r.status().message(),
             Catch::Contains(cluster.address(master)) || Catch::Contains("CLUSTERDOWN"));

  // A key on a live master: refused too once the cluster is down (full coverage
  // is required), the error naming that node and CLUSTERDOWN.
  int other_master = -1;
  for (int m : cluster.Masters()) {
    if (m != master && cluster.running(m)) other_master = m;
  }
  REQUIRE(other_master >= 0);
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const std::string k = "down:{o" + std::to_string(i) + "}";
    if (cluster.MasterForSlot(KeySlot(k)) == other_master) other = k;
  }
  REQUIRE(test::WaitFor(
      [&] {
        return cluster.Command(other_master, {"GET", other}).str.rfind("CLUSTERDOWN", 0) == 0;
      },
      std::chrono::seconds(20)));
  auto down = router.Command(other, {"GET", other});
  REQUIRE_FALSE(down.ok());
  CHECK_THAT(down.status().message(),
             Catch::Contains("CLUSTERDOWN") && Catch::Contains(cluster.address(other_master)));

  // Both back (the master keeps its slots in nodes.conf; no data without
  // persistence): the same router works again.
  cluster.Start(master);
  cluster.Start(replica);
  cluster.AwaitHealthy();
  auto back = router.Command(key, {"SET", key, "3"});
  REQUIRE(back.ok());
  CHECK(back->str == "OK");
  CHECK(cluster.Command(master, {"GET", key}).str == "3");
}

}  // namespace
}  // namespace ef
