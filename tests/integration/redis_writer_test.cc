// RedisBitWriter against a real redis-server, driven directly (no Kafka, no
// daemon): expiries that heal after a key was lost behind the writer's back,
// `<prefix>meta` re-created after Redis came back empty, a reconnect when the
// server turned into a replica (READONLY), a layout that changed while the
// writer was away (fatal, not retried), and the stages: exact fill accounting
// (byte for byte the reference writer's value) and the stage limit.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stages.h"
#include "support/doc_tables.h"
#include "support/items_key.h"
#include "support/redis_server.h"
#include "support/wait.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

const int64_t kExpireAt = static_cast<int64_t>(std::time(nullptr)) + 30 * 86400;

struct KeySpec {
  std::string key;
  std::vector<uint32_t> positions;
};

BitBatch MakeBatch(const std::vector<KeySpec>& specs) {
  BitBatch b;
  for (const auto& s : specs) {
    KeyBits kb;
    kb.key = s.key;
    kb.expire_at = kExpireAt;
    kb.positions = s.positions;
    b.keys.push_back(std::move(kb));
  }
  b.size = b.keys.size();
  return b;
}

BitWriterOptions Options(const RedisServer& redis, WriteMode mode = WriteMode::kBitfield) {
  BitWriterOptions o;
  o.redis.port = redis.port();
  o.mode = mode;
  return o;
}

Layout TestLayout() {
  Layout l;
  l.m = 3345;
  l.k = 12;
  l.seed = 7;
  l.prefix = "wt:";
  l.bucket_seconds = 86400;
  l.window_seconds = 30 * 86400;
  return l;
}

long long Ttl(RedisConnection& c, const std::string& key) {
  auto r = c.Command({"TTL", key});
  REQUIRE(r.ok());
  return r->integer;
}

long long GetBit(RedisConnection& c, const std::string& key, uint32_t pos) {
  auto r = c.Command({"GETBIT", key, std::to_string(pos)});
  REQUIRE(r.ok());
  return r->integer;
}

void Run(RedisConnection& c, const std::vector<std::string>& args) {
  auto r = c.Command(args);
  REQUIRE(r.ok());
  INFO(args[0] << ": " << r->str);
  REQUIRE(r->type != RedisReply::Type::kError);
}

// Ids of the server's normal clients other than `observer` itself.
std::set<long long> OtherClientIds(RedisConnection& observer) {
  auto self = observer.Command({"CLIENT", "ID"});
  REQUIRE(self.ok());
  auto list = observer.Command({"CLIENT", "LIST", "TYPE", "normal"});
  REQUIRE(list.ok());
  std::set<long long> ids;
  size_t at = 0;
  while ((at = list->str.find("id=", at)) != std::string::npos) {
    if (at == 0 || list->str[at - 1] == '\n') {
      long long id = std::stoll(list->str.substr(at + 3));
      if (id != self->integer) ids.insert(id);
    }
    at += 3;
  }
  return ids;
}

TEST_CASE("redis writer: a key deleted behind the writer's back gets its expiry on the next write",
          "[integration][redis]") {
  RedisServer redis;
  auto admin = redis.Connect();
  const WriteMode mode = GENERATE(WriteMode::kBitfield, WriteMode::kSetbit);
  INFO("mode " << (mode == WriteMode::kBitfield ? "bitfield" : "setbit"));
  RedisBitWriter writer(Options(redis, mode));
  const BitBatch batch = MakeBatch({{"wt:{u1}:20400", {3, 17, 99}}, {"wt:{u2}:20400", {5}}});
  WriteStats stats;
  REQUIRE(writer.Write(batch, &stats).ok());
  CHECK(Ttl(*admin, "wt:{u1}:20400") > 0);

  SECTION("DEL, then the same bits again") {
    Run(*admin, {"DEL", "wt:{u1}:20400"});
    REQUIRE(writer.Write(batch, &stats).ok());
    CHECK(GetBit(*admin, "wt:{u1}:20400", 17) == 1);
    CHECK(Ttl(*admin, "wt:{u1}:20400") > 0);
    CHECK(Ttl(*admin, "wt:{u2}:20400") > 0);
  }
  SECTION("FLUSHALL, then other bits, in rounds of a few commands") {
    Run(*admin, {"FLUSHALL"});
    BitWriterOptions small = Options(redis, mode);
    small.max_commands_per_round = 2;
    RedisBitWriter writer2(small);
    REQUIRE(writer2.Write(batch, &stats).ok());  // writer2 remembers both expiries
    Run(*admin, {"FLUSHALL"});
    std::vector<KeySpec> specs;
    for (int u = 0; u < 5; ++u)
      specs.push_back({"wt:{u" + std::to_string(u) + "}:20400", {40, 41}});
    REQUIRE(writer2.Write(MakeBatch(specs), &stats).ok());
    for (const auto& s : specs) {
      INFO(s.key);
      CHECK(Ttl(*admin, s.key) > 0);
    }
  }
  SECTION("a key that kept its bits keeps the saving: EXPIREAT is not sent again") {
    // New positions only: bitfield mode reads its sentinel (a bit of the first
    // write) as 1; setbit mode has no sentinel and sends EXPIREAT once more.
    REQUIRE(writer.Write(MakeBatch({{"wt:{u1}:20400", {1000, 2000}}}), &stats).ok());
    if (mode == WriteMode::kBitfield) {
      CHECK(stats.expires_skipped == 1);
      CHECK(stats.commands == 1);
    } else {
      CHECK(stats.expires_skipped == 0);
      CHECK(stats.commands == 3);
    }
    // A position already set: both modes see an old bit 1.
    REQUIRE(writer.Write(MakeBatch({{"wt:{u1}:20400", {17, 3000}}}), &stats).ok());
    CHECK(stats.expires_skipped == 1);
    CHECK(stats.commands == (mode == WriteMode::kBitfield ? 1 : 2));
    CHECK(Ttl(*admin, "wt:{u1}:20400") > 0);
  }
}

TEST_CASE("redis writer: the meta hash is re-created after Redis came back empty",
          "[integration][redis]") {
  RedisServer redis;
  BitWriterOptions o = Options(redis);
  o.layout = TestLayout();
  RedisBitWriter writer(o);
  const BitBatch batch = MakeBatch({{"wt:{u1}:20400", {3, 17}}});
  const std::string meta = MetaKey("wt:");
  REQUIRE(writer.Write(batch, nullptr).ok());
  CHECK(redis.Command({"HGET", meta, "m"}).str == "3345");

  SECTION("restarted empty: the next connection ensures the meta") {
    redis.RestartEmpty();
    REQUIRE(redis.Command({"EXISTS", meta}).integer == 0);
    bool written = false;
    for (int attempt = 0; attempt < 3 && !written; ++attempt)
      written = writer.Write(batch, nullptr).ok();  // the first finds the old connection closed
    REQUIRE(written);
  }
  SECTION("FLUSHALL on the same connection: a lost key makes the writer ensure the meta") {
    redis.Command({"FLUSHALL"});
    REQUIRE(writer.Write(batch, nullptr).ok());
  }
  CHECK(redis.Command({"HGET", meta, "m"}).str == "3345");
  CHECK(redis.Command({"HGET", meta, "k"}).str == "12");
  CHECK(redis.Command({"TTL", "wt:{u1}:20400"}).integer > 0);
}

TEST_CASE("redis writer: a layout changed while it was away is a fatal error, not retried",
          "[integration][redis]") {
  RedisServer redis;
  auto admin = redis.Connect();
  BitWriterOptions o = Options(redis);
  o.layout = TestLayout();
  RedisBitWriter writer(o);
  const BitBatch batch = MakeBatch({{"wt:{u1}:20400", {3}}});
  REQUIRE(writer.Write(batch, nullptr).ok());
  Run(*admin, {"HSET", MetaKey("wt:"), "m", "4000"});
  for (long long id : OtherClientIds(*admin))
    Run(*admin, {"CLIENT", "KILL", "ID", std::to_string(id)});
  Status st = writer.Write(batch, nullptr);
  if (st.code() == StatusCode::kUnavailable) st = writer.Write(batch, nullptr);  // closed conn
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(st.message(), Catch::Contains("m: stored 4000, configured 3345"));
  // Sticky: no reconnect loop, the same answer.
  Status again = writer.Write(batch, nullptr);
  CHECK(again.code() == StatusCode::kFailedPrecondition);
  CHECK(OtherClientIds(*admin).empty());
}

TEST_CASE("redis writer: READONLY drops the connection - the next write connects anew",
          "[integration][redis]") {
  RedisServer x;
  RedisServer y;
  auto admin = x.Connect();
  RedisBitWriter writer(Options(x));
  // The first key carries CR/LF (a hostile user ID): the error names it escaped.
  const BitBatch batch =
      MakeBatch({{"wt:{u\r\n[error] forged}:20400", {5}}, {"wt:{u1}:20400", {3, 17}}});
  REQUIRE(writer.Write(batch, nullptr).ok());
  const std::set<long long> before = OtherClientIds(*admin);
  REQUIRE(before.size() == 1);

  Run(*admin, {"REPLICAOF", "127.0.0.1", std::to_string(y.port())});
  Status st = writer.Write(batch, nullptr);
  CHECK(st.code() == StatusCode::kUnavailable);
  CHECK_THAT(st.message(), Catch::Contains("READONLY"));
  CHECK_THAT(st.message(), Catch::Contains("'wt:{u\\r\\n[error] forged}:20400'"));
  CHECK(st.message().find_first_of("\r\n") == std::string::npos);
  CHECK(writer.last_error_kind() == RedisErrorKind::kBusy);
  // The connection that saw READONLY is closed by the writer.
  CHECK(WaitFor([&] { return OtherClientIds(*admin).empty(); }, 5s));

  Run(*admin, {"REPLICAOF", "NO", "ONE"});
  REQUIRE(writer.Write(batch, nullptr).ok());
  const std::set<long long> after = OtherClientIds(*admin);
  REQUIRE(after.size() == 1);
  CHECK(*after.begin() != *before.begin());
  CHECK(GetBit(*admin, "wt:{u1}:20400", 17) == 1);
  CHECK(Ttl(*admin, "wt:{u1}:20400") > 0);
}

}  // namespace
}  // namespace ef::test

namespace ef::test {
namespace {

// A batch of one key with `n` items "<tag>-<i>" (hashes and stage-0 positions, as
// the coalescer makes them).
BitBatch ItemsBatch(const Layout& l, const std::string& key, const std::string& tag, int n) {
  BitBatch b;
  KeyBits kb = test::ItemsKey(l, key, tag, n, kExpireAt);
  b.keys.push_back(std::move(kb));
  b.size = 1;
  return b;
}

size_t Missing(RedisConnection& c, const Layout& l, const std::string& key, const std::string& tag,
               int n) {
  auto v = c.Command({"GET", key});
  REQUIRE(v.ok());
  size_t missing = 0;
  for (int i = 0; i < n; ++i)
    missing += !ValueContains(v->str, l.stage_table, l.RuleFor(test::BucketOfExpiry(l, kExpireAt)),
                              HashItem(tag + "-" + std::to_string(i), l.seed));
  return missing;
}

}  // namespace

TEST_CASE("redis writer (v2): stages grow, known keys cost no read, a lost key heals",
          "[integration][redis][v2]") {
  RedisServer redis;
  auto admin = redis.Connect();
  FilterConfig f;
  f.items_per_bucket = 10;
  f.key_prefix = "wt:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  BitWriterOptions o = Options(redis);
  o.layout = *l;
  RedisBitWriter writer(o);
  const std::string key = "wt:{heavy}:20251122";

  // 1. First write: the key's state is unknown, so it is read (one GET); 100
  // items at 10 per stage-0 design load fill several stages.
  WriteStats s1;
  REQUIRE(writer.Write(ItemsBatch(*l, key, "a", 100), &s1).ok());
  CHECK(s1.keys_read == 1);
  CHECK(s1.stages.advances >= 2);
  CHECK(Missing(*admin, *l, key, "a", 100) == 0);
  const auto len1 = admin->Command({"STRLEN", key})->integer;
  CHECK(StagesPresent(l->stage_table, static_cast<size_t>(len1)) >= 3);
  CHECK(Ttl(*admin, key) > 0);

  // 2. Steady state: the state is cached and updated from the write's old bits:
  // no read.
  WriteStats s2;
  REQUIRE(writer.Write(ItemsBatch(*l, key, "b", 30), &s2).ok());
  CHECK(s2.keys_read == 0);
  CHECK(Missing(*admin, *l, key, "b", 30) == 0);

  // 3. The key is lost behind the writer's back: the write finds no old bit set,
  // sends EXPIREAT in a follow-up, and forgets the cached stage state.
  Run(*admin, {"DEL", key});
  WriteStats s3;
  REQUIRE(writer.Write(ItemsBatch(*l, key, "c", 5), &s3).ok());
  CHECK(Ttl(*admin, key) > 0);
  CHECK(Missing(*admin, *l, key, "c", 5) == 0);
  WriteStats s4;
  REQUIRE(writer.Write(ItemsBatch(*l, key, "d", 5), &s4).ok());
  CHECK(s4.keys_read == 1);  // read again: the state was forgotten
  CHECK(Missing(*admin, *l, key, "d", 5) == 0);
}

}  // namespace ef::test

namespace ef::test {
namespace {

// The reference writer of docs/FORMAT.md rule 8 ("Writers: fill accounting and the
// stage limit"), item by item on a value held here (as
// tests/unit/bloom/stage_fill_test.cc has it): the current stage is the newest the
// value holds; an item whose positions there are all set is present; else, once
// the stage's set bits reach fill_s, the next stage starts (in the last stage the
// item is not written); then its positions are set.
bool RefBit(const std::string& v, uint64_t p) {
  return p / 8 < v.size() && ((static_cast<unsigned char>(v[p / 8]) >> (7 - p % 8)) & 1) != 0;
}

uint64_t RefWrite(const std::vector<Stage>& t, PositionRule rule, Hash128 h, std::string* v) {
  size_t s = 0;
  for (size_t i = 1; i < t.size(); ++i)
    if (v->size() > t[i].offset / 8) s = i;
  auto positions = [&](size_t stage) {
    std::vector<uint64_t> p;
    uint64_t x = h.h1;
    for (uint32_t i = 0; i < t[stage].k; ++i, x += h.h2)
      p.push_back(t[stage].offset + PositionOf(rule, x, t[stage].m));
    return p;
  };
  std::vector<uint64_t> p = positions(s);
  if (std::all_of(p.begin(), p.end(), [&](uint64_t q) { return RefBit(*v, q); })) return 0;
  uint64_t fill = 0;
  for (uint64_t q = t[s].offset; q < t[s].offset + t[s].m; ++q) fill += RefBit(*v, q);
  if (fill >= t[s].fill) {
    if (s + 1 == t.size()) return 1;  // not written: the stage limit
    p = positions(++s);
  }
  for (uint64_t q : p) {
    if (v->size() <= q / 8) v->resize(q / 8 + 1, '\0');
    (*v)[q / 8] = static_cast<char>(static_cast<unsigned char>((*v)[q / 8]) | (0x80u >> (q % 8)));
  }
  return 0;
}

long long CommandCalls(RedisConnection& c, const std::string& command) {
  auto r = c.Command({"INFO", "commandstats"});
  REQUIRE(r.ok());
  const std::string field = RedisServer::InfoValue(r->str, "cmdstat_" + command);
  if (field.empty()) return 0;
  return std::stoll(field.substr(field.find("calls=") + 6));
}

}  // namespace

TEST_CASE("redis writer (v3): batches with repeated items leave the reference writer's bytes",
          "[integration][redis][v3][fill]") {
  RedisServer redis;
  auto admin = redis.Connect();
  const WriteMode mode = GENERATE(WriteMode::kBitfield, WriteMode::kSetbit, WriteMode::kBitop);
  INFO("mode " << WriteModeName(mode));
  FilterConfig f;  // the default layout: 200 items per bucket, m = 3345
  f.key_prefix = "wt:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 3);
  BitWriterOptions o = Options(redis, mode);
  o.layout = *l;
  RedisBitWriter writer(o);
  const PositionRule rule = l->RuleFor(BucketOfExpiry(*l, kExpireAt));
  std::mt19937_64 rng(29);
  // Users at 0.5x, 1x, 2x and 5x the design load; each item seen 3 times on
  // average, in random order, in batches of 1 to 30 items.
  for (const int distinct : {100, 200, 400, 1000}) {
    const std::string key = "wt:{fill" + std::to_string(distinct) + "}:20251122";
    std::vector<std::string> stream;
    for (int i = 0; i < distinct; ++i)
      for (int n = 1 + static_cast<int>(rng() % 5); n > 0; --n)
        stream.push_back(key + "-" + std::to_string(i));
    std::shuffle(stream.begin(), stream.end(), rng);
    std::string reference;
    for (const std::string& item : stream)
      RefWrite(l->stage_table, rule, HashItem(item, l->seed), &reference);
    uint64_t reads = 0, batches = 0;
    for (size_t at = 0; at < stream.size(); ++batches) {
      const size_t n = std::min<size_t>(stream.size() - at, 1 + rng() % 30);
      BitBatch b;
      b.keys.push_back(KeyOfItems(
          *l, key, std::vector<std::string>(stream.begin() + at, stream.begin() + at + n),
          kExpireAt));
      b.size = 1;
      WriteStats s;
      REQUIRE(writer.Write(b, &s).ok());
      reads += s.keys_read;
      at += n;
    }
    const std::string value = admin->Command({"GET", key})->str;
    INFO(distinct << " distinct items, " << stream.size() << " in " << batches << " batches, "
                  << reads << " read(s): " << value.size() << " bytes ("
                  << StagesPresent(l->stage_table, value.size()) << " stages), the reference "
                  << reference.size() << " bytes ("
                  << StagesPresent(l->stage_table, reference.size()) << " stages)");
    CHECK((value == reference));
    // Known keys are read only where a stage may fill in the batch.
    CHECK(reads < batches / 2);
    if (distinct < f.items_per_bucket) CHECK(value.size() <= (l->m + 7) / 8);
  }
}

TEST_CASE(
    "redis writer (v3): a key the coalescer left without positions (taken for a layout-v4 key "
    "with a size class) is written by the stored layout's rule",
    "[integration][redis][v3][v4]") {
  // A daemon configured with filter.layout_version 4 coalesces its first batch
  // before it has read a stored version-3 meta: its keys come without stage-0
  // positions (KeyBits::classed). The writer computes them from the items.
  RedisServer redis;
  auto admin = redis.Connect();
  const WriteMode mode = GENERATE(WriteMode::kBitfield, WriteMode::kSetbit, WriteMode::kBitop);
  const uint32_t stages = GENERATE(1u, 8u);
  INFO("mode " << WriteModeName(mode) << ", " << stages << " stage(s)");
  FilterConfig f;
  f.key_prefix = "wt:";
  f.stages = stages;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 3);
  BitWriterOptions o = Options(redis, mode);
  o.layout = *l;
  o.bitop_threshold = 0;  // bitop mode: every key by BITOP
  RedisBitWriter writer(o);
  BitBatch b;
  for (const char* user : {"with", "without"}) {
    b.keys.push_back(KeyOfItems(*l, std::string("wt:{") + user + "}:20251122",
                                Items("classed", 150), kExpireAt));
  }
  b.keys[1].positions.clear();
  b.keys[1].classed = true;
  b.size = 2;
  WriteStats s;
  REQUIRE(writer.Write(b, &s).ok());
  const std::string with = admin->Command({"GET", "wt:{with}:20251122"})->str;
  CHECK(admin->Command({"BITCOUNT", "wt:{with}:20251122"})->integer > 1000);
  CHECK((admin->Command({"GET", "wt:{without}:20251122"})->str == with));
  CHECK(Ttl(*admin, "wt:{without}:20251122") > 0);
}

TEST_CASE("redis writer (v3): one stage writes every item, as FORMAT.md's vector",
          "[integration][redis][v3][limit]") {
  // docs/FORMAT.md "One stage: no limit": 600 items into one key of a one-stage
  // version-3 layout, in batches of 50, all written (no stage limit).
  RedisServer redis;
  auto admin = redis.Connect();
  FilterConfig f;
  f.stages = 1;
  f.key_prefix = "wt:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 3);
  BitWriterOptions o = Options(redis);
  o.layout = *l;
  RedisBitWriter writer(o);
  const std::string key = "wt:{one}:20251122";
  const auto rows = test::DocTableRows("FORMAT.md", "### One stage: no limit");
  REQUIRE(rows.size() == 1);
  const int n = std::stoi(rows[0][0]);
  REQUIRE(n % 50 == 0);
  uint64_t limit_items = 0;
  // ItemsKey names the items "<tag>-<i>"; one key, the batches' items in order.
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back("one-" + std::to_string(i));
  for (int at = 0; at < n; at += 50) {
    BitBatch b;
    b.keys.push_back(test::KeyOfItems(
        *l, key, std::vector<std::string>(items.begin() + at, items.begin() + at + 50), kExpireAt));
    b.size = 1;
    WriteStats s;
    REQUIRE(writer.Write(b, &s).ok());
    limit_items += s.stages.limit_items;
  }
  CHECK(limit_items == 0);
  CHECK(std::to_string(admin->Command({"BITCOUNT", key})->integer) == rows[0][1]);
  CHECK(std::to_string(admin->Command({"STRLEN", key})->integer) == rows[0][2]);
  CHECK(Missing(*admin, *l, key, "one", n) == 0);
}

TEST_CASE("redis writer (v3): a key at the stage limit is not written any more, and counted",
          "[integration][redis][v3][limit]") {
  RedisServer redis;
  auto admin = redis.Connect();
  FilterConfig f;
  f.items_per_bucket = 10;
  f.stages = 2;  // about 30 items at design fill
  f.key_prefix = "wt:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  BitWriterOptions o = Options(redis);
  o.layout = *l;
  RedisBitWriter writer(o);
  const std::string key = "wt:{bot}:20251122";
  const Stage& last = l->stage_table.back();
  // Far past the limit, 10 items a batch.
  uint64_t limit_items = 0;
  for (int b = 0; b < 20; ++b) {
    WriteStats s;
    REQUIRE(writer.Write(ItemsBatch(*l, key, "x" + std::to_string(b), 10), &s).ok());
    limit_items += s.stages.limit_items;
  }
  const std::string before = admin->Command({"GET", key})->str;
  REQUIRE(StagesPresent(l->stage_table, before.size()) == 2);
  CHECK(StagePopcount(before, last) >= last.fill);
  CHECK(StagePopcount(before, last) < last.fill + last.k);  // not past it
  CHECK(limit_items > 100);

  SECTION("known at the limit: no command at all, the items counted") {
    const long long bitfields = CommandCalls(*admin, "bitfield");
    const long long reads = CommandCalls(*admin, "mget");
    const long long expires = CommandCalls(*admin, "expireat");
    WriteStats s;
    REQUIRE(writer.Write(ItemsBatch(*l, key, "y", 20), &s).ok());
    CHECK(s.commands == 0);
    CHECK(s.bits == 0);
    CHECK(s.keys_read == 0);
    CHECK(s.stages.limit_items == 20);
    CHECK(s.stages.limit_keys == 1);
    CHECK(CommandCalls(*admin, "bitfield") == bitfields);
    CHECK(CommandCalls(*admin, "mget") == reads);
    CHECK(CommandCalls(*admin, "expireat") == expires);
    CHECK((admin->Command({"GET", key})->str == before));
    CHECK(Ttl(*admin, key) > 0);
  }
  SECTION("FLUSHALL: the batch that finds the meta gone makes the writer read every key again") {
    Run(*admin, {"FLUSHALL"});
    WriteStats s;
    REQUIRE(writer.Write(ItemsBatch(*l, key, "y", 5), &s).ok());
    CHECK(s.stages.limit_items == 5);  // still believed at the limit
    REQUIRE(writer.Write(ItemsBatch(*l, key, "w", 5), &s).ok());
    CHECK(s.keys_read == 1);
    CHECK(s.stages.limit_items == 0);
    CHECK(Missing(*admin, *l, key, "w", 5) == 0);
    CHECK(Ttl(*admin, key) > 0);
  }
  SECTION("a writer that does not know the key reads it once, then writes nothing") {
    RedisBitWriter fresh(o);
    WriteStats s;
    REQUIRE(fresh.Write(ItemsBatch(*l, key, "z", 20), &s).ok());
    CHECK(s.keys_read == 1);
    CHECK(s.commands == 1);  // the MGET
    CHECK(s.bits == 0);
    CHECK(s.stages.limit_items + s.items_present == 20);
    CHECK(s.stages.limit_keys == (s.stages.limit_items > 0 ? 1 : 0));
    CHECK((admin->Command({"GET", key})->str == before));
    WriteStats again;
    REQUIRE(fresh.Write(ItemsBatch(*l, key, "z2", 20), &again).ok());
    CHECK(again.keys_read == 0);
    CHECK(again.commands == 0);
    CHECK(again.stages.limit_items == 20);
  }
}

}  // namespace ef::test
