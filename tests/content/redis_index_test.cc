// The content index in Redis (src/contentdb/index.h, docs/CONTENT.md rules 3 and
// 4) through a real redis-server and a local Redis Cluster: the clusters equal a
// brute-force reference of the contract (nearest earlier item within k, oldest on
// ties, never merged), redelivery, chains, TTLs on every key, bad input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "content/simhash.h"
#include "contentdb/index.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

using contentdb::Assignment;
using contentdb::ContentIndex;
using contentdb::ContentItem;

// The wall clock when the test binary started: the index's clock in these
// tests, so that a test never straddles two generations (keys it inspects stay
// where they were written). Near Redis's clock, as PEXPIREAT needs.
int64_t StartMs() {
  static const int64_t start = SystemClock().NowMs();
  return start;
}

contentdb::ContentIndexOptions Options(int k = 3, int blocks = 5) {
  contentdb::ContentIndexOptions o;
  o.key_prefix = "t:";
  o.max_distance = k;
  o.index_blocks = blocks;
  o.retention_ms = 3600 * 1000;
  o.now_ms = [] { return StartMs(); };
  return o;
}

// Table t's bucket of fp in the generation of StartMs(): its entries' item IDs.
std::vector<std::string> Bucket(RedisServer& redis, const ContentIndex& index, int t, uint64_t fp) {
  const auto& layout = index.layout();
  contentdb::GroupPlace place = layout.Place(t, fp, layout.Generation(StartMs()));
  auto reply = redis.Command({"ZRANGEBYSCORE", place.key, place.score, place.score});
  std::vector<std::string> items;
  for (const auto& m : reply.elements) items.push_back(m.str.substr(8));
  return items;
}

std::unique_ptr<ContentIndex> MakeIndex(RedisConnection& conn, int k = 3, int blocks = 5) {
  auto index = ContentIndex::Make(Options(k, blocks), contentdb::SingleNodeRunner(conn));
  REQUIRE(index.ok());
  return std::move(*index);
}

// fp with `bits` distinct bits flipped.
uint64_t FlipBits(uint64_t fp, int bits, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (__builtin_popcountll(mask) < bits) mask |= uint64_t{1} << (rng() % 64);
  return fp ^ mask;
}

// Items with planted near-duplicates of earlier ones at distances 0 .. k + 1.
std::vector<ContentItem> Corpus(size_t n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ContentItem> items;
  for (size_t i = 0; i < n; ++i) {
    uint64_t fp = rng();
    if (i > 0 && rng() % 2 == 0) {
      fp = FlipBits(items[rng() % i].simhash, static_cast<int>(rng() % (k + 2)), rng);
    }
    items.push_back({"item-" + std::to_string(i), fp});
  }
  return items;
}

// The contract by brute force: item i joins the cluster of the earlier item j
// with the least distance <= k, the smallest j on ties; else its own.
std::vector<std::string> Reference(const std::vector<ContentItem>& items, int k) {
  std::vector<std::string> cluster(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    int best = k + 1;
    size_t at = i;
    for (size_t j = 0; j < i; ++j) {
      int d = content::HammingDistance(items[i].simhash, items[j].simhash);
      if (d < best) best = d, at = j;
    }
    cluster[i] = at == i ? items[i].item_id : cluster[at];
  }
  return cluster;
}

std::vector<std::string> AssignAll(ContentIndex& index, const std::vector<ContentItem>& items,
                                   size_t batch) {
  std::vector<std::string> out;
  for (size_t at = 0; at < items.size(); at += batch) {
    std::vector<ContentItem> part(
        items.begin() + static_cast<long>(at),
        items.begin() + static_cast<long>(std::min(items.size(), at + batch)));
    auto r = index.Assign(part);
    REQUIRE(r.ok());
    for (const Assignment& a : *r) out.push_back(a.cluster);
  }
  return out;
}

TEST_CASE("the Redis index assigns the clusters of a brute-force reference (20k)",
          "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  const auto items = Corpus(20000, 3, 7);
  const auto want = Reference(items, 3);
  size_t joined = 0;
  for (size_t i = 0; i < items.size(); ++i) joined += want[i] != items[i].item_id;
  REQUIRE(joined > 5000);  // many planted neighbours: not vacuous
  // Batches of 500: near items in one batch are handled too (in order).
  CHECK(AssignAll(*index, items, 500) == want);
  // Redelivery of every batch gives the same clusters, and Lookup reads them.
  CHECK(AssignAll(*index, items, 700) == want);
  std::vector<std::string> ids;
  for (const auto& it : items) ids.push_back(it.item_id);
  auto got = index->Lookup(ids);
  REQUIRE(got.ok());
  for (size_t i = 0; i < items.size(); ++i) {
    REQUIRE((*got)[i].has_value());
    REQUIRE(*(*got)[i] == want[i]);
  }
}

TEST_CASE("the Redis index on a local Redis Cluster", "[content][cluster]") {
  LocalRedisCluster cluster;
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  contentdb::ContentIndexOptions o;
  o.key_prefix = "t:";
  auto index = ContentIndex::Make(o, contentdb::ClusterRunner(router));
  REQUIRE(index.ok());
  const auto items = Corpus(3000, 3, 8);
  const auto want = Reference(items, 3);
  CHECK(AssignAll(**index, items, 250) == want);
  CHECK(AssignAll(**index, items, 1000) == want);
  // The keys spread over every master (hash tags).
  for (int m : cluster.Masters()) {
    CHECK(cluster.Command(m, {"DBSIZE"}).integer > 1000);
  }
}

TEST_CASE("redelivery, oldest on ties, no merge, in-batch neighbours", "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  const uint64_t a = 0xF0F0F0F0F0F0F0F0ULL;
  SECTION("oldest on ties: two items at the same distance, the first assigned wins") {
    REQUIRE(index->Assign({{"a", a}}).ok());
    REQUIRE(index->Assign({{"b", a ^ 0x7}}).ok());             // 3 from a: joins a
    REQUIRE(index->Assign({{"c", a ^ 0x700000000ULL}}).ok());  // 3 from a, 6 from b
    REQUIRE(index->Assign({{"e", ~a}}).ok());                  // its own cluster
    auto r = index->Assign({{"x", a ^ 0x3}});                  // 2 from a, 1 from b: the nearest
    REQUIRE(r.ok());
    CHECK((*r)[0].nearest == "b");
    CHECK((*r)[0].distance == 1);
    // y: 2 from a (assigned first) and 2 from x (assigned fifth), 3 from b: a.
    auto y = index->Assign({{"y", a ^ 0x1000000000000001ULL}});
    REQUIRE(y.ok());
    CHECK((*y)[0].nearest == "a");
    CHECK((*y)[0].distance == 2);
    CHECK((*y)[0].cluster == "a");
  }
  SECTION("a tie between two clusters goes to the older item's cluster") {
    REQUIRE(index->Assign({{"old", a}}).ok());
    REQUIRE(index->Assign({{"new", a ^ 0xFF00}}).ok());  // 8 bits: its own cluster
    auto r = index->Assign({{"mid", a ^ 0x0F00}});       // 4 from each: none (k = 3)
    REQUIRE((*r)[0].cluster == "mid");
    auto t = index->Assign({{"t", a ^ 0x0300}});  // 2 from old, 6 from new, 2 from mid
    REQUIRE(t.ok());
    CHECK((*t)[0].cluster == "old");
    CHECK((*t)[0].nearest == "old");
  }
  SECTION("chains: C joins B's cluster only through B; clusters never merge") {
    const uint64_t b = a ^ 0x7;    // 3 from a
    const uint64_t c = b ^ 0x70;   // 3 from b, 6 from a
    const uint64_t d = c ^ 0x700;  // 3 from c, 9 from a
    auto r = index->Assign({{"A", a}, {"B", b}, {"C", c}, {"D", d}});
    REQUIRE(r.ok());
    for (const auto& x : *r) CHECK(x.cluster == "A");
    // Another order: C first, then A (6 from C: its own), then B (3 from both:
    // C is older), so A stays apart and is never merged into C's cluster.
    RedisServer redis2({"--appendonly", "no"});
    auto conn2 = redis2.Connect();
    auto index2 = MakeIndex(*conn2);
    auto r2 = index2->Assign({{"C", c}, {"A", a}});
    REQUIRE(r2.ok());
    auto r3 = index2->Assign({{"B", b}});
    REQUIRE(r3.ok());
    CHECK((*r2)[1].cluster == "A");
    CHECK((*r3)[0].cluster == "C");
    auto again = index2->Lookup({"A", "B", "C"});
    REQUIRE(again.ok());
    CHECK(*(*again)[0] == "A");
  }
  SECTION("redelivery: the same item keeps its cluster, even with another fingerprint") {
    auto r1 = index->Assign({{"p", a}, {"q", a ^ 1}, {"q", a ^ 1}});
    REQUIRE(r1.ok());
    CHECK((*r1)[1].cluster == "p");
    CHECK((*r1)[2].cluster == "p");
    CHECK((*r1)[2].known);
    REQUIRE(index->Assign({{"z", ~a}}).ok());
    auto r2 = index->Assign({{"q", ~a}, {"p", 0}});
    REQUIRE(r2.ok());
    CHECK((*r2)[0].cluster == "p");
    CHECK((*r2)[0].known);
    CHECK((*r2)[1].cluster == "p");
  }
}

TEST_CASE("every key of the index has a TTL of content.retention", "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  REQUIRE(index->Assign(Corpus(300, 3, 9)).ok());
  REQUIRE(index->Assign(Corpus(300, 3, 9)).ok());  // renewal path too
  auto keys = redis.Command({"KEYS", "*"});
  REQUIRE(keys.elements.size() > 300);
  std::set<std::string> kinds;
  // The table keys expire with their generation: content.retention after its
  // end, so at least a retention after their last write, at most 1.5.
  const int64_t now = SystemClock().NowMs();
  const int64_t table_expiry = index->layout().ExpireAtMs(index->layout().Generation(StartMs()));
  for (const auto& key : keys.elements) {
    auto ttl = redis.Command({"PTTL", key.str});
    INFO(key.str);
    const std::string kind = key.str.substr(0, 4);
    if (kind == "t:cg") {
      // A small sorted set: Redis's compact encoding (CAPACITY.md section 6).
      CHECK(redis.Command({"OBJECT", "ENCODING", key.str}).str == "listpack");
      CHECK(std::llabs(ttl.integer - (table_expiry - now)) < 60 * 1000);
      CHECK(ttl.integer > 3500 * 1000);
      CHECK(ttl.integer <= 5400 * 1000);
    } else {
      CHECK(ttl.integer > 3500 * 1000);
      CHECK(ttl.integer <= 3600 * 1000);
    }
    kinds.insert(kind);
  }
  CHECK(kinds == std::set<std::string>{"t:cg", "t:ci", "t:cm", "t:cs"});
}

TEST_CASE("bad input gives errors naming the item", "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  auto r = index->Assign({{"ok", 1}, {"", 2}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "content item 1: the item ID is empty");
  auto l = index->Lookup({std::string(1025, 'x')});
  REQUIRE_FALSE(l.ok());
  CHECK(l.status().message() == "content item 0: the item ID has 1025 bytes, more than 1024");
  CHECK(redis.Command({"DBSIZE"}).integer == 0);  // nothing sent
  auto empty = index->Assign({});
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  contentdb::ContentIndexOptions o;
  o.max_distance = 3;
  o.index_blocks = 3;
  CHECK_FALSE(ContentIndex::Make(o, contentdb::SingleNodeRunner(*conn)).ok());
}

TEST_CASE(
    "a bad map value is an unknown item, counted and written over, and holds no batch back (issue "
    "47)",
    "[content][redis]") {
  // Before the fix, Assign and Lookup failed (kInternal) on such a value, and
  // the daemon and `content` retried the batch for good: ingestion stopped.
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  std::vector<std::string> bad_keys;
  contentdb::ContentIndexOptions o = Options();
  o.on_bad_value = [&bad_keys](const std::string& key) { bad_keys.push_back(key); };
  auto made = ContentIndex::Make(o, contentdb::SingleNodeRunner(*conn));
  REQUIRE(made.ok());
  auto& index = *made;
  redis.Command({"SET", "t:cm{x}", "garbage"});              // too short
  redis.Command({"HSET", "t:cm{h}", "a", "b"});              // another type
  redis.Command({"SET", "t:cm{y}", std::string(16, '\0')});  // 16 bytes: still too short
  auto found = index->Lookup({"x", "h", "y", "z"});
  REQUIRE(found.ok());
  CHECK(*found == std::vector<std::optional<std::string>>(4));  // all unknown
  CHECK(bad_keys == std::vector<std::string>{"t:cm{x}", "t:cm{h}", "t:cm{y}"});
  bad_keys.clear();
  // Assign: each gets a cluster (y joins x: same fingerprint), and its entry
  // replaces the bad value.
  auto a = index->Assign({{"x", 0x1234}, {"h", 0xffff0000}, {"y", 0x1234}, {"z", 7}});
  REQUIRE(a.ok());
  CHECK((*a)[0].cluster == "x");
  CHECK((*a)[1].cluster == "h");
  CHECK((*a)[2].cluster == "x");
  CHECK((*a)[3].cluster == "z");
  CHECK(bad_keys.size() == 3);
  CHECK(redis.Command({"TYPE", "t:cm{h}"}).str == "string");
  CHECK(redis.Command({"PTTL", "t:cm{x}"}).integer > 3500 * 1000);
  bad_keys.clear();
  auto again = index->Lookup({"x", "h", "y", "z"});
  REQUIRE(again.ok());
  CHECK(*again == std::vector<std::optional<std::string>>{"x", "h", "x", "z"});
  CHECK(bad_keys.empty());
  // A candidate whose entry went bad (found through a bucket) is skipped.
  redis.Command({"SET", "t:cm{x}", "garbage"});
  redis.Command({"DEL", "t:cm{y}"});
  auto b = index->Assign({{"w", 0x1235}});
  REQUIRE(b.ok());
  CHECK((*b)[0].cluster == "w");  // x unknown now: its bucket entry is stale
  CHECK(bad_keys == std::vector<std::string>{"t:cm{x}"});
}

TEST_CASE(
    "the content index's own connection is made again after READONLY, so it follows a failover "
    "(issue 47)",
    "[content][redis][failover]") {
  // Before the fix, the runner kept its connection on READONLY: behind an
  // address that moved to the new master, INCRBY <prefix>cseq failed for good.
  RedisServer r1({"--appendonly", "no"});
  RedisServer r2({"--appendonly", "no"});
  RedisOptions ro;
  ro.port = r1.port();
  auto made = ContentIndex::Make(Options(), contentdb::ReconnectingRunner(ro));
  REQUIRE(made.ok());
  auto& index = *made;
  REQUIRE(index->Assign({{"a", 1}}).ok());
  auto watch = r1.Connect();
  const auto connections = [&watch] {
    return std::stoll(RedisServer::InfoField(*watch, "stats", "total_connections_received"));
  };
  r1.ReplicaOf(&r2);  // R1 is a replica now: writes answer READONLY
  REQUIRE(r1.AwaitInSync(r2, std::chrono::seconds(20)));
  auto failed = index->Assign({{"b", 2}});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == StatusCode::kUnavailable);  // retriable
  CHECK(failed.status().message().find("READONLY") != std::string::npos);
  r1.ReplicaOf(nullptr);
  const int64_t before = connections();  // (over the watch: no new connection)
  auto ok = index->Assign({{"b", 2}});
  REQUIRE(ok.ok());
  CHECK((*ok)[0].cluster == "b");
  // The index connected anew for it: the old connection was dropped at READONLY.
  CHECK(connections() - before == 1);
}

TEST_CASE(
    "copies of one text keep one bucket entry, and the clusters still equal the reference (issue "
    "47)",
    "[content][redis]") {
  // Before the fix every copy was filed in the buckets of its fingerprint: 2,000
  // copies made hashes of 2,000 fields, each read whole (and every field's map
  // entry fetched) by the next copy's probe, so a batch's cost grew with the
  // copies indexed (the review's 9,000 copies: 30 s a batch, 2.1 GB RSS).
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);
  std::mt19937_64 rng(11);
  const uint64_t flood = rng();
  std::vector<ContentItem> items;
  for (int i = 0; i < 4000; ++i) {
    uint64_t fp = i % 2 == 0 ? flood : rng();
    if (i % 10 == 5) fp = flood ^ (uint64_t{1} << (i % 64));  // near copies, distance 1
    items.push_back({"f-" + std::to_string(i), fp});
  }
  const auto want = Reference(items, 3);
  size_t in_flood = 0;
  for (const auto& c : want) in_flood += c == "f-0";
  REQUIRE(in_flood > 2000);  // the copies and the near copies join the first
  CHECK(AssignAll(*index, items, 500) == want);
  CHECK(AssignAll(*index, items, 1000) == want);  // redelivery: the same, nothing filed again
  for (int t = 0; t < index->scheme().tables(); ++t) {
    INFO("table " << t);
    // The flood's first item, and at most one item per distinct near copy
    // (64 possible) where its block falls in this bucket.
    const std::vector<std::string> entries = Bucket(redis, *index, t, flood);
    CHECK(entries.size() >= 1);
    CHECK(entries.size() <= 65);
    CHECK(std::count(entries.begin(), entries.end(), "f-0") == 1);
  }
  // The representative is renewed by each new copy: its entry lives on.
  redis.Command({"PEXPIRE", "t:cm{f-0}", "10000"});
  auto copy = index->Assign({{"f-new", flood}});
  REQUIRE(copy.ok());
  CHECK((*copy)[0].cluster == "f-0");
  CHECK((*copy)[0].distance == 0);
  CHECK(redis.Command({"PTTL", "t:cm{f-0}"}).integer > 3500 * 1000);
}

TEST_CASE(
    "a renewing Lookup (the daemon's, for exposed items) gives their map entries and buckets "
    "content.retention again, a reader's does not (issue 47)",
    "[content][redis]") {
  // Before the fix, entries expired content.retention after the item's last
  // Assign whatever its exposures: an item exposed later than retention - window
  // after it was indexed lost its cluster for readers while buckets still held
  // its token.
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  auto index = MakeIndex(*conn);  // retention 1 h
  REQUIRE(index->Assign({{"x", 0x1234}, {"y", 0x1234}}).ok());
  const auto& layout = index->layout();
  std::vector<std::string> buckets;
  for (int t = 0; t < index->scheme().tables(); ++t)
    buckets.push_back(layout.Place(t, 0x1234, layout.Generation(StartMs())).key);
  const auto age = [&redis](const std::string& key) {
    redis.Command({"PEXPIRE", key, "5000"});  // as if indexed long ago
  };
  age("t:cm{x}");
  age("t:cm{y}");
  for (const auto& b : buckets) age(b);
  // A reader's Lookup renews nothing.
  auto read = index->Lookup({"x"});
  REQUIRE(read.ok());
  CHECK((*read)[0] == std::optional<std::string>("x"));
  CHECK(redis.Command({"PTTL", "t:cm{x}"}).integer <= 5000);
  // The daemon's: the entry at once, its table entries within the next two
  // renewing Lookups.
  auto renewed = index->Lookup({"x", "unknown"}, true);
  REQUIRE(renewed.ok());
  CHECK((*renewed)[0] == std::optional<std::string>("x"));
  CHECK_FALSE((*renewed)[1].has_value());
  CHECK(redis.Command({"PTTL", "t:cm{x}"}).integer > 3500 * 1000);
  CHECK(redis.Command({"PTTL", "t:cm{y}"}).integer <= 5000);  // not exposed: not renewed
  CHECK(redis.Command({"EXISTS", "t:cm{unknown}"}).integer == 0);
  for (const auto& b : buckets) CHECK(redis.Command({"PTTL", b}).integer <= 5000);
  // (The next renewing Lookup checks that x is filed, the one after files it.)
  REQUIRE(index->Lookup({"z"}, true).ok());
  REQUIRE(index->Lookup({"z"}, true).ok());
  for (const auto& b : buckets) {
    INFO(b);
    CHECK(redis.Command({"PTTL", b}).integer > 3500 * 1000);
  }
}

TEST_CASE(
    "table entries live in generations of half a retention: a probe reads the live ones only, "
    "and a renewal files an item again in the current one",
    "[content][redis]") {
  RedisServer redis({"--appendonly", "no"});
  auto conn = redis.Connect();
  contentdb::ContentIndexOptions o = Options();  // retention 1 h: generations of 30 min
  int64_t now = 0;
  o.now_ms = [&now] { return now; };
  auto made = ContentIndex::Make(o, contentdb::SingleNodeRunner(*conn));
  REQUIRE(made.ok());
  auto& index = *made;
  const auto& layout = index->layout();
  const int64_t g0 = layout.Generation(StartMs());
  const int64_t base = g0 * 1800 * 1000;  // the start of the current generation
  const int64_t minute = 60 * 1000;
  const uint64_t fp = 0x0123456789abcdefULL;
  const auto cluster_of = [&index](const std::string& item, uint64_t f) {
    auto r = index->Assign({{item, f}});
    REQUIRE(r.ok());
    return (*r)[0].cluster;
  };
  now = base;
  CHECK(cluster_of("a", fp) == "a");
  CHECK(cluster_of("copy", fp) == "a");  // a copy: not filed (a's entries stand for it)
  now = base + 40 * minute;              // the next generation reads a's
  CHECK(layout.Generation(now) == g0 + 1);
  CHECK(cluster_of("b", fp ^ 1) == "a");
  // Generation g0's keys expire a retention after its end, whatever the writes.
  const int64_t ttl = redis.Command({"PTTL", layout.Place(0, fp, g0).key}).integer;
  CHECK(std::llabs(ttl - (base + 90 * minute - SystemClock().NowMs())) < minute);
  // An exposed item whose map entry has less than half its retention left is
  // filed again in the current generation, if it is filed (a copy is not).
  now = base + 50 * minute;
  redis.Command({"PEXPIRE", "t:cm{a}", "5000"});
  redis.Command({"PEXPIRE", "t:cm{copy}", "5000"});
  REQUIRE(index->Lookup({"a", "copy"}, true).ok());
  REQUIRE(index->Lookup({"zz"}, true).ok());  // checks which of them are filed
  REQUIRE(index->Lookup({"zz"}, true).ok());  // files a again
  const auto member = [fp](const char* item) { return contentdb::GroupLayout::Member(fp, item); };
  for (int t = 0; t < index->scheme().tables(); ++t) {
    INFO("table " << t);
    const auto place = layout.Place(t, fp, g0 + 1);
    CHECK(redis.Command({"ZSCORE", place.key, member("a")}).str == place.score);
    for (int64_t g = g0; g <= g0 + 1; ++g)
      CHECK(redis.Command({"ZSCORE", layout.Place(t, fp, g).key, member("copy")}).type ==
            RedisReply::Type::kNil);
  }
  // 110 min: generation g0 can have expired (not read), g0 + 1 holds a again:
  // the nearest is a (1 bit), not b (2 bits, filed at 40 min).
  now = base + 110 * minute;
  CHECK(layout.OldestGeneration(now) == g0 + 1);
  auto e = index->Assign({{"e", fp ^ 8}});
  REQUIRE(e.ok());
  CHECK((*e)[0].nearest == "a");
  CHECK((*e)[0].distance == 1);
  // 180 min: every generation written can have expired: nothing is read
  // (their keys still live in this Redis, whose clock did not move).
  now = base + 180 * minute;
  CHECK(layout.OldestGeneration(now) == g0 + 4);
  CHECK(redis.Command({"EXISTS", layout.Place(0, fp, g0).key}).integer == 1);
  CHECK(cluster_of("d", fp ^ 4) == "d");
}

}  // namespace
}  // namespace ef::test
