// Measurements behind docs/CONTENT.md "Choosing the tables" and docs/CAPACITY.md
// "Content index", hidden from the suite (tag [.measure]); run them with
//   build/ef_content_tests "[.measure]"
// or one of them by name. Sizes from the environment:
//   EF_CONTENT_MEASURE_ITEMS (default 1000000,10000000) for the table model,
//   EF_CONTENT_BENCH_ITEMS (default 1000000) and EF_CONTENT_BENCH_BLOCKS (5)
//   for the Redis benchmark.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "content/block_index.h"
#include "contentdb/index.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

std::vector<size_t> Sizes(const char* env, const char* fallback) {
  const char* v = std::getenv(env);
  std::stringstream in(v != nullptr ? v : fallback);
  std::vector<size_t> out;
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoull(part));
  return out;
}

// Candidates per probe (entries read from the probed buckets) of random probes
// against n random fingerprints, one table at a time (a sorted array of keys),
// and the entries' bytes per item in a model of 8-byte key + 4-byte item index.
TEST_CASE("measure: candidates per probe and memory per item by table count", "[.measure]") {
  const int k = 3;
  for (size_t n : Sizes("EF_CONTENT_MEASURE_ITEMS", "1000000,10000000")) {
    std::mt19937_64 rng(n);
    std::vector<uint64_t> fps(n);
    for (auto& fp : fps) fp = rng();
    std::vector<uint64_t> probes(100000);
    for (auto& p : probes) p = rng();
    for (int blocks = 4; blocks <= 8; ++blocks) {
      auto scheme = content::BlockScheme::Make(blocks, k);
      REQUIRE(scheme.ok());
      size_t candidates = 0, max_bucket = 0;
      std::vector<uint64_t> keys(n);
      for (int t = 0; t < scheme->tables(); ++t) {
        for (size_t i = 0; i < n; ++i) keys[i] = scheme->Key(t, fps[i]);
        std::sort(keys.begin(), keys.end());
        for (uint64_t p : probes) {
          auto [lo, hi] = std::equal_range(keys.begin(), keys.end(), scheme->Key(t, p));
          candidates += static_cast<size_t>(hi - lo);
          max_bucket = std::max(max_bucket, static_cast<size_t>(hi - lo));
        }
      }
      std::printf(
          "items %zu blocks %d tables %d key_bits %d-%d candidates/probe %.4f max_bucket %zu "
          "model_bytes/item %d\n",
          n, blocks, scheme->tables(), scheme->key_bits(scheme->tables() - 1), scheme->key_bits(0),
          double(candidates) / probes.size(), max_bucket, scheme->tables() * 12);
    }
  }
}

// Redis's CPU seconds so far (INFO cpu: user + sys), over `conn`.
double RedisCpuSeconds(RedisConnection& conn) {
  return std::stod(RedisServer::InfoField(conn, "cpu", "used_cpu_user")) +
         std::stod(RedisServer::InfoField(conn, "cpu", "used_cpu_sys"));
}

// This process's CPU seconds so far (utime + stime).
double OwnCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

long long UsedMemory(RedisServer& redis) {
  auto conn = redis.Connect();
  return std::stoll(RedisServer::InfoField(*conn, "memory", "used_memory"));
}

// A content index over a fresh redis-server without persistence (the benchmarks').
struct BenchIndex {
  explicit BenchIndex(const contentdb::ContentIndexOptions& options = {}) {
    auto made = contentdb::ContentIndex::Make(options, contentdb::SingleNodeRunner(*conn));
    REQUIRE(made.ok());
    index = std::move(*made);
  }
  RedisServer redis{{"--appendonly", "no", "--save", ""}};
  std::unique_ptr<RedisConnection> conn = redis.Connect();
  std::unique_ptr<contentdb::ContentIndex> index;
};

// Fills a redis-server (no persistence) with EF_CONTENT_BENCH_ITEMS random items
// through Assign (batches of 1,000), reports used_memory per item, then times
// batches of 100 new items (half near-duplicates of stored ones): the wall time
// of one Assign over its items, p50 and p99 over 2,000 batches.
TEST_CASE("measure: Redis memory per item and Assign latency per item", "[.measure][.bench]") {
  const size_t n = Sizes("EF_CONTENT_BENCH_ITEMS", "1000000")[0];
  const int blocks = static_cast<int>(Sizes("EF_CONTENT_BENCH_BLOCKS", "5")[0]);
  contentdb::ContentIndexOptions o;
  o.index_blocks = blocks;
  BenchIndex bench(o);
  RedisServer& redis = bench.redis;
  contentdb::ContentIndex& index = *bench.index;
  std::mt19937_64 rng(42);
  const long long before = UsedMemory(redis);
  std::vector<uint64_t> stored;
  stored.reserve(n);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t at = 0; at < n; at += 1000) {
    std::vector<contentdb::ContentItem> batch;
    for (size_t i = at; i < std::min(n, at + 1000); ++i) {
      batch.push_back({"item-" + std::to_string(i), rng()});
      stored.push_back(batch.back().simhash);
    }
    REQUIRE(index.Assign(batch).ok());
  }
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const long long after = UsedMemory(redis);
  std::printf(
      "items %zu blocks %d tables %d fill %.1f s (%.0f items/s) used_memory %lld -> %lld: "
      "%.1f bytes/item, keys %lld\n",
      n, blocks, index.scheme().tables(), fill_s, n / fill_s, before, after,
      double(after - before) / n, redis.Command({"DBSIZE"}).integer);
  std::vector<double> per_item_us;
  size_t next = n;
  const double c0 = OwnCpuSeconds(), r0 = RedisCpuSeconds(*bench.conn);
  for (int b = 0; b < 2000; ++b) {
    std::vector<contentdb::ContentItem> batch;
    for (int i = 0; i < 100; ++i) {
      uint64_t fp = rng();
      if (i % 2 == 0) fp = stored[rng() % stored.size()] ^ (uint64_t{1} << (rng() % 64));
      batch.push_back({"item-" + std::to_string(next++), fp});
    }
    auto s = std::chrono::steady_clock::now();
    REQUIRE(index.Assign(batch).ok());
    per_item_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() /
        100);
  }
  const double c1 = OwnCpuSeconds(), r1 = RedisCpuSeconds(*bench.conn);
  std::sort(per_item_us.begin(), per_item_us.end());
  std::printf(
      "Assign, batches of 100 (half near-duplicates): per item p50 %.1f us, p99 %.1f us; CPU per "
      "item: Redis %.1f us, this process %.1f us\n",
      per_item_us[per_item_us.size() / 2], per_item_us[per_item_us.size() * 99 / 100],
      (r1 - r0) * 1e6 / 200000, (c1 - c0) * 1e6 / 200000);
}

// Issue 47 item 7: 10,000 copies of one text among 10,000 unrelated items, in
// batches of 1,000 (half copies; EF_CONTENT_FLOOD_BATCHES batches, default 20): the CPU time per
// batch, the client's (this process) and Redis's (INFO cpu), must stay flat as copies accumulate.
TEST_CASE("measure: a flood of copies, CPU per batch", "[.measure][.bench]") {
  BenchIndex bench;
  RedisConnection& conn = *bench.conn;
  contentdb::ContentIndex& index = *bench.index;
  std::mt19937_64 rng(5);
  const uint64_t flood = rng();
  const int batches = static_cast<int>(Sizes("EF_CONTENT_FLOOD_BATCHES", "20")[0]);
  std::printf("batch copies_before client_cpu_ms redis_cpu_ms wall_ms\n");
  for (int b = 0; b < batches; ++b) {
    std::vector<contentdb::ContentItem> batch;
    for (int i = 0; i < 1000; ++i) {
      const int n = b * 1000 + i;
      batch.push_back({"item-" + std::to_string(n), i % 2 == 0 ? flood : rng()});
    }
    const double c0 = OwnCpuSeconds(), r0 = RedisCpuSeconds(conn);
    const auto w0 = std::chrono::steady_clock::now();
    REQUIRE(index.Assign(batch).ok());
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    const double c1 = OwnCpuSeconds(), r1 = RedisCpuSeconds(conn);
    std::printf("%d %d %.1f %.1f %.1f\n", b, b * 500, (c1 - c0) * 1000, (r1 - r0) * 1000, wall);
  }
}

// Issue 47 item 4: the daemon's lookups renew what they find (a PEXPIRE of each
// item's map entry in the same round trip, and of its buckets with the next
// lookup). The cost per item looked up, renewing against reading only (the
// lookup before the change), alternated five times over 100,000 indexed items
// in batches of 1,000: the client's CPU and Redis's (INFO cpu), microseconds.
TEST_CASE("measure: renewing lookups, CPU per item", "[.measure][.bench]") {
  BenchIndex bench;
  RedisConnection& conn = *bench.conn;
  contentdb::ContentIndex& index = *bench.index;
  std::mt19937_64 rng(9);
  const size_t n = 100000;
  for (size_t at = 0; at < n; at += 1000) {
    std::vector<contentdb::ContentItem> batch;
    for (size_t i = at; i < at + 1000; ++i) batch.push_back({"item-" + std::to_string(i), rng()});
    REQUIRE(index.Assign(batch).ok());
  }
  std::printf("round mode client_us_per_item redis_us_per_item\n");
  for (int round = 0; round < 5; ++round) {
    for (const bool renew : {false, true}) {
      const double c0 = OwnCpuSeconds(), r0 = RedisCpuSeconds(conn);
      for (size_t at = 0; at < n; at += 1000) {
        std::vector<std::string> ids;
        for (size_t i = at; i < at + 1000; ++i) ids.push_back("item-" + std::to_string(i));
        REQUIRE(index.Lookup(ids, renew).ok());
      }
      const double c1 = OwnCpuSeconds(), r1 = RedisCpuSeconds(conn);
      std::printf("%d %s %.2f %.2f\n", round, renew ? "renew" : "read", (c1 - c0) * 1e6 / n,
                  (r1 - r0) * 1e6 / n);
    }
  }
}

}  // namespace
}  // namespace ef::test
