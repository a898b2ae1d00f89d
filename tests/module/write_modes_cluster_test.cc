// redis.write_mode bitop (the plain-Redis hybrid, issue 13) on a real local Redis
// Cluster, through ClusterBitWriter: with a slot half migrated, the MULTI/BITOP
// form of a key still on the source is answered ASK (its temporary key is absent
// there) or TRYAGAIN; the writer then writes that key with BITFIELD on the same
// node, and keys already moved follow the ASK as usual. Afterwards every key holds
// exactly the bits and expiry a single node would hold, and no temporary key is
// left. (Module and auto modes on a cluster whose nodes load the module:
// write_modes_module_cluster_test.cc.)
#include <catch2/catch.hpp>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "bloom/bit_batch.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "redis/cluster.h"
#include "support/items_key.h"
#include "support/redis_cluster.h"
#include "write/bit_writer.h"
#include "write/cluster_writer.h"

namespace ef {
namespace {

using test::LocalRedisCluster;

ClusterRouterOptions RouterOptions(const LocalRedisCluster& cluster) {
  ClusterRouterOptions o;
  auto seeds = ParseSeedList(cluster.seeds());
  REQUIRE(seeds.ok());
  o.seeds = *seeds;
  o.deadline_ms = 10000;
  return o;
}

// Key i gets 40 positions {i, i + 3, ..., i + 117} (dense: the MULTI/BITOP form
// at threshold 24) in a batch whose round r adds 1000 * r to them.
std::vector<uint32_t> Positions(size_t i, uint32_t round) {
  std::vector<uint32_t> p;
  for (uint32_t j = 0; j < 40; ++j) p.push_back(1000 * round + static_cast<uint32_t>(i) + 3 * j);
  return p;
}

BitBatch MakeBatch(const std::vector<std::string>& keys, size_t first, uint32_t round,
                   int64_t expire_at) {
  BitBatch b;
  for (size_t i = first; i < keys.size(); ++i) {
    KeyBits kb;
    kb.key = keys[i];
    kb.expire_at = expire_at;
    kb.positions = Positions(i, round);
    b.keys.push_back(kb);
  }
  b.size = b.keys.size();
  return b;
}

void SetBits(const std::vector<uint32_t>& positions, std::string* v) {
  for (uint32_t p : positions) {
    if (v->size() <= p / 8) v->resize(p / 8 + 1, '\0');
    (*v)[p / 8] = static_cast<char>(static_cast<unsigned char>((*v)[p / 8]) | (0x80u >> (p % 8)));
  }
}

}  // namespace

TEST_CASE("write mode bitop on a cluster: a slot half migrated - every key written once, right",
          "[module][write_mode][cluster]") {
  LocalRedisCluster cluster;
  FilterConfig f;
  f.stages = 1;
  f.layout_version = 2;  // version 1: hand-made batches of rule-2 positions
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  BitWriterOptions wo;
  wo.layout = *layout;
  wo.mode = WriteMode::kBitop;
  ClusterBitWriter writer(wo, RouterOptions(cluster));

  std::vector<std::string> keys;
  for (int d = 1; d <= 40; ++d) keys.push_back("ef:{mover}:" + std::to_string(20260000 + d));
  for (int u = 0; u < 60; ++u) keys.push_back("ef:{u" + std::to_string(u) + "}:20261101");
  const int64_t expire_at = 4102444800;  // 2100-01-01
  WriteStats stats;
  // Round 0: the first 20 keys of the mover, and every other user.
  BitBatch first = MakeBatch(keys, 0, 0, expire_at);
  first.keys.erase(first.keys.begin() + 20, first.keys.begin() + 40);
  first.size = first.keys.size();
  REQUIRE(writer.Write(first, &stats).ok());

  const uint16_t slot = KeySlot(keys.front());
  const int from = cluster.MasterForSlot(slot);
  int to = -1;
  for (int m : cluster.Masters())
    if (m != from) to = m;
  cluster.BeginMigration(slot, from, to);
  REQUIRE(cluster.MoveKeys(slot, 10) == 10);  // 10 of the 20 on the target now

  // Round 1: every key.
  REQUIRE(writer.Write(MakeBatch(keys, 0, 1, expire_at), &stats).ok());
  CHECK(stats.keys == keys.size());
  CHECK(cluster.Command(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 10);
  CHECK(cluster.Command(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 30);

  cluster.FinishMigration(slot);
  ClusterRouter router(RouterOptions(cluster));
  REQUIRE(router.Discover().ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("key " << keys[i]);
    std::string expected;
    if (i < 20 || i >= 40) SetBits(Positions(i, 0), &expected);
    SetBits(Positions(i, 1), &expected);
    auto v = router.Command(keys[i], {"GET", keys[i]});
    REQUIRE(v.ok());
    CHECK(v->str == expected);
    auto ttl = router.Command(keys[i], {"EXPIRETIME", keys[i]});
    REQUIRE(ttl.ok());
    CHECK(ttl->integer == expire_at);
  }
  // Only the keys and the meta: no temporary key left anywhere.
  int64_t total = 0;
  for (int m : cluster.Masters()) total += cluster.Command(m, {"DBSIZE"}).integer;
  CHECK(total == static_cast<int64_t>(keys.size()) + 1);
  for (int m : cluster.Masters())
    CHECK(cluster.Command(m, {"INFO", "commandstats"}).str.find("cmdstat_bitop:") !=
          std::string::npos);
}

// The v4 test's body on `cluster`, written in `mode`.
static void CheckV4OnCluster(const LocalRedisCluster& cluster, WriteMode mode) {
  FilterConfig f;
  f.layout_version = 4;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  BitWriterOptions wo;
  wo.layout = *l;
  wo.mode = mode;
  ClusterBitWriter writer(wo, RouterOptions(cluster));
  const int64_t day = 86400;
  const int64_t today = BucketStart(static_cast<int64_t>(std::time(nullptr)), day);
  auto batch = [&](int64_t bucket, int (*count)(int)) {
    BitBatch b;
    for (int u = 0; u < 40; ++u) {
      const std::string user = "c" + std::to_string(u);
      b.keys.push_back(test::KeyOfItems(*l, MakeKey(l->prefix, user, bucket, day),
                                        test::Items(user + "-" + std::to_string(bucket), count(u)),
                                        ExpireAt(bucket, day, l->window_seconds)));
    }
    b.size = b.keys.size();
    return b;
  };
  WriteStats stats;
  REQUIRE(writer.Write(batch(today - day, [](int u) { return 5 + 40 * u; }), &stats).ok());
  REQUIRE(writer.Write(batch(today, [](int) { return 20; }), &stats).ok());
  CHECK(stats.keys == 40);

  ClusterRouter router(RouterOptions(cluster));
  REQUIRE(router.Discover().ok());
  for (int u = 0; u < 40; ++u) {
    const std::string user = "c" + std::to_string(u);
    INFO("user " << user);
    const std::string past_key = MakeKey(l->prefix, user, today - day, day);
    const std::string key = MakeKey(l->prefix, user, today, day);
    auto past = router.Command(past_key, {"GET", past_key});
    auto now = router.Command(key, {"GET", key});
    REQUIRE(past.ok());
    REQUIRE(now.ok());
    const std::string before_key = MakeKey(l->prefix, user, today - 2 * day, day);
    auto before = router.Command(before_key, {"GET", before_key});
    REQUIRE(before.ok());
    REQUIRE(!now->str.empty());
    CHECK(static_cast<uint32_t>(static_cast<uint8_t>(now->str[0])) ==
          ChooseClassFrom(*l, today, past->str, before->str) + 1);
    REQUIRE(l->TableFor(now->str, today) != nullptr);
    for (const Hash128& h :
         test::KeyOfItems(*l, "", test::Items(user + "-" + std::to_string(today), 20),
                          ExpireAt(today, day, l->window_seconds))
             .items)
      CHECK(ValueContains(now->str, *l->TableFor(now->str, today), l->RuleFor(today), h));
  }
  // The keys are spread over the masters, and each master ran the creation step:
  // the script (EVALSHA), or EF.CLASSKEY.
  const bool module = mode == WriteMode::kModule;
  for (int m : cluster.Masters()) {
    const std::string stats = cluster.Command(m, {"INFO", "commandstats"}).str;
    CHECK(stats.find(module ? "cmdstat_ef.classkey:" : "cmdstat_evalsha:") != std::string::npos);
    if (!module) CHECK(stats.find("cmdstat_ef.classkey:") == std::string::npos);
  }
}

// Layout v4 (issue 53) through ClusterBitWriter: the creation step runs on each
// key's master (the key and its previous buckets share a hash tag, so a slot):
// the script in bitfield mode, EF.CLASSKEY in module mode on a cluster whose
// nodes load the module; every user's key of today gets the class the rule
// chooses from its key of yesterday, on every master.
TEST_CASE("layout v4 on a cluster: keys on every master get the class rule's choice",
          "[module][write_mode][cluster][v4]") {
  for (const WriteMode mode : {WriteMode::kBitfield, WriteMode::kModule}) {
    INFO("write mode " << (mode == WriteMode::kModule ? "module" : "bitfield"));
    LocalRedisCluster::Options co;
    if (mode == WriteMode::kModule) co.extra_args = {"--loadmodule", EF_REDIS_MODULE_PATH};
    LocalRedisCluster cluster(co);
    CheckV4OnCluster(cluster, mode);
  }
}

}  // namespace ef
