// Contract v1 revision 2, rule 4 (docs/FORMAT.md): all keys of a user are in one
// Redis Cluster slot. A user ID starting with '}' would make the hash tag empty,
// so such IDs are rejected by the decoder and refused by readers. Issue 9, defect 9.
#include <prometheus/registry.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"
#include "metrics/ingest_metrics.h"
#include "pipeline/ingest.h"
#include "read/bloom_reader.h"
#include "redis/connection.h"
#include "support/fakes.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef {
namespace {

// 2025-11-23T00:00:00.500Z.
constexpr int64_t kNowMs = 1763856000500;
constexpr int64_t kDayS = 86400;

// CRC16-CCITT (XMODEM: poly 0x1021, init 0, no reflection) of `bytes`, mod 16384:
// the slot of a key without a hash tag.
uint16_t Crc16Slot(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) {
    crc ^= static_cast<uint16_t>(c << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc & 16383;
}

// The Redis Cluster specification's key slot, written out independently of the
// code under test: the CRC16 slot of the hash tag if the key has a non-empty one
// (the bytes between the first '{' and the first '}' after it), else of the
// whole key.
uint16_t SpecSlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16Slot(key);
}

TEST_CASE("SpecSlot (test reference) reproduces the cluster spec's CRC16 test value",
          "[contract]") {
  // The spec: CRC16 of "123456789" is 0x31C3; 0x31C3 & 16383 = 12739.
  CHECK(Crc16Slot("123456789") == (0x31C3 & 16383));
  CHECK(SpecSlot("123456789") == (0x31C3 & 16383));
  // The spec's hash tag examples.
  CHECK(SpecSlot("{user1000}.following") == Crc16Slot("user1000"));
  CHECK(SpecSlot("foo{{bar}}zap") == Crc16Slot("{bar"));
  CHECK(SpecSlot("foo{bar}{zap}") == Crc16Slot("bar"));
  // An empty tag: the whole key is hashed, not the "bar" of a later tag.
  CHECK(SpecSlot("foo{}{bar}") == Crc16Slot("foo{}{bar}"));
  CHECK(SpecSlot("foo{}{bar}") == 8363);  // CLUSTER KEYSLOT foo{}{bar} (see the KeySlot test)
  CHECK(SpecSlot("foo{}{bar}") != SpecSlot("bar"));
  CHECK(SpecSlot("foo{bar}") != Crc16Slot("foo{bar}"));
}

TEST_CASE("Contract: every user ID the decoder accepts has all its bucket keys in one slot",
          "[contract]") {
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder(events, filter);
  // JSON user values: plain, braces in every position, escaped braces, integers;
  // true: accepted (a user ID that starts with '}' is not).
  const std::vector<std::pair<std::string, bool>> users = {
      {R"("u1")", true},  {R"("}x")", false},      {R"("}")", false},
      {R"("}}")", false}, {R"("a}b")", true},      {R"("a}")", true},
      {R"("{x}")", true}, {R"("{")", true},        {R"("x{")", true},
      {R"("{}")", true},  {R"("\u007dx")", false}, {R"("}{x}")", false},
      {R"("{}x")", true}, {R"("a}}b")", true},     {"42", true},
      {R"("ü}")", true}};
  const int64_t now_s = kNowMs / 1000;
  const std::vector<int64_t> buckets = LiveBuckets(now_s, filter.window_seconds, kDayS);
  size_t accepted = 0, expected_accepted = 0;
  for (const auto& [user, accept] : users) {
    INFO("user_id " << user);
    expected_accepted += accept;
    const std::string payload =
        "{\"user_id\":" + user + ",\"item_id\":\"i\",\"ts\":" + std::to_string(kNowMs) + "}";
    Event event;
    const RejectReason r = decoder.Decode(payload.data(), payload.size(), 0, kNowMs, &event);
    CHECK((r == RejectReason::kNone) == accept);
    if (r != RejectReason::kNone) continue;
    ++accepted;
    const uint16_t slot = SpecSlot(MakeKey(filter.key_prefix, event.user, buckets.front(), kDayS));
    for (int64_t b : buckets) {
      const std::string key = MakeKey(filter.key_prefix, event.user, b, kDayS);
      INFO("key " << key);
      CHECK(SpecSlot(key) == slot);
    }
  }
  // A decoder that rejected everything would check no key at all.
  CHECK(accepted == expected_accepted);
}

TEST_CASE("Decoder: a user ID starting with '}' is user_leading_brace - other braces are fine",
          "[contract][event]") {
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder(events, filter);
  const auto decode = [&](const std::string& user_json, const std::string& rest) {
    const std::string payload = "{\"user_id\":" + user_json + rest + "}";
    Event event;
    return decoder.Decode(payload.data(), payload.size(), 0, kNowMs, &event);
  };
  const std::string good = ",\"item_id\":\"i\",\"ts\":" + std::to_string(kNowMs);
  for (const char* user :
       {R"("}x")", R"("}")", R"("}}")", R"("\u007dx")", R"("}{x}")", R"("} ")"}) {
    INFO("user_id " << user);
    CHECK(decode(user, good) == RejectReason::kUserLeadingBrace);
    // A user reason: ranked after not_json, before the items and the time.
    CHECK(decode(user, ",\"ts\":" + std::to_string(kNowMs)) == RejectReason::kUserLeadingBrace);
    CHECK(decode(user, ",\"item_id\":\"i\",\"ts\":-1") == RejectReason::kUserLeadingBrace);
    CHECK(decode(user, ",\"item_id\":\"i\",\"x\":[1 2]") == RejectReason::kNotJson);
  }
  for (const char* user :
       {R"("a}")", R"("a}b")", R"("{x}")", R"("{}")", R"("{")", R"(" }")", "7"}) {
    INFO("user_id " << user);
    CHECK(decode(user, good) == RejectReason::kNone);
  }
  CHECK(std::string(RejectReasonName(RejectReason::kUserLeadingBrace)) == "user_leading_brace");
}

TEST_CASE(
    "Ingest: a '}'-first user's event is counted by reason, dead-lettered, committed, "
    "and writes nothing",
    "[contract][pipeline]") {
  testing::FakeSource source("exposures", 1);
  testing::FakeSink sink;
  testing::FakeClock clock(kNowMs);
  prometheus::Registry registry;
  IngestMetrics metrics(registry);
  testing::FakeRejectSink rejects;
  rejects.deliver_on_flush = true;
  FilterConfig filter;
  StatusOr<Layout> layout = LayoutFromConfig(filter);
  REQUIRE(layout.ok());
  Decoder decoder(EventsConfig{}, filter);
  IngestOptions options;
  options.batch_max_wait_ms = 0;
  options.poll_timeout_ms = 0;
  options.commit_interval_ms = 0;
  Ingest ingest(source, sink, decoder, *layout, clock, &metrics, options, &rejects);
  const std::string ts = std::to_string(kNowMs);
  source.Append(0, R"({"user_id":"}x","item_id":"i","ts":)" + ts + "}", kNowMs);
  source.Append(0, R"({"user_id":"a}b","item_id":"i","ts":)" + ts + "}", kNowMs);
  std::atomic<bool> stop{false};
  for (int i = 0; i < 10 && (source.Unconsumed() > 0 || ingest.pending()); ++i) {
    REQUIRE(ingest.Step(stop).ok());
  }
  REQUIRE(ingest.CommitAcked(true).ok());
  CHECK(ingest.totals().events_rejected == 1);
  CHECK(ingest.totals().events_written == 1);
  REQUIRE(rejects.sent().size() == 1);
  CHECK(rejects.sent()[0].offset == 0);
  CHECK(rejects.sent()[0].reason == RejectReason::kUserLeadingBrace);
  CHECK(metrics.rejected_by_reason[static_cast<size_t>(RejectReason::kUserLeadingBrace)]->Value() ==
        1);
  // The reason is a label of the rejects counter, like every other reason.
  bool labelled = false;
  for (const auto& family : registry.Collect()) {
    if (family.name != "exposure_filter_events_rejected_total") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "reason" && label.value == "user_leading_brace") {
          labelled = true;
          CHECK(metric.counter.value == 1);
        }
      }
    }
  }
  CHECK(labelled);
  const std::string good_key =
      MakeKey(layout->prefix, "a}b", BucketStart(kNowMs / 1000, layout->bucket_seconds),
              layout->bucket_seconds);
  CHECK(sink.keys() == std::vector<std::string>{good_key});
  CHECK(source.committed().at(TopicPartition{"exposures", 0}) == 2);
}

TEST_CASE("IsValidUserId / CheckUserId: non-empty, first byte not '}'", "[contract]") {
  CHECK(IsValidUserId("u1"));
  CHECK(IsValidUserId("a}b"));
  CHECK(IsValidUserId("{"));
  CHECK_FALSE(IsValidUserId(""));
  CHECK_FALSE(IsValidUserId("}"));
  CHECK_FALSE(IsValidUserId("}x"));
  CHECK(CheckUserId("a}b").ok());
  const Status st = CheckUserId("}x");
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("\"}x\"") && Catch::Contains("starts with '}'"));
  CHECK(CheckUserId("").code() == StatusCode::kInvalidArgument);
  // Control bytes in the ID are escaped in the message, not printed raw.
  CHECK_THAT(CheckUserId("}\r\nforged").message(), Catch::Contains("}\\r\\nforged"));
}

TEST_CASE("KeySlot follows the cluster spec: CRC16 test value, hash tags, FORMAT.md vectors",
          "[contract]") {
  // The spec's CRC16 check value: CRC16("123456789") = 0x31C3.
  CHECK(KeySlot("123456789") == (0x31C3 & 16383));
  // docs/FORMAT.md, rule 4 test vectors (checked against redis-server 7.0 CLUSTER
  // KEYSLOT, and by the cluster test below).
  CHECK(KeySlot("ef:{u1}:20251122") == 4574);
  CHECK(KeySlot("ef:{u1}:20251123") == 4574);
  CHECK(KeySlot("ef:{u1}:2025112208") == 4574);
  CHECK(KeySlot("ef:{a}b}:20251122") == 15495);
  CHECK(KeySlot("ef:{a}c}:20251122") == 15495);
  CHECK(KeySlot("ef:{}x}:20251122") == 8951);
  CHECK(KeySlot("ef:{}x}:20251123") == 13014);
  CHECK(KeySlot("ef:meta") == 15057);
  // The cluster spec's example of an empty tag: "foo{}{bar}" hashes the whole key,
  // not "bar" (slot 5061). 8363 is what `CLUSTER KEYSLOT foo{}{bar}` answered on
  // redis-server 7.0.15 (cluster-enabled), and CRC16/XMODEM("foo{}{bar}") = 0xE0AB
  // (57515, by a separate Python CRC16), 57515 mod 16384 = 8363.
  CHECK(KeySlot("foo{}{bar}") == 8363);
  // Against the independent reference, over keys with braces anywhere.
  std::mt19937_64 rng(9);
  const std::string alphabet = "{}ab:\x80\xff";
  for (int n = 0; n < 20000; ++n) {
    std::string key(static_cast<size_t>(rng() % 12), 'x');
    for (char& c : key) c = alphabet[rng() % alphabet.size()];
    INFO("key " << key);
    REQUIRE(KeySlot(key) == SpecSlot(key));
  }
}

TEST_CASE("PlanRead: one slot per valid user - a clear error for a user with no valid key",
          "[contract]") {
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const int64_t now_s = kNowMs / 1000;
  for (const char* user : {"u1", "a}b", "{x}", "{", "x{y"}) {
    INFO("user " << user);
    StatusOr<ReadPlan> plan = PlanRead(*layout, user, now_s);
    REQUIRE(plan.ok());
    REQUIRE(plan->keys.size() == plan->bucket_starts.size());
    for (const std::string& key : plan->keys) CHECK(KeySlot(key) == KeySlot(plan->keys[0]));
  }
  for (const char* user : {"}x", "}", ""}) {
    INFO("user " << user);
    StatusOr<ReadPlan> plan = PlanRead(*layout, user, now_s);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(plan.status().message(), Catch::Contains("user ID"));
  }
}

// A one-node Redis Cluster (all 16384 slots on it), to check KeySlot against
// CLUSTER KEYSLOT and MGET of a user's keys against CROSSSLOT.
class ClusterNode {
 public:
  // A free port whose cluster bus port (port + 10000) exists too: redis-server
  // refuses to start otherwise (a free port above 55535 made this test fail now
  // and then).
  static int ClientPort() { return test::FreeClusterPort(); }
  ClusterNode() : port_(ClientPort()) {
    process_ = std::make_unique<test::Process>(
        std::vector<std::string>{"redis-server", "--port", std::to_string(port_), "--bind",
                                 "127.0.0.1", "--dir", dir_.path(), "--cluster-enabled", "yes",
                                 "--cluster-config-file", dir_.File("nodes.conf"), "--save", "",
                                 "--appendonly", "no"},
        dir_.File("redis.log"));
    RedisOptions o;
    o.port = port_;
    o.connect_timeout_ms = 200;
    REQUIRE(test::WaitFor(
        [&] {
          auto c = RedisConnection::Connect(o);
          if (!c.ok()) return false;
          conn_ = std::move(c.value());
          return true;
        },
        std::chrono::seconds(10)));
    REQUIRE(Command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}).str == "OK");
    REQUIRE(test::WaitFor(
        [&] {
          return Command({"CLUSTER", "INFO"}).str.find("cluster_state:ok") != std::string::npos;
        },
        std::chrono::seconds(10)));
  }
  ~ClusterNode() { process_->Stop(SIGKILL, std::chrono::seconds(5)); }

  RedisReply Command(const std::vector<std::string>& args) {
    auto r = conn_->Command(args);
    REQUIRE(r.ok());
    return *r;
  }

 private:
  test::TempDir dir_;
  int port_;
  std::unique_ptr<test::Process> process_;
  std::unique_ptr<RedisConnection> conn_;
};

TEST_CASE(
    "Contract on a real Redis Cluster node: KeySlot = CLUSTER KEYSLOT - a valid user's "
    "keys MGET together, a '}'-first user's keys are CROSSSLOT",
    "[contract][redis]") {
  ClusterNode node;
  std::mt19937_64 rng(11);
  const std::string alphabet = "{}ab:u1\xc3\xbc";
  // FORMAT.md's vectors, then odd and random keys.
  std::vector<std::string> keys = {"123456789",
                                   "ef:{u1}:20251122",
                                   "ef:{u1}:20251123",
                                   "ef:{u1}:2025112208",
                                   "ef:{a}b}:20251122",
                                   "ef:{a}c}:20251122",
                                   "ef:{}x}:20251122",
                                   "ef:{}x}:20251123",
                                   "ef:meta",
                                   "{}",
                                   "}{",
                                   "{{}}"};
  for (int n = 0; n < 200; ++n) {
    std::string key(static_cast<size_t>(1 + rng() % 10), 'x');
    for (char& c : key) c = alphabet[rng() % alphabet.size()];
    keys.push_back(key);
  }
  for (const std::string& key : keys) {
    INFO("key " << key);
    const RedisReply r = node.Command({"CLUSTER", "KEYSLOT", key});
    REQUIRE(r.type == RedisReply::Type::kInteger);
    CHECK(r.integer == KeySlot(key));
  }

  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const int64_t now_s = kNowMs / 1000;
  for (const char* user : {"u1", "a}b", "{x}"}) {
    INFO("user " << user);
    StatusOr<ReadPlan> plan = PlanRead(*layout, user, now_s);
    REQUIRE(plan.ok());
    std::vector<std::string> mget = {"MGET"};
    mget.insert(mget.end(), plan->keys.begin(), plan->keys.end());
    const RedisReply r = node.Command(mget);
    CHECK(r.type == RedisReply::Type::kArray);
  }
  // What a reader would have sent for "}x" before the rule: refused by the cluster.
  std::vector<std::string> mget = {"MGET"};
  for (int64_t b : ReadBuckets(now_s, layout->window_seconds, layout->bucket_seconds)) {
    mget.push_back(MakeKey(layout->prefix, "}x", b, layout->bucket_seconds));
  }
  const RedisReply r = node.Command(mget);
  CHECK(r.type == RedisReply::Type::kError);
  CHECK_THAT(r.str, Catch::StartsWith("CROSSSLOT"));
}

}  // namespace
}  // namespace ef
