// redis.write_mode (issue 13): the same batches written through RedisBitWriter in
// every mode, each into a redis-server of its own, leave every key with the same
// value and EXPIRETIME byte for byte (layouts v1 and v2, heavy keys that advance
// stages, repeated batches, keys that already exist with and without a TTL);
// `auto` picks the module where every node has it and the plain-Redis hybrid
// where not; two writers on the same keys at once end with the union of their
// bits and the TTL set.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "config/config.h"
#include "module/module_support.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

struct ModeCase {
  std::string name;
  WriteMode mode;
  bool module_loaded;
  size_t bitop_threshold;
  WriteMode expect_resolved;
};

// Every key: its value (hex; "<type>" if not a string) and EXPIRETIME.
std::map<std::string, std::pair<std::string, int64_t>> Dump(RedisConnection& conn) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  RedisReply keys = Cmd(conn, {"KEYS", "*"});
  for (const auto& k : keys.elements) {
    RedisReply type = Cmd(conn, {"TYPE", k.str});
    std::string value =
        type.str == "string" ? Hex(Cmd(conn, {"GET", k.str}).str) : "<" + type.str + ">";
    out[k.str] = {value, Cmd(conn, {"EXPIRETIME", k.str}).integer};
  }
  return out;
}

// Writes the same batches in every mode, each into a server of its own, and
// compares every key with the first mode's.
void CheckEquivalent(const std::optional<Layout>& layout, const Layout& items_layout,
                     uint32_t seed) {
  const std::vector<ModeCase> cases{
      {"bitfield", WriteMode::kBitfield, false, 24, WriteMode::kBitfield},
      {"setbit", WriteMode::kSetbit, false, 24, WriteMode::kSetbit},
      {"module", WriteMode::kModule, true, 24, WriteMode::kModule},
      {"bitop", WriteMode::kBitop, false, 24, WriteMode::kBitop},
      {"bitop (every key)", WriteMode::kBitop, false, 0, WriteMode::kBitop},
      {"auto with the module", WriteMode::kAuto, true, 24, WriteMode::kModule},
      {"auto without the module", WriteMode::kAuto, false, 24, WriteMode::kBitop},
  };
  const std::vector<BitBatch> batches = Batches(items_layout, seed);
  const std::string p = items_layout.prefix;
  std::map<std::string, std::pair<std::string, int64_t>> reference;
  for (const ModeCase& mc : cases) {
    INFO("mode " << mc.name);
    auto redis = mc.module_loaded ? ServerWithModule() : std::make_unique<RedisServer>();
    auto conn = redis->Connect();
    // Keys that exist before: with the batches' expiry, and without any TTL;
    // another type (its bits are skipped).
    Cmd(*conn, {"SET", p + "{u2}:20400", std::string("\x01\x80\xff", 3)});
    Cmd(*conn, {"EXPIREAT", p + "{u2}:20400", std::to_string(kExpireAt)});
    Cmd(*conn, {"SET", p + "{u3}:20400", std::string("\x10\x00\x00\x00\x02", 5)});
    Cmd(*conn, {"SET", p + "{u7}:20400", "x"});
    Cmd(*conn, {"LPUSH", p + "{u8}:20400", "a-list"});
    BitWriterOptions o;
    o.redis.port = redis->port();
    o.mode = mc.mode;
    o.bitop_threshold = mc.bitop_threshold;
    o.layout = layout;
    RedisBitWriter writer(o);
    uint64_t advances = 0;
    for (const BitBatch& batch : batches) {
      WriteStats stats;
      Status st = writer.Write(batch, &stats);
      INFO(st.message());
      REQUIRE(st.ok());
      CHECK(stats.bits > 0);
      advances += stats.stages.advances;
    }
    CHECK(writer.mode() == mc.expect_resolved);
    if (layout && layout->version() == 2) CHECK(advances > 0);
    // The mode's own command did the writing.
    const std::string stats = Cmd(*conn, {"INFO", "commandstats"}).str;
    auto calls = [&stats](const std::string& command) -> int64_t {
      const std::string tag = "cmdstat_" + command + ":calls=";
      const size_t at = stats.find(tag);
      return at == std::string::npos ? 0 : std::stoll(stats.substr(at + tag.size()));
    };
    auto used = [&calls](const std::string& command) { return calls(command) > 0; };
    switch (mc.expect_resolved) {
      case WriteMode::kModule:
        CHECK(used("ef.setbits"));
        CHECK_FALSE(used("bitfield"));
        // The test's own, above, and the module's own, once per key it created
        // (it sets an expiry only when missing).
        CHECK(calls("expireat") <= static_cast<int64_t>(Dump(*conn).size()) + 1);
        break;
      case WriteMode::kBitop:
        CHECK(used("bitop"));
        CHECK(used("bitfield") == (mc.bitop_threshold > 0));
        CHECK(used("bitcount") == (layout && layout->version() == 2));
        break;
      case WriteMode::kSetbit:
        CHECK(used("setbit"));
        CHECK_FALSE(used("bitfield"));
        break;
      default:
        CHECK(used("bitfield"));
        CHECK_FALSE(used("bitop"));
        break;
    }
    auto dump = Dump(*conn);
    CHECK(dump.size() >= 12);
    for (const auto& [key, v] : dump) {
      INFO("key " << key);
      if (v.first.front() != '<') CHECK(v.second == kExpireAt);
    }
    if (reference.empty()) {
      reference = dump;
      continue;
    }
    CHECK(dump.size() == reference.size());
    for (const auto& [key, v] : reference) {
      INFO("key " << key);
      REQUIRE(dump.count(key) == 1);
      CHECK(dump[key].first == v.first);
      // A key of another type is refused by every mode, but EXPIREAT (bitfield,
      // setbit, bitop) still sets its TTL where EF.SETBITS leaves it untouched.
      if (v.first.front() != '<') CHECK(dump[key].second == v.second);
    }
  }
}

}  // namespace

TEST_CASE("write modes: every mode leaves the same values and expiries (layout v1)",
          "[module][write_mode]") {
  Layout l;
  l.m = 3345;
  l.k = 12;
  l.seed = 7;
  l.prefix = "wm:";
  CheckEquivalent(std::nullopt, l, 1);
}

TEST_CASE("write modes: every mode leaves the same values and expiries (layout v2 stages)",
          "[module][write_mode]") {
  FilterConfig f;
  f.layout_version = 2;  // version 2: the write modes, not the position rule
  f.items_per_bucket = 10;
  f.key_prefix = "wm:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 2);
  CheckEquivalent(*l, *l, 2);
}

TEST_CASE("write modes: concurrent writers on the same keys end with the union and the TTL",
          "[module][write_mode]") {
  auto mode = GENERATE(WriteMode::kModule, WriteMode::kBitop);
  INFO("mode " << WriteModeName(mode));
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  std::vector<std::vector<BitBatch>> work(2);
  std::map<std::string, std::string> expected;  // key -> the union, as Redis stores it
  std::mt19937 rng(5);
  for (int w = 0; w < 2; ++w) {
    for (int b = 0; b < 40; ++b) {
      BitBatch batch;
      for (int u = 0; u < 8; ++u) {
        KeyBits kb;
        kb.key = "wc:{u" + std::to_string(u) + "}:20400";
        kb.expire_at = kExpireAt;
        const int n = u < 4 ? 3 : 60;  // sparse and dense (bitop: both forms)
        for (int i = 0; i < n; ++i) kb.positions.push_back(rng() % 4000);
        std::sort(kb.positions.begin(), kb.positions.end());
        kb.positions.erase(std::unique(kb.positions.begin(), kb.positions.end()),
                           kb.positions.end());
        std::string& e = expected[kb.key];
        for (uint32_t p : kb.positions) {
          if (e.size() <= p / 8) e.resize(p / 8 + 1, '\0');
          e[p / 8] = static_cast<char>(static_cast<uint8_t>(e[p / 8]) | (0x80u >> (p % 8)));
        }
        batch.keys.push_back(std::move(kb));
      }
      batch.size = batch.keys.size();
      work[w].push_back(std::move(batch));
    }
  }
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      BitWriterOptions o;
      o.redis.port = redis->port();
      o.mode = mode;
      RedisBitWriter writer(o);
      for (const BitBatch& batch : work[w]) {
        Status st = writer.Write(batch, nullptr);
        if (!st.ok()) {
          results[w] = st;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) {
    INFO(st.message());
    REQUIRE(st.ok());
  }
  // Nothing but the keys: the temporary keys are gone.
  CHECK(Cmd(*conn, {"DBSIZE"}).integer == static_cast<int64_t>(expected.size()));
  for (const auto& [key, value] : expected) {
    INFO("key " << key);
    CHECK(Cmd(*conn, {"GET", key}).str == value);
    CHECK(Cmd(*conn, {"EXPIRETIME", key}).integer == kExpireAt);
  }
}

TEST_CASE("write modes: module mode refuses to write while a replica lacks the module",
          "[module][write_mode]") {
  auto master = ServerWithModule();
  RedisServer replica;
  replica.ReplicaOf(master.get());
  REQUIRE(replica.AwaitInSync(*master, std::chrono::seconds(20)));
  BitWriterOptions o;
  o.redis.port = master->port();
  o.mode = WriteMode::kModule;
  RedisBitWriter writer(o);
  BitBatch batch;
  KeyBits kb;
  kb.key = "wr:{u}:1";
  kb.expire_at = kExpireAt;
  kb.positions = {1, 2, 3};
  batch.keys.push_back(kb);
  batch.size = 1;
  Status st = writer.Write(batch, nullptr);
  INFO(st.message());
  CHECK(st.code() == StatusCode::kUnavailable);
  CHECK(st.message().find("module") != std::string::npos);
  auto conn = master->Connect();
  CHECK(Cmd(*conn, {"EXISTS", "wr:{u}:1"}).integer == 0);
  // auto writes the same batch with plain Redis instead.
  o.mode = WriteMode::kAuto;
  RedisBitWriter auto_writer(o);
  REQUIRE(auto_writer.Write(batch, nullptr).ok());
  CHECK(auto_writer.mode() == WriteMode::kBitop);
  CHECK(Cmd(*conn, {"GET", "wr:{u}:1"}).str == std::string("\x70", 1));
}

// Issue 26 item 2: the replica check ran only when the writer connected. A
// replica without the module attached later rejected every EF.SETBITS of its
// master ("unknown command") and held none of those keys, while WAIT still
// counted it. Now a change of the replica set is seen at the next write: auto
// writes with plain Redis from then on (the batch again), module refuses.
TEST_CASE(
    "write modes: a replica without the module attached while writing with EF.SETBITS is "
    "noticed at the next write",
    "[module][write_mode]") {
  for (WriteMode mode : {WriteMode::kAuto, WriteMode::kModule}) {
    INFO("mode " << static_cast<int>(mode));
    auto master = ServerWithModule();
    BitWriterOptions o;
    o.redis.port = master->port();
    o.mode = mode;
    RedisBitWriter writer(o);
    auto batch_of = [](const std::string& key) {
      BitBatch batch;
      KeyBits kb;
      kb.key = key;
      kb.expire_at = kExpireAt;
      kb.positions = {1, 2, 3};
      batch.keys.push_back(kb);
      batch.size = 1;
      return batch;
    };
    REQUIRE(writer.Write(batch_of("wr:{u}:1"), nullptr).ok());
    REQUIRE(writer.mode() == WriteMode::kModule);

    RedisServer replica;  // no module
    replica.ReplicaOf(master.get());
    REQUIRE(replica.AwaitInSync(*master, std::chrono::seconds(20)));
    // The write that finds the new replica copies its keys to it...
    const Status second = writer.Write(batch_of("wr:{u}:2"), nullptr);
    INFO(second.message());
    REQUIRE(second.ok());
    REQUIRE(replica.AwaitInSync(*master, std::chrono::seconds(20)));
    auto replica_conn = replica.Connect();
    CHECK(Cmd(*replica_conn, {"GET", "wr:{u}:1"}).str == std::string("\x70", 1));
    CHECK(Cmd(*replica_conn, {"GET", "wr:{u}:2"}).str == std::string("\x70", 1));
    CHECK(Cmd(*replica_conn, {"EXPIRETIME", "wr:{u}:2"}).integer == kExpireAt);
    // ... and the next one probes it first.
    const Status third = writer.Write(batch_of("wr:{u}:3"), nullptr);
    INFO(third.message());
    if (mode == WriteMode::kAuto) {
      REQUIRE(third.ok());
      CHECK(writer.mode() == WriteMode::kBitop);
      REQUIRE(replica.AwaitInSync(*master, std::chrono::seconds(20)));
      CHECK(Cmd(*replica_conn, {"GET", "wr:{u}:3"}).str == std::string("\x70", 1));
    } else {
      CHECK(third.code() == StatusCode::kUnavailable);
      CHECK(third.message().find("replica") != std::string::npos);
      CHECK(Cmd(*replica_conn, {"EXISTS", "wr:{u}:3"}).integer == 0);
    }
  }
}

TEST_CASE("write modes: module mode puts the meta back after a FLUSHALL behind its back",
          "[module][write_mode]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  FilterConfig f;
  f.layout_version = 2;  // version 2: the write modes, not the position rule
  f.items_per_bucket = 10;
  f.key_prefix = "wf:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  BitWriterOptions o;
  o.redis.port = redis->port();
  o.mode = WriteMode::kModule;
  o.layout = *l;
  o.module_meta_check_s = 0;  // every Write
  RedisBitWriter writer(o);
  BitBatch batch;
  batch.keys.push_back(ItemsKey(*l, "wf:{u}:20400", "a", 3));
  batch.size = 1;
  REQUIRE(writer.Write(batch, nullptr).ok());
  CHECK(Cmd(*conn, {"EXISTS", "wf:meta"}).integer == 1);
  Cmd(*conn, {"FLUSHALL"});
  REQUIRE(writer.Write(batch, nullptr).ok());
  CHECK(Cmd(*conn, {"EXISTS", "wf:meta"}).integer == 1);
  CHECK(Cmd(*conn, {"EXPIRETIME", "wf:{u}:20400"}).integer == kExpireAt);
}

// Issue 26 item 4: EF.SETBITS refuses an expiry that is not in the future, and
// the writer retried that error for ever: after an outage across a bucket's
// expiry the pipeline never moved again. In every mode a key whose bucket has
// expired is dropped (counted), and the rest of the batch is written.
TEST_CASE(
    "write modes: a key whose expiry has passed is dropped and counted in every mode, "
    "never retried for ever",
    "[module][write_mode]") {
  FilterConfig f;
  f.layout_version = 2;  // version 2: the write modes, not the position rule
  f.items_per_bucket = 10;
  f.key_prefix = "wx:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  for (WriteMode mode : {WriteMode::kModule, WriteMode::kAuto, WriteMode::kBitfield,
                         WriteMode::kBitop, WriteMode::kSetbit}) {
    INFO("mode " << static_cast<int>(mode));
    auto redis = ServerWithModule();
    auto conn = redis->Connect();
    BitWriterOptions o;
    o.redis.port = redis->port();
    o.mode = mode;
    o.bitop_threshold = 0;  // bitop: every key through MULTI/BITOP
    o.layout = *l;
    RedisBitWriter writer(o);
    const int64_t past = ServerNowMs(*conn) / 1000 - 5;
    BitBatch batch;
    batch.keys.push_back(ItemsKey(*l, "wx:{late}:20400", "a", 3, past));
    batch.keys.push_back(ItemsKey(*l, "wx:{fresh}:20400", "b", 3));
    batch.size = 2;
    WriteStats stats;
    const Status st = writer.Write(batch, &stats);
    INFO(st.message());
    REQUIRE(st.ok());
    CHECK(stats.expired_keys == 1);
    CHECK(Cmd(*conn, {"EXISTS", "wx:{late}:20400"}).integer == 0);
    CHECK(Cmd(*conn, {"EXPIRETIME", "wx:{fresh}:20400"}).integer == kExpireAt);
    // The same batch again (a redelivery): still written, still no error.
    REQUIRE(writer.Write(batch, &stats).ok());
  }
}

namespace {

// Zipf-distributed events (50,000 users, per_batch events per batch coalesced
// per key, k = 12), as the Redis CPU benchmark below writes them.
Layout ZipfLayout() {
  Layout l;
  l.m = 1917;
  l.k = 12;
  l.seed = 7;
  return l;
}

std::vector<BitBatch> ZipfWork(const Layout& l, int batches, int per_batch) {
  const int users = 50000;
  std::vector<double> cdf(users);
  double sum = 0;
  for (int u = 0; u < users; ++u) cdf[u] = (sum += 1.0 / (u + 1));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uni(0, sum);
  std::vector<BitBatch> work;
  for (int b = 0; b < batches; ++b) {
    std::map<int, KeyBits> keys;
    std::vector<uint32_t> pos(l.k);
    for (int e = 0; e < per_batch; ++e) {
      const int u =
          static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), uni(rng)) - cdf.begin());
      KeyBits& kb = keys[u];
      kb.key = "wb:{u" + std::to_string(u) + "}:20400";
      kb.expire_at = kExpireAt;
      ComputePositions(HashItem(std::to_string(rng()), l.seed), l.m, l.k, pos.data());
      kb.positions.insert(kb.positions.end(), pos.begin(), pos.end());
    }
    BitBatch batch;
    for (auto& [u, kb] : keys) {
      std::sort(kb.positions.begin(), kb.positions.end());
      kb.positions.erase(std::unique(kb.positions.begin(), kb.positions.end()), kb.positions.end());
      batch.keys.push_back(std::move(kb));
    }
    batch.size = batch.keys.size();
    work.push_back(std::move(batch));
  }
  return work;
}

}  // namespace

// The correctness part of the hidden benchmark below, registered: its Zipf
// batches (thousands of keys, 4,000 events each) written by every mode leave
// exactly the bits of their positions (each value built here from the positions,
// bit p as GETBIT numbers it) and the batches' expiry.
TEST_CASE("write modes: the benchmark's Zipf batches are written exactly by every mode",
          "[module][write_mode]") {
  const std::vector<BitBatch> work = ZipfWork(ZipfLayout(), 2, 4000);
  std::map<std::string, std::string> expected;
  for (const BitBatch& batch : work) {
    for (size_t i = 0; i < batch.size; ++i) {
      std::string& value = expected[batch.keys[i].key];
      for (uint32_t p : batch.keys[i].positions) {
        if (value.size() <= p / 8) value.resize(p / 8 + 1, '\0');
        value[p / 8] = static_cast<char>(value[p / 8] | (0x80 >> (p % 8)));
      }
    }
  }
  REQUIRE(expected.size() > 1000);
  for (WriteMode mode :
       {WriteMode::kBitfield, WriteMode::kModule, WriteMode::kBitop, WriteMode::kSetbit}) {
    INFO("mode " << WriteModeName(mode));
    auto redis = ServerWithModule();
    BitWriterOptions o;
    o.redis.port = redis->port();
    o.mode = mode;
    RedisBitWriter writer(o);
    for (const BitBatch& batch : work) {
      const Status st = writer.Write(batch, nullptr);
      INFO(st.message());
      REQUIRE(st.ok());
    }
    auto conn = redis->Connect();
    const auto dump = Dump(*conn);
    CHECK(dump.size() == expected.size());
    size_t wrong = 0;
    for (const auto& [key, value] : expected) {
      auto it = dump.find(key);
      const bool right =
          it != dump.end() && it->second.first == Hex(value) && it->second.second == kExpireAt;
      if (!right && wrong++ < 3) {
        INFO("key " << key);
        CHECK(right);
      }
    }
    CHECK(wrong == 0);
  }
}

// Not a test (hidden, tag [.bench]): Redis CPU per event of each mode, the same
// Zipf-distributed events (50,000 users, 4,000 events per batch coalesced per
// key, k = 12), each mode into a fresh server with the module loaded. Its
// correctness checks run registered, above.
TEST_CASE("write modes: Redis CPU per event", "[.bench]") {
  const Layout l = ZipfLayout();
  const int batches = 60, per_batch = 4000;
  const std::vector<BitBatch> work = ZipfWork(l, batches, per_batch);
  auto cpu = [](RedisConnection& c) {
    const std::string info = Cmd(c, {"INFO", "cpu"}).str;
    auto field = [&info](const std::string& name) {
      const size_t at = info.find(name + ":");
      return std::stod(info.substr(at + name.size() + 1));
    };
    return field("used_cpu_user") + field("used_cpu_sys");
  };
  for (WriteMode mode :
       {WriteMode::kBitfield, WriteMode::kModule, WriteMode::kBitop, WriteMode::kSetbit}) {
    auto redis = ServerWithModule();
    auto conn = redis->Connect();
    BitWriterOptions o;
    o.redis.port = redis->port();
    o.mode = mode;
    RedisBitWriter writer(o);
    REQUIRE(writer.Write(work.front(), nullptr).ok());  // connect, warm up
    const double before = cpu(*conn);
    const auto start = std::chrono::steady_clock::now();
    for (size_t b = 1; b < work.size(); ++b) REQUIRE(writer.Write(work[b], nullptr).ok());
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    const double used = cpu(*conn) - before;
    const double events = static_cast<double>(per_batch) * (batches - 1);
    WARN(WriteModeName(mode) << ": Redis CPU " << used * 1e6 / events
                             << " s per million events; writes took " << wall.count() * 1e6 / events
                             << " us/event of wall time");
  }
}

}  // namespace ef::test
