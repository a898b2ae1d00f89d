// ClusterRouter and SlotMap (src/redis/cluster.h) on a real local Redis Cluster
// of 3 masters + 3 replicas (tests/support/redis_cluster.h): topology discovery,
// the slot map against CLUSTER SLOTS, KeySlot against CLUSTER KEYSLOT, routed
// pipelines over all masters, MOVED after a slot moved, ASK during a migration,
// and a plain redis-server recognised as not a cluster. One cluster for the
// whole file (its slot layout changes from test to test; each test reads it).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "redis/cluster.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef {
namespace {

using test::LocalRedisCluster;

LocalRedisCluster& Cluster() {
  static LocalRedisCluster cluster;
  return cluster;
}

// Slot -> master port from one node's CLUSTER SLOTS, read independently of SlotMap.
struct RawSlots {
  std::vector<int> master_port = std::vector<int>(kClusterSlots, 0);
};
RawSlots ReadRawSlots(const LocalRedisCluster& cluster, int node) {
  const RedisReply r = cluster.Command(node, {"CLUSTER", "SLOTS"});
  REQUIRE(r.type == RedisReply::Type::kArray);
  RawSlots out;
  for (const RedisReply& e : r.elements) {
    REQUIRE(e.elements.size() >= 3);
    const int master = static_cast<int>(e.elements[2].elements.at(1).integer);
    for (long long s = e.elements[0].integer; s <= e.elements[1].integer; ++s)
      out.master_port[static_cast<size_t>(s)] = master;
  }
  return out;
}

// A key in `slot` made of a hash tag; searched, since KeySlot is one-way.
std::string KeyInSlot(uint16_t slot, const std::string& suffix) {
  for (int i = 0;; ++i) {
    const std::string tag = "t" + std::to_string(i);
    if (KeySlot(tag) == slot) return "{" + tag + "}" + suffix;
  }
}

TEST_CASE("LocalRedisCluster: 3 masters and 3 replicas, each master with one replica",
          "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  const std::vector<LocalRedisCluster::Node> nodes = cluster.Nodes();
  REQUIRE(nodes.size() == 6);
  std::map<int, int> replicas_of;
  for (const auto& n : nodes) {
    CHECK(n.running);
    CHECK(n.id.size() == 40);
    CHECK(n.port + 10000 <= 65535);
    if (!n.master) ++replicas_of[n.master_index];
  }
  const std::vector<int> masters = cluster.Masters();
  REQUIRE(masters.size() == 3);
  for (int m : masters) CHECK(replicas_of[m] == 1);
  for (int m : masters) CHECK(cluster.ReplicaOf(m) >= 0);
  CHECK(cluster.seeds().find(cluster.address(5)) != std::string::npos);
}

TEST_CASE("ClusterRouter: the discovered slot map equals CLUSTER SLOTS of every node",
          "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  CHECK_FALSE(router.not_a_cluster());
  const SlotMap& map = router.slot_map();
  CHECK(map.AllCovered());
  CHECK(map.shards().size() == 3);
  std::set<int> master_ports;
  for (int n = 0; n < cluster.size(); ++n) {
    INFO("node " << cluster.address(n));
    const RawSlots raw = ReadRawSlots(cluster, n);
    for (int s = 0; s < kClusterSlots; ++s) {
      const NodeAddress* m = map.MasterOf(static_cast<uint16_t>(s));
      REQUIRE(m != nullptr);
      REQUIRE(m->host == "127.0.0.1");
      REQUIRE(m->port == raw.master_port[static_cast<size_t>(s)]);
      master_ports.insert(m->port);
    }
  }
  // Replicas: CLUSTER SLOTS lists those with replication data a node has heard of,
  // so views differ for a while; each listed one is a replica of that master.
  const std::vector<LocalRedisCluster::Node> nodes = cluster.Nodes();
  size_t listed = 0;
  for (const auto& shard : map.shards()) {
    for (const auto& r : shard.replicas) {
      bool is_replica = false;
      for (const auto& n : nodes) {
        is_replica =
            is_replica || (n.port == r.port && !n.master && n.master_index >= 0 &&
                           nodes[static_cast<size_t>(n.master_index)].port == shard.master.port);
      }
      CHECK(is_replica);
      ++listed;
    }
  }
  CHECK(listed <= 3);
  std::set<int> expected;
  for (int m : cluster.Masters()) expected.insert(cluster.port(m));
  CHECK(master_ports == expected);
  for (const auto& shard : map.shards()) {
    int index = -1;
    for (int n = 0; n < cluster.size(); ++n) {
      if (cluster.port(n) == shard.master.port) index = n;
    }
    REQUIRE(index >= 0);
    CHECK(shard.master_id == cluster.id(index));
  }

  // A dead first seed: the next one answers.
  ClusterRouterOptions o = cluster.RouterOptions();
  o.seeds.insert(o.seeds.begin(), NodeAddress{"127.0.0.1", test::FreePort()});
  ClusterRouter second(o);
  REQUIRE(second.Discover().ok());
  CHECK(second.slot_map().AllCovered());
  CHECK(second.stats().topology_reads == 1);
}

TEST_CASE("KeySlot equals CLUSTER KEYSLOT on the cluster, hash tags and the spec's value",
          "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  std::vector<std::string> keys = {"123456789",
                                   "{123456789}",
                                   "a{123456789}b",
                                   "{}",
                                   "{}123456789",
                                   "foo{}{bar}",
                                   "foo{{bar}}zap",
                                   "foo{bar}{zap}",
                                   "{user1000}.following",
                                   "{user1000}.followers",
                                   "ef:{u1}:20251122",
                                   "ef:meta",
                                   "}{",
                                   "{{}}",
                                   "{",
                                   "}",
                                   "",
                                   "{a"};
  std::mt19937_64 rng(12);
  const std::string alphabet("{}ab:u1\xc3\xbc\x00\xff", 11);
  for (int n = 0; n < 500; ++n) {
    std::string key(static_cast<size_t>(rng() % 14), 'x');
    for (char& c : key) c = alphabet[rng() % alphabet.size()];
    keys.push_back(key);
  }
  const RedisReply spec = cluster.Command(0, {"CLUSTER", "KEYSLOT", "123456789"});
  CHECK(spec.integer == 12739);  // CRC16("123456789") = 0x31C3; & 16383
  CHECK(KeySlot("123456789") == 12739);
  for (const std::string& key : keys) {
    INFO("key '" << key << "'");
    const RedisReply r =
        cluster.Command(static_cast<int>(key.size() % 6), {"CLUSTER", "KEYSLOT", key});
    REQUIRE(r.type == RedisReply::Type::kInteger);
    CHECK(r.integer == KeySlot(key));
  }
}

TEST_CASE(
    "ClusterRouter::Commands: keys over all masters, one connection per master, replies "
    "in input order",
    "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions());
  std::vector<ClusterRouter::SlotCommand> writes, reads;
  constexpr int kKeys = 3000;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "cmds:{u" + std::to_string(i) + "}:x";
    writes.push_back({KeySlot(key), {"SET", key, "v" + std::to_string(i)}});
    reads.push_back({KeySlot(key), {"GET", key}});
  }
  // Reads interleaved with an error reply: a WRONGTYPE stays in its place.
  reads.insert(reads.begin() + 1500, {KeySlot("cmds:{u7}:x"), {"HGET", "cmds:{u7}:x", "f"}});
  auto w = router.Commands(writes);
  REQUIRE(w.ok());
  REQUIRE(w->size() == kKeys);
  for (const RedisReply& r : *w) REQUIRE(r.str == "OK");
  CHECK(router.stats().connects == 3);
  CHECK(router.stats().moved == 0);
  auto r = router.Commands(reads);
  REQUIRE(r.ok());
  REQUIRE(r->size() == kKeys + 1);
  for (int i = 0; i < kKeys; ++i) {
    const RedisReply& reply = (*r)[static_cast<size_t>(i < 1500 ? i : i + 1)];
    INFO("key " << i);
    REQUIRE(reply.type == RedisReply::Type::kString);
    REQUIRE(reply.str == "v" + std::to_string(i));
  }
  CHECK((*r)[1500].type == RedisReply::Type::kError);
  CHECK_THAT((*r)[1500].str, Catch::StartsWith("WRONGTYPE"));
  CHECK(router.stats().connects == 3);  // reused

  // Every key is on the master CLUSTER SLOTS names, and every master holds some.
  std::map<int, int> per_master;
  for (int i = 0; i < kKeys; i += 37) {
    const std::string key = "cmds:{u" + std::to_string(i) + "}:x";
    const int owner = cluster.MasterForSlot(KeySlot(key));
    REQUIRE(owner >= 0);
    CHECK(cluster.Command(owner, {"GET", key}).str == "v" + std::to_string(i));
    ++per_master[owner];
  }
  CHECK(per_master.size() == 3);
  for (const auto& [m, n] : per_master) CHECK(n > 0);

  // The single-command forms.
  auto one = router.Command("cmds:{u5}:x", {"GET", "cmds:{u5}:x"});
  REQUIRE(one.ok());
  CHECK(one->str == "v5");
  auto in_slot = router.CommandInSlot(KeySlot("cmds:{u6}:x"), {"GET", "cmds:{u6}:x"});
  REQUIRE(in_slot.ok());
  CHECK(in_slot->str == "v6");
  auto none = router.Commands({});
  REQUIRE(none.ok());
  CHECK(none->empty());

  // Every connection killed by the servers: the next call reconnects and retries.
  const uint64_t retries = router.stats().retries;
  for (int m : cluster.Masters()) {
    CHECK(cluster.Command(m, {"CLIENT", "KILL", "TYPE", "normal"}).integer >= 1);
  }
  auto again = router.Commands(reads);
  REQUIRE(again.ok());
  CHECK((*again)[0].str == "v0");
  CHECK(router.stats().retries > retries);
  CHECK(router.stats().connects == 6);
}

TEST_CASE(
    "ClusterRouter::Commands: node groups run in parallel - a paused master does not "
    "hold up the others",
    "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouterOptions options = cluster.RouterOptions(60000);
  options.redis.command_timeout_ms = 60000;  // A's write waits out the pause, no timeout
  ClusterRouter router(options);
  REQUIRE(router.Discover().ok());
  // A: the master a serial loop would serve first (lowest address); B: another.
  std::vector<int> masters = cluster.Masters();
  std::sort(masters.begin(), masters.end(),
            [&](int x, int y) { return cluster.port(x) < cluster.port(y); });
  const int a = masters[0], b = masters[1];
  auto key_on = [&](int node, const std::string& prefix) {
    for (int i = 0;; ++i) {
      const std::string k = prefix + std::to_string(i);
      if (cluster.MasterForSlot(KeySlot(k)) == node) return k;
    }
  };
  const std::string key_a = key_on(a, "par:a"), key_b = key_on(b, "par:b");
  REQUIRE(cluster.Command(a, {"CLIENT", "PAUSE", "20000", "WRITE"}).str == "OK");
  auto call = std::async(std::launch::async, [&] {
    return router.Commands(
        {{KeySlot(key_a), {"SET", key_a, "1"}}, {KeySlot(key_b), {"SET", key_b, "1"}}});
  });
  // B's write happens while A's is still held by the pause (20 s; a serial
  // router would reach B after it).
  CHECK(test::WaitFor(
      [&] {
        return cluster.Command(b, {"EXISTS", key_b}).integer == 1;
      },
      std::chrono::seconds(10)));
  CHECK(cluster.Command(a, {"EXISTS", key_a}).integer == 0);
  REQUIRE(cluster.Command(a, {"CLIENT", "UNPAUSE"}).str == "OK");
  auto replies = call.get();
  REQUIRE(replies.ok());
  CHECK((*replies)[0].str == "OK");
  CHECK((*replies)[1].str == "OK");
  CHECK(cluster.Command(a, {"EXISTS", key_a}).integer == 1);
}

TEST_CASE(
    "ClusterRouter: TRYAGAIN (a multi-key command over a half-moved slot) is retried "
    "until the migration ends",
    "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions(30000));
  const std::string k1 = "try:{user-t}:1", k2 = "try:{user-t}:2";
  const uint16_t slot = KeySlot(k1);
  REQUIRE(router.Commands({{slot, {"SET", k1, "x"}}, {slot, {"SET", k2, "y"}}}).ok());
  const int from = cluster.MasterForSlot(slot);
  int to = -1;
  for (int m : cluster.Masters()) {
    if (m != from) to = m;
  }
  cluster.BeginMigration(slot, from, to);
  // Move one of the two keys by hand.
  REQUIRE(cluster
              .Command(from,
                       {"MIGRATE", "127.0.0.1", std::to_string(cluster.port(to)), k1, "0", "5000"})
              .str == "OK");
  const RedisReply direct = cluster.Command(from, {"MGET", k1, k2});
  REQUIRE(direct.type == RedisReply::Type::kError);
  REQUIRE_THAT(direct.str, Catch::StartsWith("TRYAGAIN"));
  auto tryagain_count = [&] {
    const std::string info = cluster.Command(from, {"INFO", "errorstats"}).str;
    const size_t at = info.find("errorstat_TRYAGAIN:count=");
    return at == std::string::npos ? 0 : std::atoi(info.c_str() + at + 25);
  };
  const int before = tryagain_count();
  auto call = std::async(std::launch::async, [&] { return router.Command(k1, {"MGET", k1, k2}); });
  // The router got TRYAGAIN at least once (and keeps retrying) before the end.
  REQUIRE(test::WaitFor([&] { return tryagain_count() > before; }, std::chrono::seconds(15)));
  cluster.FinishMigration(slot);
  auto r = call.get();
  REQUIRE(r.ok());
  REQUIRE(r->type == RedisReply::Type::kArray);
  REQUIRE(r->elements.size() == 2);
  CHECK(r->elements[0].str == "x");
  CHECK(r->elements[1].str == "y");
  CHECK(router.stats().retries >= 1);
}

TEST_CASE(
    "ClusterRouter: MOVED after a slot moved - the router follows, refreshes, and the "
    "write lands on the new owner",
    "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouterOptions options = cluster.RouterOptions();
  options.refresh_interval_ms = 0;  // every MOVED re-reads the topology at once
  ClusterRouter router(options);
  const std::string key = "moved:{user-m}:1";
  const uint16_t slot = KeySlot(key);
  auto first = router.Command(key, {"SET", key, "before"});
  REQUIRE(first.ok());
  REQUIRE(first->str == "OK");
  const int from = cluster.MasterForSlot(slot);
  int to = -1;
  for (int m : cluster.Masters()) {
    if (m != from) to = m;
  }
  REQUIRE(to >= 0);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(from));
  // A router whose refreshes are rate-limited away: the MOVED alone steers it.
  ClusterRouterOptions limited_options = cluster.RouterOptions();
  limited_options.refresh_interval_ms = 1000 * 1000 * 1000;
  ClusterRouter limited(limited_options);
  REQUIRE(limited.Discover().ok());

  cluster.BeginMigration(slot, from, to);
  cluster.FinishMigration(slot);  // moves the key too
  REQUIRE(cluster.MasterForSlot(slot) == to);
  // The router still believes the old owner: it gets MOVED and follows.
  const uint64_t reads_before = router.stats().topology_reads;
  auto write = router.Command(key, {"SET", key, "after"});
  REQUIRE(write.ok());
  CHECK(write->str == "OK");
  CHECK(router.stats().moved >= 1);
  CHECK(router.stats().topology_reads > reads_before);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(to));
  CHECK(cluster.Command(to, {"GET", key}).str == "after");
  const RedisReply old_owner = cluster.Command(from, {"GET", key});
  CHECK(old_owner.type == RedisReply::Type::kError);
  CHECK_THAT(old_owner.str, Catch::StartsWith("MOVED " + std::to_string(slot)));

  auto limited_read = limited.Command(key, {"GET", key});
  REQUIRE(limited_read.ok());
  CHECK(limited_read->str == "after");
  CHECK(limited.stats().moved == 1);
  CHECK(limited.stats().topology_reads == 1);
  CHECK(limited.slot_map().MasterOf(slot)->port == cluster.port(to));
  REQUIRE(limited.Command(key, {"GET", key}).ok());
  CHECK(limited.stats().moved == 1);  // the hint stuck

  // A reshard by redis-cli of 200 slots: every key is still readable and
  // writable through the same router.
  std::vector<ClusterRouter::SlotCommand> writes, reads;
  for (int i = 0; i < 2000; ++i) {
    const std::string k = "reshard:{u" + std::to_string(i) + "}";
    writes.push_back({KeySlot(k), {"SET", k, std::to_string(i)}});
    reads.push_back({KeySlot(k), {"GET", k}});
  }
  REQUIRE(router.Commands(writes).ok());
  const uint64_t moved_before = router.stats().moved;
  cluster.Reshard(from, to, 200);
  auto r = router.Commands(reads);
  REQUIRE(r.ok());
  for (int i = 0; i < 2000; ++i) REQUIRE((*r)[static_cast<size_t>(i)].str == std::to_string(i));
  CHECK(router.stats().moved > moved_before);
  REQUIRE(router.Commands(writes).ok());
}

TEST_CASE(
    "ClusterRouter: ASK during a migration - a key absent on the source is written on "
    "the target with ASKING",
    "[cluster]") {
  LocalRedisCluster& cluster = Cluster();
  ClusterRouter router(cluster.RouterOptions());
  const std::string old_key = "ask:{user-a}:old";
  const std::string new_key = "ask:{user-a}:new";
  const uint16_t slot = KeySlot(old_key);
  REQUIRE(KeySlot(new_key) == slot);
  REQUIRE(router.Command(old_key, {"SET", old_key, "1"}).ok());
  const int from = cluster.MasterForSlot(slot);
  int to = -1;
  for (int m : cluster.Masters()) {
    if (m != from) to = m;
  }
  cluster.BeginMigration(slot, from, to);

  // The old key is still on the source: served there, no redirect.
  auto old_read = router.Command(old_key, {"GET", old_key});
  REQUIRE(old_read.ok());
  CHECK(old_read->str == "1");
  CHECK(router.stats().asked == 0);
  // A new key: the source answers ASK, the router sends ASKING + SET to the target.
  auto write = router.Command(new_key, {"SET", new_key, "2"});
  REQUIRE(write.ok());
  CHECK(write->str == "OK");  // the command's reply, not ASKING's
  CHECK(router.stats().asked == 1);
  CHECK(router.stats().moved == 0);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(from));  // ASK is one-shot
  CHECK(cluster.Command(from, {"EXISTS", new_key}).integer == 0);
  CHECK(cluster.Command(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 1);

  // Move the old key: now both are read through ASK from the target, in one pipeline
  // with a key of another slot.
  REQUIRE(cluster.MoveKeys(slot, 10) == 1);
  const std::string other = KeyInSlot(static_cast<uint16_t>((slot + 8000) % kClusterSlots), ":o");
  REQUIRE(router.Command(other, {"SET", other, "3"}).ok());
  auto reads = router.Commands(
      {{slot, {"GET", old_key}}, {KeySlot(other), {"GET", other}}, {slot, {"GET", new_key}}});
  REQUIRE(reads.ok());
  CHECK((*reads)[0].str == "1");
  CHECK((*reads)[1].str == "3");
  CHECK((*reads)[2].str == "2");
  CHECK(router.stats().asked == 3);

  cluster.FinishMigration(slot);
  auto after = router.Command(new_key, {"GET", new_key});
  REQUIRE(after.ok());
  CHECK(after->str == "2");
  CHECK(router.stats().moved >= 1);
  CHECK(router.slot_map().MasterOf(slot)->port == cluster.port(to));
}

TEST_CASE("ClusterRouter: a plain redis-server is not a cluster - DetectCluster tells them apart",
          "[cluster]") {
  test::RedisServer single;
  RedisOptions options;
  ClusterRouterOptions o;
  o.seeds = {NodeAddress{"127.0.0.1", single.port()}};
  ClusterRouter router(o);
  const Status st = router.Discover();
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(router.not_a_cluster());
  CHECK_THAT(st.message(),
             Catch::Contains(single.address()) && Catch::Contains("cluster support disabled"));

  auto single_kind = DetectCluster(options, o.seeds);
  REQUIRE(single_kind.ok());
  CHECK_FALSE(*single_kind);
  auto cluster_kind = DetectCluster(options, *ParseSeedList(Cluster().seeds()));
  REQUIRE(cluster_kind.ok());
  CHECK(*cluster_kind);
  const NodeAddress dead{"127.0.0.1", test::FreePort()};
  auto nobody = DetectCluster(options, {dead});
  REQUIRE_FALSE(nobody.ok());
  CHECK(nobody.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(nobody.status().message(), Catch::Contains(dead.ToString()));
}

TEST_CASE("ClusterRouter: db != 0 refused - no seed answering fails within the deadline",
          "[cluster]") {
  ClusterRouterOptions o = Cluster().RouterOptions(300);
  o.redis.db = 2;
  ClusterRouter with_db(o);
  const Status st = with_db.Discover();
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("redis.db"));

  ClusterRouterOptions dead;
  dead.seeds = {NodeAddress{"127.0.0.1", test::FreePort()}};
  dead.deadline_ms = 300;
  ClusterRouter router(dead);
  auto r = router.Command("k", {"GET", "k"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(r.status().message(),
             Catch::Contains("1 of 1 commands") && Catch::Contains(dead.seeds[0].ToString()));
}

}  // namespace
}  // namespace ef
