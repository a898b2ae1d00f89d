// redis.write_mode module and auto (issue 13) on a real local Redis Cluster
// (3 masters + 3 replicas, support/redis_cluster.h) whose nodes load the module
// built by this build, written through ClusterBitWriter: the same batches leave
// the same values and expiries as BITFIELD into a plain redis-server; with a slot
// half migrated EF.SETBITS follows ASK and writes every key once; with
// redis.wait_replicas 1 every replica holds its master's bits when the write
// returns; on a cluster where one replica lacks the module, auto writes that
// replica's master with the plain-Redis hybrid (each master is probed with its
// replicas: the others keep the module) and module mode refuses to write there;
// the daemon with write_mode auto writes with the module and loses nothing.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "module/module_support.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "redis/module_probe.h"
#include "redis/options.h"
#include "support/cluster_missing.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/stack.h"
#include "write/bit_writer.h"
#include "write/cluster_writer.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

// 3 masters + 3 replicas, every node but those in `without` with the module.
LocalRedisCluster::Options ModuleCluster(std::set<int> without = {}) {
  LocalRedisCluster::Options o;
  o.extra_args = {"--loadmodule", ModulePath()};
  o.without_extra_args = std::move(without);
  return o;
}

// Calls of `command` (lower case) in a node's INFO commandstats; 0 if never.
int64_t Calls(const LocalRedisCluster& cluster, int node, const std::string& command) {
  const std::string stats = cluster.Command(node, {"INFO", "commandstats"}).str;
  const std::string tag = "cmdstat_" + command + ":calls=";
  const size_t at = stats.find(tag);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + tag.size()));
}

Layout V2Layout(const std::string& prefix) {
  FilterConfig f;
  f.items_per_bucket = 10;
  f.key_prefix = prefix;
  f.layout_version = 2;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 2);
  return *l;
}

// A key's value (hex; "<type>" if not a string) and EXPIRETIME, read with `read`
// (one command, its reply).
template <typename Read>
std::pair<std::string, int64_t> ValueOf(const std::string& key, Read read) {
  const std::string type = read({"TYPE", key}).str;
  const std::string value = type == "string" ? Hex(read({"GET", key}).str) : "<" + type + ">";
  return {value, read({"EXPIRETIME", key}).integer};
}

std::set<std::string> KeysOf(const std::vector<BitBatch>& batches) {
  std::set<std::string> keys;
  for (const BitBatch& b : batches)
    for (size_t i = 0; i < b.size; ++i) keys.insert(b.keys[i].key);
  return keys;
}

// Every key of `master` has the same value and EXPIRETIME on `replica` (read
// with READONLY), and the replica has no other key.
void CheckReplicaHoldsMaster(const LocalRedisCluster& cluster, int master, int replica) {
  INFO("master " << cluster.address(master) << ", replica " << cluster.address(replica));
  RedisOptions o;
  o.port = cluster.port(replica);
  auto conn = RedisConnection::Connect(o);
  REQUIRE(conn.ok());
  REQUIRE(Cmd(**conn, {"READONLY"}).str == "OK");
  const RedisReply keys = cluster.Command(master, {"KEYS", "*"});
  CHECK(keys.elements.size() > 0);
  CHECK(Cmd(**conn, {"DBSIZE"}).integer == static_cast<int64_t>(keys.elements.size()));
  for (const RedisReply& k : keys.elements) {
    INFO("key " << k.str);
    const auto on_master = ValueOf(
        k.str, [&](const std::vector<std::string>& a) { return cluster.Command(master, a); });
    const auto on_replica =
        ValueOf(k.str, [&](const std::vector<std::string>& a) { return Cmd(**conn, a); });
    CHECK(on_replica == on_master);
  }
}

// Options as the daemon builds them from redis.* (write_mode, wait_replicas).
BitWriterOptions FromConfig(const LocalRedisCluster& cluster, const std::string& write_mode,
                            int wait_replicas, const Layout& layout) {
  RedisConfig rc;
  rc.address = cluster.seeds();
  rc.cluster = "true";
  rc.write_mode = write_mode;
  rc.wait_replicas = wait_replicas;
  auto redis = RedisOptionsFromConfig(rc);
  REQUIRE(redis.ok());
  return BitWriterOptionsFromConfig(rc, *redis, layout);
}

// The masters serving the keys' slots.
std::set<int> MastersOf(const LocalRedisCluster& cluster, const std::set<std::string>& keys) {
  std::set<int> out;
  for (const std::string& k : keys) out.insert(cluster.MasterForSlot(KeySlot(k)));
  return out;
}

// Writes every batch; the test fails at the first that fails.
void WriteAll(ClusterBitWriter& writer, const std::vector<BitBatch>& batches) {
  for (const BitBatch& batch : batches) {
    Status st = writer.Write(batch, nullptr);
    INFO(st.message());
    REQUIRE(st.ok());
  }
}

}  // namespace

TEST_CASE("module cluster: module mode leaves the same values and expiries as bitfield",
          "[module][write_mode][cluster]") {
  LocalRedisCluster cluster(ModuleCluster());
  RedisServer plain;
  const Layout layout = V2Layout("mc:");
  const std::vector<BitBatch> batches = Batches(layout, 11, 24);
  const std::set<std::string> keys = KeysOf(batches);
  REQUIRE(MastersOf(cluster, keys).size() == 3);  // every master writes some

  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  auto on_cluster = [&router](const std::vector<std::string>& a) {
    auto r = router.Command(a.at(1), a);
    INFO(a[0] << ": " << (r.ok() ? "" : r.status().message()));
    REQUIRE(r.ok());
    return *r;
  };
  auto conn = plain.Connect();
  auto on_plain = [&conn](const std::vector<std::string>& a) { return Cmd(*conn, a); };
  // Keys that exist before: with the batches' expiry, without a TTL, a list.
  for (auto run : {std::function<RedisReply(const std::vector<std::string>&)>(on_cluster),
                   std::function<RedisReply(const std::vector<std::string>&)>(on_plain)}) {
    run({"SET", "mc:{u2}:20400", std::string("\x01\x80\xff", 3)});
    run({"EXPIREAT", "mc:{u2}:20400", std::to_string(kExpireAt)});
    run({"SET", "mc:{u3}:20400", std::string("\x10\x00\x00\x00\x02", 5)});
    run({"LPUSH", "mc:{u8}:20400", "a-list"});
  }

  BitWriterOptions mo;
  mo.mode = WriteMode::kModule;
  mo.layout = layout;
  ClusterBitWriter module_writer(mo, cluster.RouterOptions());
  BitWriterOptions bo;
  bo.redis.port = plain.port();
  bo.mode = WriteMode::kBitfield;
  bo.layout = layout;
  RedisBitWriter bitfield_writer(bo);
  uint64_t advances = 0;
  for (const BitBatch& batch : batches) {
    WriteStats stats;
    Status st = module_writer.Write(batch, &stats);
    INFO(st.message());
    REQUIRE(st.ok());
    advances += stats.stages.advances;
    st = bitfield_writer.Write(batch, nullptr);
    REQUIRE(st.ok());
  }
  CHECK(advances > 0);  // heavy users reached later stages
  for (int m : cluster.Masters()) {
    INFO("master " << cluster.address(m));
    CHECK(Calls(cluster, m, "ef.setbits") > 0);
    CHECK(Calls(cluster, m, "bitfield") == 0);
  }
  for (const std::string& key : keys) {
    INFO("key " << key);
    const auto module_value = ValueOf(key, on_cluster);
    const auto bitfield_value = ValueOf(key, on_plain);
    CHECK(module_value.first == bitfield_value.first);
    // A key of another type is refused by both; only EXPIREAT (bitfield) sets its TTL.
    if (module_value.first.front() != '<') {
      CHECK(module_value.second == kExpireAt);
      CHECK(bitfield_value.second == kExpireAt);
    }
  }
}

TEST_CASE("module cluster: a slot half migrated - EF.SETBITS follows ASK and writes every key once",
          "[module][write_mode][cluster]") {
  LocalRedisCluster cluster(ModuleCluster());
  FilterConfig f;
  f.stages = 1;
  f.layout_version = 2;  // version 1: hand-made batches of rule-2 positions
  f.key_prefix = "mm:";
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  BitWriterOptions wo;
  wo.layout = *layout;
  wo.mode = WriteMode::kModule;
  ClusterBitWriter writer(wo, cluster.RouterOptions());

  // 40 keys of one user (one slot: the one that moves), 60 other users.
  std::vector<std::string> keys;
  for (int d = 1; d <= 40; ++d) keys.push_back("mm:{mover}:" + std::to_string(20260000 + d));
  for (int u = 0; u < 60; ++u) keys.push_back("mm:{u" + std::to_string(u) + "}:20261101");
  auto positions = [](size_t i, uint32_t round) {
    std::vector<uint32_t> p;
    for (uint32_t j = 0; j < 30; ++j) p.push_back(1000 * round + static_cast<uint32_t>(i) + 3 * j);
    return p;
  };
  auto batch_of = [&](const std::vector<size_t>& which, uint32_t round) {
    BitBatch b;
    for (size_t i : which) b.keys.push_back({keys[i], kExpireAt, positions(i, round), {}});
    b.size = b.keys.size();
    return b;
  };
  std::vector<size_t> round0, every;
  for (size_t i = 0; i < keys.size(); ++i) {
    every.push_back(i);
    if (i < 20 || i >= 40) round0.push_back(i);
  }
  WriteStats stats;
  REQUIRE(writer.Write(batch_of(round0, 0), &stats).ok());

  const uint16_t slot = KeySlot(keys.front());
  const int from = cluster.MasterForSlot(slot);
  int to = -1;
  for (int m : cluster.Masters())
    if (m != from) to = m;
  const int64_t asking_before = Calls(cluster, to, "asking");
  cluster.BeginMigration(slot, from, to);
  REQUIRE(cluster.MoveKeys(slot, 10) == 10);  // 10 of the 20 on the target now

  // Round 1: every key; the 10 moved and the 20 new ones are answered ASK.
  Status st = writer.Write(batch_of(every, 1), &stats);
  INFO(st.message());
  REQUIRE(st.ok());
  CHECK(stats.keys == keys.size());
  CHECK(cluster.Command(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 10);
  CHECK(cluster.Command(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 30);
  CHECK(Calls(cluster, to, "asking") - asking_before >= 30);
  // Every key written exactly once per round: redirected commands are not calls.
  int64_t setbits = 0;
  for (int m : cluster.Masters()) setbits += Calls(cluster, m, "ef.setbits");
  CHECK(setbits == static_cast<int64_t>(round0.size() + every.size()));

  cluster.FinishMigration(slot);
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("key " << keys[i]);
    std::string expected;
    for (uint32_t round : {0u, 1u}) {
      if (round == 0 && i >= 20 && i < 40) continue;
      for (uint32_t p : positions(i, round)) {
        if (expected.size() <= p / 8) expected.resize(p / 8 + 1, '\0');
        expected[p / 8] =
            static_cast<char>(static_cast<unsigned char>(expected[p / 8]) | (0x80u >> (p % 8)));
      }
    }
    auto v = router.Command(keys[i], {"GET", keys[i]});
    REQUIRE(v.ok());
    CHECK(Hex(v->str) == Hex(expected));
    auto ttl = router.Command(keys[i], {"EXPIRETIME", keys[i]});
    REQUIRE(ttl.ok());
    CHECK(ttl->integer == kExpireAt);
  }
}

TEST_CASE("module cluster: with redis.wait_replicas 1 every replica holds its master's bits",
          "[module][write_mode][cluster]") {
  LocalRedisCluster cluster(ModuleCluster());
  const Layout layout = V2Layout("mr:");
  const std::vector<BitBatch> batches = Batches(layout, 13, 24);
  REQUIRE(MastersOf(cluster, KeysOf(batches)).size() == 3);
  ClusterBitWriter writer(FromConfig(cluster, "module", 1, layout), cluster.RouterOptions());
  WriteAll(writer, batches);
  // No wait here: WAIT 1 returned before each Write did.
  for (int m : cluster.Masters()) {
    INFO("master " << cluster.address(m));
    CHECK(Calls(cluster, m, "ef.setbits") > 0);
    CHECK(Calls(cluster, m, "wait") > 0);  // redis.wait_replicas reached the writer
    const int r = cluster.ReplicaOf(m);
    REQUIRE(r >= 0);
    CheckReplicaHoldsMaster(cluster, m, r);
  }
  // A node started again keeps its command line: the module is loaded again.
  const int replica = cluster.ReplicaOf(cluster.Masters().front());
  cluster.Kill(replica);
  cluster.Start(replica);
  CHECK(cluster.Command(replica, {"EF.VERSION"}).integer >= kMinEfModuleVersion);
}

TEST_CASE("module cluster: a replica without the module - auto falls back there and module refuses",
          "[module][write_mode][cluster]") {
  // Node 5 is a replica (nodes 0-2 start as the masters) and has no module.
  const int bare = 5;
  LocalRedisCluster cluster(ModuleCluster({bare}));
  const std::vector<LocalRedisCluster::Node> nodes = cluster.Nodes();
  REQUIRE_FALSE(nodes[bare].master);
  const int lacking = nodes[bare].master_index;  // its master
  REQUIRE(lacking >= 0);
  CHECK(cluster.Command(bare, {"EF.VERSION"}).type == RedisReply::Type::kError);
  const Layout layout = V2Layout("ma:");
  const std::vector<BitBatch> batches = Batches(layout, 17, 24);
  const std::set<std::string> keys = KeysOf(batches);
  REQUIRE(MastersOf(cluster, keys).size() == 3);

  SECTION("module mode refuses to write where the replica lacks the module") {
    ClusterBitWriter writer(FromConfig(cluster, "module", 0, layout), cluster.RouterOptions());
    Status st = writer.Write(batches.front(), nullptr);
    INFO(st.message());
    CHECK(st.code() == StatusCode::kUnavailable);
    CHECK(st.message().find("redis.write_mode is module") != std::string::npos);
    CHECK(st.message().find(cluster.address(bare)) != std::string::npos);
    // Nothing of the batch on that master (the others wrote their part: the
    // batch is retried as a whole, which is idempotent).
    for (const std::string& key : keys) {
      if (cluster.MasterForSlot(KeySlot(key)) != lacking) continue;
      INFO("key " << key);
      CHECK(cluster.Command(lacking, {"EXISTS", key}).integer == 0);
    }
    CHECK(Calls(cluster, lacking, "ef.setbits") == 0);
  }
  SECTION("auto writes that master with the hybrid, the others with the module") {
    ClusterBitWriter writer(FromConfig(cluster, "auto", 1, layout), cluster.RouterOptions());
    WriteAll(writer, batches);
    for (int m : cluster.Masters()) {
      INFO("master " << cluster.address(m));
      if (m == lacking) {
        CHECK(Calls(cluster, m, "ef.setbits") == 0);
        CHECK(Calls(cluster, m, "bitfield") + Calls(cluster, m, "bitop") > 0);
      } else {
        CHECK(Calls(cluster, m, "ef.setbits") > 0);
        CHECK(Calls(cluster, m, "bitfield") == 0);
      }
      CheckReplicaHoldsMaster(cluster, m, cluster.ReplicaOf(m));
    }
    // The same values and expiries as bitfield into a plain redis-server.
    RedisServer plain;
    BitWriterOptions bo;
    bo.redis.port = plain.port();
    bo.mode = WriteMode::kBitfield;
    bo.layout = layout;
    RedisBitWriter bitfield_writer(bo);
    for (const BitBatch& batch : batches) REQUIRE(bitfield_writer.Write(batch, nullptr).ok());
    auto conn = plain.Connect();
    ClusterRouter router(cluster.RouterOptions());
    REQUIRE(router.Discover().ok());
    for (const std::string& key : keys) {
      INFO("key " << key);
      const auto on_cluster = ValueOf(key, [&router](const std::vector<std::string>& a) {
        auto r = router.Command(a.at(1), a);
        REQUIRE(r.ok());
        return *r;
      });
      const auto on_plain =
          ValueOf(key, [&conn](const std::vector<std::string>& a) { return Cmd(*conn, a); });
      CHECK(on_cluster == on_plain);
      CHECK(on_cluster.second == kExpireAt);
    }
  }
}

TEST_CASE(
    "module cluster: the daemon with write_mode auto writes with the module and loses nothing",
    "[module][write_mode][cluster][daemon]") {
  LocalRedisCluster cluster(ModuleCluster());
  Stack stack(2);
  const std::string config = stack.WriteConfig(
      "ef.yaml", "redis:\n  address: \"" + cluster.seeds() +
                     "\"\n  cluster: true\n  write_mode: auto\n  wait_replicas: 1\n");
  auto daemon = stack.StartDaemon(config);
  const auto events = MakeEvents("mcd", 300, 4, 3, SystemClock().NowMs(), 21);
  stack.Produce(events);
  const bool committed = stack.AwaitCommitted(*daemon, 60s);
  const std::string log = daemon->Output();
  INFO("daemon: " << log);
  REQUIRE(committed);
  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const auto missing = ClusterMissing(cluster, *layout, events);
  CHECK(missing.empty());
  for (int m : cluster.Masters()) {
    INFO("master " << cluster.address(m));
    CHECK(log.find("redis " + cluster.address(m) + ": write_mode auto: writing with EF.SETBITS") !=
          std::string::npos);
    CHECK(Calls(cluster, m, "ef.setbits") > 0);
    CHECK(Calls(cluster, m, "bitfield") == 0);
    CHECK(Calls(cluster, m, "wait") > 0);
  }
}

}  // namespace ef::test
