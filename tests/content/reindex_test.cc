// `exposure-filter content reindex` (docs/CONTENT.md "Upgrading the index"):
// an index written by layout revision 1 (bucket hashes <p>cb{...}) is found by
// probes again once the command has filed the map in revision 2's tables, and
// revision 1's hashes are deleted; the same on a local Redis Cluster for tables
// that went missing. Real redis-server, the binary under test.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "content/block_index.h"
#include "contentdb/index.h"
#include "contentdb/map.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"

namespace ef::test {
namespace {

using contentdb::ContentIndex;

SplitRunResult Reindex(const TempDir& dir, const std::string& yaml,
                       std::vector<std::string> extra = {}) {
  dir.Write("ef.yaml", yaml);
  std::vector<std::string> argv = {EF_BINARY, "content", "reindex", "-c", dir.File("ef.yaml")};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunCommandWithEnv(argv, {});
}

int64_t CountKeys(RedisServer& redis, const std::string& pattern) {
  return static_cast<int64_t>(redis.Command({"KEYS", pattern}).elements.size());
}

// Whether `item` (fingerprint fp) has its entry in every table of the default
// layout, in the current generation.
bool Filed(RedisServer& redis, const std::string& item, uint64_t fp) {
  auto scheme = content::BlockScheme::Make(5, 3);
  REQUIRE(scheme.ok());
  const int64_t retention = int64_t{60} * 86400 * 1000;
  contentdb::GroupLayout layout("ef:", *scheme, 14, retention);
  const int64_t gen = layout.Generation(SystemClock().NowMs());
  for (int t = 0; t < scheme->tables(); ++t) {
    contentdb::GroupPlace place = layout.Place(t, fp, gen);
    RedisReply r = redis.Command({"ZSCORE", place.key, contentdb::GroupLayout::Member(fp, item)});
    if (r.type != RedisReply::Type::kString || r.str != place.score) return false;
  }
  return true;
}

TEST_CASE(
    "content reindex: an index written by layout revision 1 is found again, its bucket hashes "
    "deleted (issue 52)",
    "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  const uint64_t fp = 0x0123456789abcdefULL;
  // Revision 1's data: map entries and bucket hashes (one per table: a hash
  // field per item, the fingerprint's 8 bytes as value).
  std::string fp_bytes;
  contentdb::PutBigEndian(fp, &fp_bytes);
  redis.Command({"SET", "ef:cm{a}", contentdb::EncodeMapValue(7, fp, "a"), "PX", "3600000"});
  redis.Command({"SET", "ef:cm{far}", contentdb::EncodeMapValue(8, ~fp, "far"), "PX", "3600000"});
  redis.Command({"SET", "ef:cm{bad}", "short"});
  for (int t = 0; t < 10; ++t)
    redis.Command({"HSET", "ef:cb{" + std::to_string(t) + ":0123}", "a", fp_bytes});
  redis.Command({"SET", "ef:cb{not-a-hash}", "kept"});
  redis.Command({"SET", "ef:cseq", "8", "PX", "3600000"});
  REQUIRE(CountKeys(redis, "ef:cg{*") == 0);
  auto conn = redis.Connect();
  auto index = ContentIndex::Make({}, contentdb::SingleNodeRunner(*conn));
  REQUIRE(index.ok());
  auto unindexed = (*index)->Unindexed();
  REQUIRE(unindexed.ok());
  CHECK(*unindexed);  // a sequence key without ef:cindex: revision 1

  TempDir dir;
  const std::string yaml = "redis:\n  address: " + redis.address() + "\n";
  auto run = Reindex(dir, yaml);
  INFO("stdout: " << run.out << "\nstderr: " << run.err);
  REQUIRE(run.code == 0);
  CHECK(run.out.find("content reindex: 2 map entries filed in generation") != std::string::npos);
  CHECK(run.out.find("1 bad map values skipped, 10 revision 1 bucket hashes deleted") !=
        std::string::npos);
  CHECK(CountKeys(redis, "ef:cb{*") == 1);  // the string: not the index's
  CHECK(redis.Command({"GET", "ef:cb{not-a-hash}"}).str == "kept");
  CHECK(Filed(redis, "a", fp));
  CHECK(Filed(redis, "far", ~fp));

  unindexed = (*index)->Unindexed();
  REQUIRE(unindexed.ok());
  CHECK_FALSE(*unindexed);
  CHECK(redis.Command({"GET", "ef:cindex"}).str == "2");
  // A new item 1 bit from `a` joins it: the probe finds a's entries.
  auto r = (*index)->Assign({{"b", fp ^ 1}});
  REQUIRE(r.ok());
  CHECK((*r)[0].cluster == "a");
  CHECK((*r)[0].distance == 1);

  // Again: idempotent; --keep-old keeps (and counts nothing of) revision 1.
  auto again = Reindex(dir, yaml, {"--keep-old"});
  INFO("again: " << again.out << again.err);
  REQUIRE(again.code == 0);
  CHECK(again.out.find("3 map entries filed") != std::string::npos);
  CHECK(again.out.find("revision 1 bucket hashes kept (--keep-old)") != std::string::npos);
  CHECK(Filed(redis, "b", fp ^ 1));

  // Unreachable Redis: one line, exit 6.
  redis.Stop();
  auto down = Reindex(dir, yaml);
  CHECK(down.code == 6);
  CHECK(down.err.find(redis.address()) != std::string::npos);
}

TEST_CASE(
    "content: a new index is marked revision 2, and one written by revision 1 and not reindexed "
    "is warned about at start",
    "[content][redis]") {
  Stack stack(1, "items");
  auto conn = stack.redis().Connect();
  auto index = ContentIndex::Make({}, contentdb::SingleNodeRunner(*conn));
  REQUIRE(index.ok());
  REQUIRE((*index)->Assign({{"a", 1}}).ok());
  CHECK(stack.redis().Command({"GET", "ef:cindex"}).str == "2");
  auto unindexed = (*index)->Unindexed();
  REQUIRE(unindexed.ok());
  CHECK_FALSE(*unindexed);
  const std::string config = stack.WriteConfig("ef.yaml", "content:\n  topic: items\n");
  stack.ProduceRaw({R"({"item_id": "b", "text": "Some text."})"});
  const auto content = [&config] {
    return RunCommandWithEnv({EF_BINARY, "content", "-c", config, "--exit-at-end", "--set",
                              "content.group_id=g" + std::to_string(SystemClock().NowMs())},
                             {});
  };
  auto fresh = content();
  INFO(fresh.err);
  REQUIRE(fresh.code == 0);
  CHECK(fresh.err.find("content reindex") == std::string::npos);
  // As left by an earlier version: the sequence key, no ef:cindex.
  stack.redis().Command({"DEL", "ef:cindex"});
  auto old = content();
  INFO(old.err);
  REQUIRE(old.code == 0);
  CHECK(old.err.find("the index was written by layout revision 1") != std::string::npos);
  CHECK(old.err.find("exposure-filter content reindex") != std::string::npos);
}

TEST_CASE("content reindex on a local Redis Cluster files the map of every master",
          "[content][cluster]") {
  LocalRedisCluster cluster;
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  auto index = ContentIndex::Make({}, contentdb::ClusterRunner(router));
  REQUIRE(index.ok());
  std::mt19937_64 rng(5);
  std::vector<contentdb::ContentItem> items;
  for (int i = 0; i < 300; ++i) items.push_back({"item-" + std::to_string(i), rng()});
  REQUIRE((*index)->Assign(items).ok());
  // The tables are lost (as after a change of content.index_group_bits).
  for (int m : cluster.Masters()) {
    for (const auto& key : cluster.Command(m, {"KEYS", "ef:cg{*"}).elements)
      cluster.Command(m, {"DEL", key.str});
  }
  TempDir dir;
  auto run = Reindex(
      dir, "redis:\n  address: " + cluster.address(cluster.Masters()[0]) + "\n  cluster: true\n");
  INFO("stdout: " << run.out << "\nstderr: " << run.err);
  REQUIRE(run.code == 0);
  CHECK(run.out.find("300 map entries filed") != std::string::npos);
  // Every item's near copy finds it.
  std::vector<contentdb::ContentItem> near;
  for (const auto& it : items) near.push_back({"near-" + it.item_id, it.simhash ^ 2});
  auto r = (*index)->Assign(near);
  REQUIRE(r.ok());
  for (size_t i = 0; i < items.size(); ++i) {
    INFO(near[i].item_id);
    CHECK((*r)[i].cluster == items[i].item_id);
  }
}

}  // namespace
}  // namespace ef::test
