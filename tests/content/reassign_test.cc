// docs/CONTENT.md "3. Index", "Sequence numbers" and "An item sent again", on a
// real redis-server (src/contentdb/index.h): only new items use a sequence
// number, and an item already in the map keeps its cluster and its stored
// fingerprint when it is sent again with another content, which is ignored (not
// compared, not filed in the buckets) until its entry expires.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contentdb/index.h"
#include "contentdb/map.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

using contentdb::ContentIndex;

constexpr int64_t kRetentionMs = int64_t{3600} * 1000;

std::unique_ptr<ContentIndex> MakeIndex(RedisConnection& conn) {
  contentdb::ContentIndexOptions o;
  o.key_prefix = "t:";
  o.max_distance = 3;
  o.index_blocks = 5;
  o.retention_ms = kRetentionMs;
  auto index = ContentIndex::Make(o, contentdb::SingleNodeRunner(conn));
  REQUIRE(index.ok());
  return std::move(*index);
}

// The map entry of `item` as stored.
std::optional<contentdb::MapValue> Entry(const RedisServer& redis, const std::string& item) {
  const RedisReply r = redis.Command({"GET", contentdb::MapKey("t:", item)});
  if (r.type != RedisReply::Type::kString) return std::nullopt;
  return contentdb::DecodeMapValue(r.str);
}

// The fingerprints filed for `item` in the buckets (one per table it is in).
std::vector<uint64_t> Filed(const RedisServer& redis, const std::string& item) {
  std::vector<uint64_t> out;
  const RedisReply keys = redis.Command({"KEYS", "t:cg*"});
  for (const RedisReply& key : keys.elements) {
    // Members: 8 bytes of fingerprint, then the item ID.
    for (const RedisReply& m : redis.Command({"ZRANGE", key.str, "0", "-1"}).elements) {
      if (m.str.size() > 8 && m.str.substr(8) == item)
        out.push_back(contentdb::GetBigEndian(m.str));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("content index: only new items use a sequence number", "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  const uint64_t fa = 0x0123456789ABCDEFULL, fb = ~fa, fc = 0xF0F0F0F00F0F0F0FULL, fd = ~fc;
  REQUIRE(index->Assign({{"a", fa}, {"b", fb}}).ok());
  REQUIRE(Entry(redis, "a")->seq == 1);
  REQUIRE(Entry(redis, "b")->seq == 2);
  // The batch reserves one number per position (3 .. 6): a is known and the
  // second c repeats the first, so 3 and 5 go unused.
  auto r = index->Assign({{"a", fa}, {"c", fc}, {"c", fc}, {"d", fd}});
  REQUIRE(r.ok());
  CHECK((*r)[0].known);
  CHECK_FALSE((*r)[1].known);
  CHECK((*r)[2].known);
  CHECK_FALSE((*r)[3].known);
  CHECK(Entry(redis, "a")->seq == 1);  // kept: a known item does not take a number
  CHECK(Entry(redis, "c")->seq == 4);
  CHECK(Entry(redis, "d")->seq == 6);
  CHECK(redis.Command({"GET", contentdb::SequenceKey("t:")}).str == "6");
}

TEST_CASE(
    "content index: an item sent again with another content keeps its cluster and "
    "fingerprint until its entry expires",
    "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  const uint64_t fa = 0x0123456789ABCDEFULL;
  const uint64_t fb = ~fa;  // another text: 64 bits away
  REQUIRE(index->Assign({{"x", fa}}).ok());
  // Shorten the entry's TTL, to see the renewal.
  const std::string key = contentdb::MapKey("t:", "x");
  redis.Command({"PEXPIRE", key, "100000"});

  auto again = index->Assign({{"x", fb}});
  REQUIRE(again.ok());
  CHECK((*again)[0].known);
  CHECK((*again)[0].cluster == "x");
  // The stored fingerprint is the first one, in the map and in every bucket.
  REQUIRE(Entry(redis, "x").has_value());
  CHECK(Entry(redis, "x")->simhash == fa);
  CHECK(Entry(redis, "x")->seq == 1);
  const std::vector<uint64_t> filed = Filed(redis, "x");
  CHECK(filed.size() == 10);  // C(5, 3) tables
  for (uint64_t fp : filed) CHECK(fp == fa);
  // The entry's content.retention starts again.
  CHECK(redis.Command({"PTTL", key}).integer > kRetentionMs - 60000);

  // So an item near the new text does not join x; one near the old text does.
  auto y = index->Assign({{"y", fb ^ 0x1}});
  REQUIRE(y.ok());
  CHECK((*y)[0].cluster == "y");
  CHECK((*y)[0].nearest.empty());
  auto z = index->Assign({{"z", fa ^ 0x3}});
  REQUIRE(z.ok());
  CHECK((*z)[0].cluster == "x");
  CHECK((*z)[0].distance == 2);

  // Once the entry has expired (here: removed as expiry removes it), x is a new
  // item again: the new text counts, and x joins y's cluster.
  redis.Command({"DEL", key});
  auto later = index->Assign({{"x", fb}});
  REQUIRE(later.ok());
  CHECK_FALSE((*later)[0].known);
  CHECK((*later)[0].cluster == "y");
  CHECK((*later)[0].nearest == "y");
  REQUIRE(Entry(redis, "x").has_value());
  CHECK(Entry(redis, "x")->simhash == fb);
  CHECK(Entry(redis, "x")->cluster == "y");
}

}  // namespace ef::test
