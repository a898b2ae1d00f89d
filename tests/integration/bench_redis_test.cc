// `exposure-filter bench-redis` against a real redis-server: the JSON summary,
// the bits and expiries it leaves, and the refusal to write into a db that
// already holds keys with the prefix.
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/redis_server.h"
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
  CHECK(j.at("redis_cpu_seconds").get<double>() >= 0);

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
