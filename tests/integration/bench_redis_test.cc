// `exposure-filter bench-redis` against a real redis-server: the JSON summary,
// the bits and expiries it leaves, and the refusal to write into a db that
// already holds keys with the prefix.
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/duration.h"
#include "loadgen/generator.h"
#include "redis/connection.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"

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

// The first `n` events bench-redis generated, from the generator options of its
// JSON summary (EventGenerator is deterministic for a seed). Event times are
// drawn again from now, not the run's now: a reader checks every live bucket.
std::vector<TestEvent> GeneratedEvents(const nlohmann::json& summary, int n) {
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
  EventGenerator gen(o);
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
