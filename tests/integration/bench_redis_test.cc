// `exposure-filter bench-redis` against a real redis-server: the JSON summary,
// the bits and expiries it leaves (byte for byte those of the daemon's write
// path for the same events), and the refusal to write into a db that already
// holds keys with the prefix.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/duration.h"
#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"
#include "loadgen/generator.h"
#include "pipeline/coalescer.h"
#include "redis/connection.h"
#include "redis/options.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

SplitRunResult BenchRedis(const std::string& redis_address, std::vector<std::string> extra) {
  std::vector<std::string> argv = {EF_BINARY, "bench-redis", "--set",
                                   "redis.address=" + redis_address};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunCommandWithEnv(argv, {}, "", 120s);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The generator options of a bench-redis JSON summary (EventGenerator is
// deterministic for a seed: the same options give the same events).
GeneratorOptions GeneratorOptionsOf(const nlohmann::json& summary) {
  GeneratorOptions o;
  o.users = summary.at("users").get<uint64_t>();
  o.items = summary.at("item_ids").get<uint64_t>();
  o.zipf_s = summary.at("zipf").get<double>();
  o.list_size = summary.at("list_size").get<int>();
  o.list_fraction = summary.at("list_fraction").get<double>();
  o.seed = summary.at("seed").get<uint64_t>();
  auto spread = ParseDurationMs(summary.at("spread").get<std::string>());
  REQUIRE(spread.ok());
  o.spread_ms = *spread;
  return o;
}

// The first `n` events bench-redis generated, from the generator options of its
// JSON summary. Event times are drawn again from now, not the run's now: a
// reader checks every live bucket.
std::vector<TestEvent> GeneratedEvents(const nlohmann::json& summary, int n) {
  EventGenerator gen(GeneratorOptionsOf(summary));
  GeneratedEvent ev;
  std::vector<TestEvent> out;
  const int64_t now_ms = SystemClock().NowMs();
  for (int i = 0; i < n; ++i) {
    gen.Next(now_ms, &ev);
    const auto payload = nlohmann::json::parse(ev.payload);
    TestEvent e;
    e.user = payload.at("user_id").get<std::string>();
    if (payload.contains("items")) {
      e.items = payload.at("items").get<std::vector<std::string>>();
    } else {
      e.items = {payload.at("item_id").get<std::string>()};
    }
    e.ts_ms = ev.ts_ms;
    out.push_back(std::move(e));
  }
  return out;
}

// What the daemon's write path writes into `redis` for the events of a
// bench-redis run (its JSON summary): the same generated events, at `now_ms`,
// decoded (Decoder) and coalesced (Coalescer) in batches of the run's
// batch_events, each written in order by one RedisBitWriter with the default
// config's options (redis.* and filter.* as `run` takes them).
void WriteAsTheDaemon(const RedisServer& redis, const nlohmann::json& summary, int64_t now_ms) {
  Config config;
  config.redis.address = redis.address();
  auto layout = LayoutFromConfig(config.filter);
  REQUIRE(layout.ok());
  auto options = RedisOptionsFromConfig(config.redis);
  REQUIRE(options.ok());
  RedisBitWriter writer(BitWriterOptionsFromConfig(config.redis, *options, *layout));
  EventGenerator gen(GeneratorOptionsOf(summary));
  Decoder decoder(config.events, config.filter);
  Coalescer coalescer(*layout);
  const uint64_t events = summary.at("events").get<uint64_t>();
  const uint64_t batch_events = summary.at("batch_events").get<uint64_t>();
  REQUIRE(batch_events > 0);
  GeneratedEvent ev;
  Event event;
  for (uint64_t done = 0; done < events;) {
    const uint64_t end = std::min(events, done + batch_events);
    for (; done < end; ++done) {
      gen.Next(now_ms, &ev);
      INFO("event " << done << ": " << ev.payload);
      REQUIRE(decoder.Decode(ev.payload.data(), ev.payload.size(), ev.ts_ms, now_ms, &event) ==
              RejectReason::kNone);
      coalescer.Add(event);
    }
    coalescer.Seal();
    WriteStats stats;
    const Status st = writer.Write(coalescer.batch(), &stats);
    INFO(st.message());
    REQUIRE(st.ok());
    coalescer.Clear();
  }
}

// Every bucket key under `prefix` (not the meta) with its value and EXPIRETIME.
struct StoredKeys {
  std::map<std::string, std::string> values;
  std::map<std::string, long long> expire_at;
};

StoredKeys ReadKeys(const RedisServer& redis, const std::string& prefix) {
  StoredKeys out;
  const RedisReply keys = redis.Command({"KEYS", prefix + "{*"});
  REQUIRE(keys.type == RedisReply::Type::kArray);
  auto conn = redis.Connect();
  constexpr size_t kPerRound = 500;
  for (size_t at = 0; at < keys.elements.size(); at += kPerRound) {
    std::vector<std::vector<std::string>> commands;
    for (size_t i = at; i < std::min(keys.elements.size(), at + kPerRound); ++i) {
      commands.push_back({"GET", keys.elements[i].str});
      commands.push_back({"EXPIRETIME", keys.elements[i].str});
    }
    std::vector<RedisReply> replies;
    REQUIRE(conn->Commands(commands, &replies).ok());
    REQUIRE(replies.size() == commands.size());
    for (size_t c = 0; c < commands.size(); c += 2) {
      const std::string& key = commands[c][1];
      INFO("key " << key);
      REQUIRE(replies[c].type == RedisReply::Type::kString);
      REQUIRE(replies[c + 1].type == RedisReply::Type::kInteger);
      out.values[key] = replies[c].str;
      out.expire_at[key] = replies[c + 1].integer;
    }
  }
  return out;
}

// The bit offsets (GETBIT numbering) set in one value and not in the other.
std::string BitDifference(const std::string& a, const std::string& b) {
  std::string out;
  for (size_t byte = 0; byte < std::max(a.size(), b.size()); ++byte) {
    const unsigned x = byte < a.size() ? static_cast<unsigned char>(a[byte]) : 0u;
    const unsigned y = byte < b.size() ? static_cast<unsigned char>(b[byte]) : 0u;
    for (unsigned bit = 0; bit < 8; ++bit) {
      const unsigned mask = 0x80u >> bit;
      if ((x & mask) == (y & mask)) continue;
      out += " " + std::to_string(byte * 8 + bit) + ((x & mask) ? "+" : "-");
    }
  }
  return out;
}

TEST_CASE("bench-redis: writes the daemon's bits and refuses a db with keys of the prefix",
          "[integration][bench_redis]") {
  RedisServer redis;
  auto r = BenchRedis(redis.address(), {"--events", "20000", "--json"});
  INFO("exit code " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  // --json: exactly one line on stdout, the summary.
  REQUIRE(!r.out.empty());
  CHECK(r.out.find('\n') == r.out.size() - 1);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("bench") == "redis_ceiling");
  CHECK(j.at("events").get<uint64_t>() == 20000);
  CHECK(j.at("events_rejected").get<uint64_t>() == 0);
  CHECK(j.at("events_per_second").get<double>() > 0);
  CHECK(j.at("commands").get<uint64_t>() > 0);
  CHECK(j.at("keys").get<uint64_t>() > 0);
  CHECK(j.at("bits").get<uint64_t>() >= j.at("keys").get<uint64_t>());
  CHECK(j.at("items").get<uint64_t>() >= 20000);
  CHECK(j.at("redis_cpu_seconds").get<double>() > 0);  // Redis did the writing

  // The bits are there, under the prefix, each key with its expiry.
  const RedisReply keys = redis.Command({"KEYS", "ef:{*"});
  REQUIRE(keys.type == RedisReply::Type::kArray);
  REQUIRE(!keys.elements.empty());
  const std::string sample = keys.elements.front().str;
  INFO("sample key " << sample);
  CHECK(redis.Command({"TYPE", sample}).str == "string");
  const RedisReply expire = redis.Command({"EXPIRETIME", sample});
  REQUIRE(expire.type == RedisReply::Type::kInteger);
  CHECK(expire.integer > static_cast<long long>(std::time(nullptr)));
  CHECK(redis.Command({"EXISTS", "ef:meta"}).integer == 1);

  // The bits of known items: the first 2,000 events generated (bench-redis
  // writes them all), read back by the reader, not the writer under test.
  const std::vector<TestEvent> known = GeneratedEvents(j, 2000);
  const auto missing = MissingItems(*redis.Connect(), DefaultTestLayout(), known);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());

  // A second run would write into existing data: refused, naming the way out.
  auto again = BenchRedis(redis.address(), {"--events", "20000", "--json"});
  INFO("second run: exit code " << again.code << "\nstdout: " << again.out
                                << "\nstderr: " << again.err);
  CHECK_FALSE(again.timed_out);
  CHECK(again.code != 0);
  CHECK(again.out.empty());
  CHECK(Contains(again.err, "--allow-existing"));
  CHECK(Contains(again.err, redis.address()));

  // ... unless asked for.
  auto allowed = BenchRedis(redis.address(), {"--events", "2000", "--json", "--allow-existing"});
  INFO("--allow-existing run: exit code " << allowed.code << "\nstderr: " << allowed.err);
  CHECK(allowed.code == 0);
  CHECK(nlohmann::json::parse(allowed.out).at("events").get<uint64_t>() == 2000);
}

// Issue 47: a bench-redis that set one extra bit in every key passed the test
// above (its items still read as seen). Here every key bench-redis leaves must
// hold, byte for byte, the value the daemon's write path writes for the same
// events, with the same expiry. --spread 0: every event is stamped with the
// clock of its batch, so both runs write the bucket of now, and the test knows
// every event's key (a run across a bucket boundary is done again). One
// connection, so that the batches are written in order, as the daemon does.
TEST_CASE(
    "bench-redis: every key holds byte for byte what the daemon's writer writes for the same "
    "events",
    "[integration][bench_redis]") {
  RedisServer bench_redis;
  RedisServer daemon_redis;
  auto layout = LayoutFromConfig(Config{}.filter);
  REQUIRE(layout.ok());
  nlohmann::json j;
  bool one_bucket = false;
  for (int attempt = 0; attempt < 2 && !one_bucket; ++attempt) {
    CHECK(bench_redis.Command({"FLUSHALL"}).str == "OK");
    CHECK(daemon_redis.Command({"FLUSHALL"}).str == "OK");
    const int64_t start_s = SystemClock().NowMs() / 1000;
    auto r = BenchRedis(bench_redis.address(), {"--events", "20000", "--spread", "0", "--batch",
                                                "2000", "--connections", "1", "--json"});
    INFO("exit code " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE_FALSE(r.timed_out);
    REQUIRE(r.code == 0);
    j = nlohmann::json::parse(r.out);
    REQUIRE(j.at("events_rejected").get<uint64_t>() == 0);
    REQUIRE(j.at("connections").get<uint64_t>() == 1);
    REQUIRE(j.at("batch_events").get<uint64_t>() == 2000);
    REQUIRE(j.at("batches").get<uint64_t>() == 10);
    WriteAsTheDaemon(daemon_redis, j, SystemClock().NowMs());
    const int64_t end_s = SystemClock().NowMs() / 1000;
    one_bucket =
        BucketStart(start_s, layout->bucket_seconds) == BucketStart(end_s, layout->bucket_seconds);
  }
  REQUIRE(one_bucket);

  const StoredKeys bench = ReadKeys(bench_redis, layout->prefix);
  const StoredKeys daemon = ReadKeys(daemon_redis, layout->prefix);
  INFO(bench.values.size() << " keys written by bench-redis, " << daemon.values.size()
                           << " by the daemon's writer");
  REQUIRE(!daemon.values.empty());
  // Not only stage 0: the busiest users' keys hold later stages too, so the
  // stage placement is compared as well.
  size_t longest = 0;
  for (const auto& [key, value] : daemon.values) longest = std::max(longest, value.size());
  CHECK(longest > (layout->stage_table.at(1).offset + 7) / 8);

  size_t only_bench = 0, only_daemon = 0, value_differs = 0, expiry_differs = 0;
  std::string first_difference;
  for (const auto& [key, value] : bench.values) {
    const auto it = daemon.values.find(key);
    if (it == daemon.values.end()) {
      if (first_difference.empty()) first_difference = key + ": written by bench-redis only";
      ++only_bench;
      continue;
    }
    if (value != it->second) {
      if (first_difference.empty())
        first_difference =
            key + ": " + std::to_string(value.size()) + " bytes against " +
            std::to_string(it->second.size()) +
            ", bits set (+) or missing (-) in bench-redis's:" + BitDifference(value, it->second);
      ++value_differs;
    }
    if (bench.expire_at.at(key) != daemon.expire_at.at(key)) {
      if (first_difference.empty())
        first_difference = key + ": EXPIRETIME " + std::to_string(bench.expire_at.at(key)) +
                           " against " + std::to_string(daemon.expire_at.at(key));
      ++expiry_differs;
    }
  }
  for (const auto& [key, value] : daemon.values) {
    if (bench.values.count(key) != 0) continue;
    if (first_difference.empty()) first_difference = key + ": written by the daemon's writer only";
    ++only_daemon;
  }
  INFO("first difference: " << first_difference);
  CHECK(only_bench == 0);
  CHECK(only_daemon == 0);
  CHECK(value_differs == 0);
  CHECK(expiry_differs == 0);
  // The meta each stored, as the daemon stores it.
  const RedisReply bench_meta = bench_redis.Command({"HGETALL", MetaKey(layout->prefix)});
  const RedisReply daemon_meta = daemon_redis.Command({"HGETALL", MetaKey(layout->prefix)});
  std::map<std::string, std::string> bm, dm;
  for (size_t i = 0; i + 1 < bench_meta.elements.size(); i += 2)
    bm[bench_meta.elements[i].str] = bench_meta.elements[i + 1].str;
  for (size_t i = 0; i + 1 < daemon_meta.elements.size(); i += 2)
    dm[daemon_meta.elements[i].str] = daemon_meta.elements[i + 1].str;
  CHECK(!bm.empty());
  CHECK(bm == dm);
}

TEST_CASE("bench-redis: an unreachable Redis is one error line naming its address",
          "[integration][bench_redis]") {
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto r = BenchRedis(address, {"--events", "100", "--set", "redis.connect_timeout=500ms"});
  INFO("exit code " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 6);  // app::kExitUnreachable
  CHECK(r.out.empty());
  CHECK(Contains(r.err, address));
}

TEST_CASE("bench-redis: a bad --spread is a usage error", "[integration][bench_redis]") {
  auto r = BenchRedis("127.0.0.1:1", {"--spread", "two days"});
  INFO("exit code " << r.code << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(Contains(r.err, "--spread"));
}

}  // namespace
}  // namespace ef::test
