// SlotMap (src/redis/cluster.h) from hand-built CLUSTER SLOTS replies: the
// reply shape of Redis 7.0 ([start, end, [host, port, id, metadata], replicas]),
// of older servers (no metadata, no ID), unknown endpoints, and malformed ones.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "redis/cluster.h"

namespace ef {
namespace {

RedisReply Int(long long v) {
  RedisReply r;
  r.type = RedisReply::Type::kInteger;
  r.integer = v;
  return r;
}
RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}
RedisReply Nil() { return RedisReply{}; }
RedisReply Arr(std::vector<RedisReply> e) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = std::move(e);
  return r;
}
// A 7.0 node entry: host, port, id, metadata (an empty map, as RESP2 array).
RedisReply Node(RedisReply host, int port, const std::string& id) {
  return Arr({std::move(host), Int(port), Str(id), Arr({})});
}
RedisReply Range(int start, int end, std::vector<RedisReply> nodes) {
  std::vector<RedisReply> e = {Int(start), Int(end)};
  for (auto& n : nodes) e.push_back(std::move(n));
  return Arr(std::move(e));
}

TEST_CASE("SlotMap from CLUSTER SLOTS: three masters with replicas, all slots covered",
          "[cluster]") {
  const RedisReply reply = Arr({
      Range(0, 5460, {Node(Str("127.0.0.1"), 7000, "a"), Node(Str("127.0.0.1"), 7004, "d")}),
      Range(5461, 10922, {Node(Str("127.0.0.1"), 7001, "b"), Node(Str("127.0.0.1"), 7005, "e")}),
      Range(10923, 16383, {Node(Str("127.0.0.1"), 7002, "c"), Node(Str("127.0.0.1"), 7003, "f")}),
  });
  auto map = SlotMap::FromClusterSlots(reply, "10.9.9.9");
  REQUIRE(map.ok());
  CHECK(map->AllCovered());
  CHECK(map->CoveredSlots() == 16384);
  REQUIRE(map->shards().size() == 3);
  CHECK(map->shards()[0].master == NodeAddress{"127.0.0.1", 7000});
  CHECK(map->shards()[0].master_id == "a");
  CHECK(map->shards()[0].replicas == std::vector<NodeAddress>{{"127.0.0.1", 7004}});
  CHECK(*map->MasterOf(0) == NodeAddress{"127.0.0.1", 7000});
  CHECK(*map->MasterOf(5460) == NodeAddress{"127.0.0.1", 7000});
  CHECK(*map->MasterOf(5461) == NodeAddress{"127.0.0.1", 7001});
  CHECK(*map->MasterOf(10922) == NodeAddress{"127.0.0.1", 7001});
  CHECK(*map->MasterOf(10923) == NodeAddress{"127.0.0.1", 7002});
  CHECK(*map->MasterOf(16383) == NodeAddress{"127.0.0.1", 7002});
  CHECK(map->ShardOf(12739) == 2);
  CHECK(map->AllNodes().size() == 6);
}

TEST_CASE("SlotMap: a master owning several ranges is one shard - gaps are uncovered",
          "[cluster]") {
  const RedisReply reply = Arr({
      Range(0, 99, {Node(Str("h1"), 1, "a"), Node(Str("h3"), 3, "c")}),
      Range(200, 299, {Node(Str("h2"), 2, "b")}),
      Range(100, 100, {Node(Str("h1"), 1, "a"), Node(Str("h3"), 3, "c")}),
  });
  auto map = SlotMap::FromClusterSlots(reply, "q");
  REQUIRE(map.ok());
  REQUIRE(map->shards().size() == 2);
  CHECK(map->shards()[0].replicas.size() == 1);  // listed twice, kept once
  CHECK(map->CoveredSlots() == 201);
  CHECK_FALSE(map->AllCovered());
  CHECK(map->ShardOf(100) == 0);
  CHECK(map->ShardOf(101) == -1);
  CHECK(map->MasterOf(101) == nullptr);
  CHECK(map->ShardOf(250) == 1);
  CHECK(map->MasterOf(16383) == nullptr);
  // An empty reply (a node not in a cluster yet): nothing covered.
  auto empty = SlotMap::FromClusterSlots(Arr({}), "q");
  REQUIRE(empty.ok());
  CHECK(empty->CoveredSlots() == 0);
  CHECK(empty->shards().empty());
}

TEST_CASE("SlotMap: NULL, empty and '?' endpoints mean the queried host - old reply shape too",
          "[cluster]") {
  const RedisReply reply = Arr({
      Range(0, 8000, {Node(Nil(), 7000, "a"), Node(Str("?"), 7003, "d")}),
      // Redis < 4: [host, port] only.
      Range(8001, 16383, {Arr({Str(""), Int(7001)}), Arr({Str("::1"), Int(7004)})}),
  });
  auto map = SlotMap::FromClusterSlots(reply, "redis.example");
  REQUIRE(map.ok());
  CHECK(map->AllCovered());
  CHECK(*map->MasterOf(0) == NodeAddress{"redis.example", 7000});
  CHECK(map->shards()[0].replicas[0] == NodeAddress{"redis.example", 7003});
  CHECK(*map->MasterOf(8001) == NodeAddress{"redis.example", 7001});
  CHECK(map->shards()[1].master_id.empty());
  CHECK(map->shards()[1].replicas[0] == NodeAddress{"::1", 7004});
}

TEST_CASE("SlotMap: malformed replies fail with the entry named", "[cluster]") {
  struct Bad {
    const char* what;
    RedisReply reply;
    const char* message;
  };
  std::vector<Bad> bad;
  RedisReply err;
  err.type = RedisReply::Type::kError;
  err.str = "ERR This instance has cluster support disabled";
  bad.push_back({"error reply", err, "cluster support disabled"});
  bad.push_back({"not an array", Str("x"), "expected an array"});
  bad.push_back({"entry too short", Arr({Arr({Int(0), Int(1)})}), "entry 0"});
  bad.push_back(
      {"start not an integer", Arr({Arr({Str("0"), Int(1), Node(Str("h"), 1, "a")})}), "entry 0"});
  bad.push_back({"end < start", Arr({Range(5, 4, {Node(Str("h"), 1, "a")})}), "bad slot range"});
  bad.push_back({"slot 16384", Arr({Range(0, 16384, {Node(Str("h"), 1, "a")})}), "bad slot range"});
  bad.push_back({"negative", Arr({Range(-1, 3, {Node(Str("h"), 1, "a")})}), "bad slot range"});
  bad.push_back(
      {"overlap",
       Arr({Range(0, 10, {Node(Str("h"), 1, "a")}), Range(10, 20, {Node(Str("i"), 2, "b")})}),
       "slot 10 listed twice"});
  bad.push_back({"port 0", Arr({Range(0, 1, {Node(Str("h"), 0, "a")})}), "bad node address"});
  bad.push_back(
      {"port too large", Arr({Range(0, 1, {Node(Str("h"), 70000, "a")})}), "bad node address"});
  bad.push_back(
      {"host with a space", Arr({Range(0, 1, {Node(Str("h x"), 1, "a")})}), "bad node address"});
  bad.push_back({"node not an array", Arr({Range(0, 1, {Str("h:1")})}), "entry 0"});
  bad.push_back({"port a string", Arr({Range(0, 1, {Arr({Str("h"), Str("1")})})}), "entry 0"});
  bad.push_back(
      {"bad replica",
       Arr({Range(0, 1, {Node(Str("h"), 1, "a")}), Range(2, 3, {Node(Str("h"), 1, "a"), Int(3)})}),
       "entry 1"});
  for (const Bad& b : bad) {
    INFO(b.what);
    auto map = SlotMap::FromClusterSlots(b.reply, "q");
    REQUIRE_FALSE(map.ok());
    CHECK(map.status().code() == StatusCode::kInternal);
    CHECK_THAT(map.status().message(), Catch::Contains(b.message));
  }
}

TEST_CASE("SlotMap::Assign: a MOVED points one slot at a node, new or known", "[cluster]") {
  const RedisReply reply = Arr({
      Range(0, 8191, {Node(Str("h"), 1, "a")}),
      Range(8192, 16383, {Node(Str("h"), 2, "b")}),
  });
  auto map = SlotMap::FromClusterSlots(reply, "q");
  REQUIRE(map.ok());
  map->Assign(5, NodeAddress{"h", 2});
  CHECK(*map->MasterOf(5) == NodeAddress{"h", 2});
  CHECK(*map->MasterOf(4) == NodeAddress{"h", 1});
  CHECK(map->shards().size() == 2);
  map->Assign(6, NodeAddress{"h", 3});
  CHECK(map->shards().size() == 3);
  CHECK(*map->MasterOf(6) == NodeAddress{"h", 3});
  CHECK(map->AllCovered());
  SlotMap empty;
  CHECK(empty.CoveredSlots() == 0);
  empty.Assign(16383, NodeAddress{"h", 9});
  CHECK(empty.CoveredSlots() == 1);
  CHECK(*empty.MasterOf(16383) == NodeAddress{"h", 9});
}

}  // namespace
}  // namespace ef
