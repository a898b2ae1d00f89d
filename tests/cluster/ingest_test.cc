// The daemon on Redis Cluster (issue 12): `exposure-filter run` with redis.address
// = the cluster's seeds writes through ClusterBitWriter (write/cluster_writer.h).
// Real parts: a local 3-master + 3-replica Redis Cluster (support/redis_cluster.h),
// the librdkafka mock cluster and the daemon binary (support/stack.h). Every test
// checks zero false negatives by reading every produced item back through the
// cluster, and every partition committed to its end.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "support/cluster_missing.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef {
namespace {

using namespace std::chrono_literals;
using test::ClusterMissing;
using test::LocalRedisCluster;
using test::Stack;
using test::TestEvent;

// Prints (always) what a fault test checked, for the logs and the closing notes.
void Report(const std::string& what, const std::vector<TestEvent>& events, size_t missing) {
  size_t items = 0;
  for (const auto& e : events) items += e.items.size();
  WARN(what << ": " << events.size() << " events, " << items << " items, " << missing
            << " false negatives");
}

Layout DefaultLayout() {
  auto l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  return *l;
}

std::string ClusterConfig(Stack& stack, const LocalRedisCluster& cluster,
                          const std::string& extra = "") {
  return stack.WriteConfig(
      "ef.yaml", "redis:\n  address: \"" + cluster.seeds() + "\"\n  cluster: true\n" + extra);
}

// Every key with the prefix, per master node index (KEYS on each master).
std::map<int, std::vector<std::string>> KeysPerMaster(const LocalRedisCluster& cluster) {
  std::map<int, std::vector<std::string>> out;
  for (int m : cluster.Masters()) {
    RedisReply r = cluster.Command(m, {"KEYS", "ef:{*"});
    for (const auto& e : r.elements) out[m].push_back(e.str);
  }
  return out;
}

std::string Tail(const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; }

}  // namespace

TEST_CASE("cluster: two daemons in one group write every event into a 3-master cluster",
          "[cluster][ingest]") {
  LocalRedisCluster cluster;
  Stack stack(8);
  const std::string config = ClusterConfig(stack, cluster);
  auto a = stack.StartDaemon(config, "a.log");
  auto b = stack.StartDaemon(config, "b.log");
  const int64_t now_ms = SystemClock().NowMs();
  const auto events = test::MakeEvents("two", 300, 6, 20, now_ms, 1);
  stack.Produce(events);
  INFO("daemon a: " << Tail(a->Output()) << "\ndaemon b: " << Tail(b->Output()));
  REQUIRE(stack.AwaitCommitted(*a, 60s));
  CHECK(ClusterMissing(cluster, DefaultLayout(), events).empty());

  // Keys on every master; every user's keys on one master, in one slot.
  const auto keys = KeysPerMaster(cluster);
  REQUIRE(keys.size() == 3);
  std::map<std::string, std::set<int>> masters_of_user;
  std::map<std::string, std::set<uint16_t>> slots_of_user;
  for (const auto& [m, list] : keys) {
    CHECK(list.size() > 50);
    for (const auto& key : list) {
      const std::string user = key.substr(key.find('{') + 1, key.find('}') - key.find('{') - 1);
      masters_of_user[user].insert(m);
      slots_of_user[user].insert(KeySlot(key));
    }
  }
  CHECK(masters_of_user.size() == 300);
  for (const auto& [user, ms] : masters_of_user) CHECK(ms.size() == 1);
  for (const auto& [user, slots] : slots_of_user) CHECK(slots.size() == 1);
  // Both daemons took part (each was assigned partitions).
  CHECK(test::AssignmentsWithPartitions(a->Output()) >= 1);
  CHECK(test::AssignmentsWithPartitions(b->Output()) >= 1);
}

TEST_CASE("cluster: slots resharded during ingest lose nothing (MOVED and ASK followed)",
          "[cluster][ingest]") {
  LocalRedisCluster cluster;
  Stack stack(4);
  const std::string config = ClusterConfig(stack, cluster);
  auto daemon = stack.StartDaemon(config);
  const int64_t now_ms = SystemClock().NowMs();
  std::vector<TestEvent> all;
  const auto first = test::MakeEvents("re1", 400, 5, 20, now_ms, 2);
  stack.Produce(first);
  all.insert(all.end(), first.begin(), first.end());
  REQUIRE(test::WaitFor([&] { return stack.TotalCommitted() > 0; }, 30s));
  // Move a third of one master's slots to another while events keep coming.
  const std::vector<int> masters = cluster.Masters();
  std::thread producer([&] {
    for (int wave = 0; wave < 4; ++wave) {
      const auto more = test::MakeEvents("re" + std::to_string(wave + 2), 200, 5, 20, now_ms,
                                         10 + static_cast<uint64_t>(wave));
      stack.Produce(more);
      all.insert(all.end(), more.begin(), more.end());
    }
  });
  cluster.Reshard(masters[0], masters[1], 1500);
  producer.join();
  cluster.AwaitHealthy();
  // And after it: the daemon's slot map is stale now, so these writes meet MOVED.
  const auto after = test::MakeEvents("re-after", 200, 5, 20, now_ms, 20);
  stack.Produce(after);
  all.insert(all.end(), after.begin(), after.end());
  INFO("daemon: " << Tail(daemon->Output()));
  REQUIRE(stack.AwaitCommitted(*daemon, 90s));
  const auto missing = ClusterMissing(cluster, DefaultLayout(), all);
  Report("reshard of 1500 slots during ingest", all, missing.size());
  CHECK(missing.empty());
  // The writes did meet the migration: redirections were followed, not failed.
  CHECK(daemon->Output().find("followed a MOVED") != std::string::npos);
}

namespace {

// Ingest with wait_replicas 1; `fault` strikes once the first events are
// committed, while more are produced; then zero false negatives.
void IngestThroughFault(const std::string& what, const std::string& tag, uint64_t seed,
                        const std::function<void(LocalRedisCluster&)>& fault) {
  LocalRedisCluster cluster;
  Stack stack(4);
  const std::string config = ClusterConfig(stack, cluster, "  wait_replicas: 1\n");
  auto daemon = stack.StartDaemon(config);
  const int64_t now_ms = SystemClock().NowMs();
  std::vector<TestEvent> all = test::MakeEvents(tag + "1", 600, 5, 20, now_ms, seed);
  stack.Produce(all);
  REQUIRE(test::WaitFor([&] { return stack.TotalCommitted() > 0; }, 30s));
  fault(cluster);
  const auto more = test::MakeEvents(tag + "2", 300, 5, 20, now_ms, seed + 1);
  stack.Produce(more);
  all.insert(all.end(), more.begin(), more.end());
  cluster.AwaitHealthy();
  INFO("daemon: " << Tail(daemon->Output()));
  REQUIRE(stack.AwaitCommitted(*daemon, 90s));
  const auto missing = ClusterMissing(cluster, DefaultLayout(), all);
  Report(what, all, missing.size());
  CHECK(missing.empty());
}

}  // namespace

TEST_CASE("cluster: a master killed during ingest with wait_replicas 1 loses nothing",
          "[cluster][ingest][failover]") {
  // The killed master's replica takes over (AwaitHealthy). With wait_replicas 1
  // the promoted replica needs a replica of its own before WAIT succeeds again
  // (until then the daemon retries its batch, committing nothing): the killed
  // node comes back as one.
  IngestThroughFault("master SIGKILLed during ingest", "kill", 3, [](LocalRedisCluster& c) {
    const int m = c.Masters().front();
    c.Kill(m);
    c.AwaitHealthy();
    c.Start(m);
  });
}

TEST_CASE("cluster: a manual CLUSTER FAILOVER during ingest loses nothing",
          "[cluster][ingest][failover]") {
  IngestThroughFault("CLUSTER FAILOVER during ingest", "fo", 5, [](LocalRedisCluster& c) {
    const int replica = c.ReplicaOf(c.Masters().front());
    REQUIRE(replica >= 0);
    c.FailoverTo(replica);
  });
}

TEST_CASE("cluster: bench-redis writes into every master and reports Redis CPU of all",
          "[cluster][bench_redis]") {
  LocalRedisCluster cluster;
  auto r = test::RunCommand({EF_BINARY, "bench-redis", "--json", "-n", "20000", "--users", "5000",
                             "--set", "redis.address=" + cluster.seeds()},
                            "", /*stdout_only=*/true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string last = r.out.substr(r.out.rfind('{'));
  CHECK(last.find("\"events\":20000") != std::string::npos);
  for (int m : cluster.Masters()) CHECK(cluster.Command(m, {"DBSIZE"}).integer > 100);
  // A second run refuses: the cluster holds filter keys now.
  auto again = test::RunCommand(
      {EF_BINARY, "bench-redis", "-n", "1000", "--set", "redis.address=" + cluster.seeds()});
  CHECK(again.code == 2);
  CHECK(again.out.find("already has keys") != std::string::npos);
}

TEST_CASE("cluster: replay writes a topic's range into the cluster", "[cluster][replay]") {
  LocalRedisCluster cluster;
  Stack stack(2);
  const std::string config = ClusterConfig(stack, cluster);
  const int64_t now_ms = SystemClock().NowMs();
  const auto events = test::MakeEvents("rp", 200, 4, 2, now_ms, 7);
  stack.Produce(events);
  auto r = test::RunCommand({EF_BINARY, "replay", "-c", config, "--since", "3d"}, "",
                            /*stdout_only=*/true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(ClusterMissing(cluster, DefaultLayout(), events).empty());
  // The meta went to its slot's master through the router.
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  auto meta = router.Command("ef:meta", {"HGET", "ef:meta", "version"});
  REQUIRE(meta.ok());
  CHECK(meta->str == "3");
}

}  // namespace ef
