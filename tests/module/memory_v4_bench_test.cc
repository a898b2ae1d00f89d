// Issue 53's measurement (hidden, "[.bench]"; scripts/bench-memory-v4.sh runs it):
// Redis memory of layout v4 against v3 on real redis-servers, written by
// RedisBitWriter as the daemon writes, for the population: 600 users at
// 0.5x, 250 at 1x, 100 at 4x, 40 at 16x and 10 at 64x of items_per_bucket, each
// day's count +-10% around the user's activity, yesterday then today. Activity
// persists (each user keeps their multiple) or is shuffled (today's multiples are
// a permutation of yesterday's). Prints, for today's keys: filter bytes (STRLEN)
// over the Bloom optimum for each user's item count at p_b (the per-key rate the
// layout promises a 1x user), MEMORY USAGE, the false-positive rate by activity
// class over p_b (400,000 non-items per class), false negatives; then the write
// cost per event in each write mode, v3 against v4 (the writer's CPU and Redis's
// INFO cpu), medians over alternations.
#include <time.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/sizing.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "module/module_support.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

constexpr int64_t kDay = 86400;
struct Group {
  double factor;
  int users;
};
const Group kPopulation[] = {{0.5, 600}, {1, 250}, {4, 100}, {16, 40}, {64, 10}};

Layout LayoutOf(int version) {
  FilterConfig f;
  f.layout_version = static_cast<uint32_t>(version);
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

// Each user's item count on each day (0: yesterday, 1: today), and the activity
// class (index into kPopulation) they have today.
struct Plan {
  std::vector<int> count[2];
  std::vector<int> group_today;
};

Plan MakePlan(bool shuffled, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  std::vector<int> group;
  for (int g = 0; g < 5; ++g) group.insert(group.end(), kPopulation[g].users, g);
  std::vector<int> today = group;
  if (shuffled) std::shuffle(today.begin(), today.end(), rng);
  Plan p;
  p.group_today = today;
  for (size_t u = 0; u < group.size(); ++u) {
    p.count[0].push_back(
        static_cast<int>(std::lround(200 * kPopulation[group[u]].factor * noise(rng))));
    p.count[1].push_back(
        static_cast<int>(std::lround(200 * kPopulation[today[u]].factor * noise(rng))));
  }
  return p;
}

std::string Item(size_t user, int day, int i) {
  return "u" + std::to_string(user) + "-d" + std::to_string(day) + "-" + std::to_string(i);
}

// One day's batches as the daemon's would come: each user's items in chunks of
// up to 40, interleaved, at most 400 keys a batch and one chunk of a user (the
// coalescer's batches hold each key once).
std::vector<BitBatch> DayBatches(const Layout& l, const Plan& p, int day, int64_t bucket) {
  std::vector<BitBatch> out;
  const size_t users = p.count[day].size();
  std::vector<int> next(users, 0);
  BitBatch batch;
  bool more = true;
  while (more) {
    more = false;
    for (size_t u = 0; u < users; ++u) {
      if (next[u] >= p.count[day][u]) continue;
      std::vector<std::string> items;
      for (int j = 0; j < 40 && next[u] < p.count[day][u]; ++j)
        items.push_back(Item(u, day, next[u]++));
      more = more || next[u] < p.count[day][u];
      batch.keys.push_back(KeyOfItems(l, MakeKey(l.prefix, "u" + std::to_string(u), bucket, kDay),
                                      items, ExpireAt(bucket, kDay, l.window_seconds)));
      if (batch.keys.size() == 400) {
        batch.size = batch.keys.size();
        out.push_back(std::move(batch));
        batch = BitBatch();
      }
    }
    if (!batch.keys.empty()) {  // the round's end: the next round repeats users
      batch.size = batch.keys.size();
      out.push_back(std::move(batch));
      batch = BitBatch();
    }
  }
  if (!batch.keys.empty()) {
    batch.size = batch.keys.size();
    out.push_back(std::move(batch));
  }
  return out;
}

double RedisCpu(RedisConnection& c) {
  const std::string info = Cmd(c, {"INFO", "cpu"}).str;
  auto field = [&info](const std::string& name) {
    const size_t at = info.find(name + ":");
    return std::stod(info.substr(at + name.size() + 1));
  };
  return field("used_cpu_user") + field("used_cpu_sys");
}

double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct DayCost {
  double writer_s = 0, redis_s = 0;
  int64_t events = 0;
};

// Writes yesterday, then today (measured), into `redis` in `mode`.
DayCost WriteDays(RedisServer& redis, const Layout& l, const Plan& p, WriteMode mode) {
  const int64_t today = BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay);
  BitWriterOptions o;
  o.redis.port = redis.port();
  o.mode = mode;
  o.layout = l;
  RedisBitWriter writer(o);
  for (const BitBatch& b : DayBatches(l, p, 0, today - kDay))
    REQUIRE(writer.Write(b, nullptr).ok());
  const std::vector<BitBatch> batches = DayBatches(l, p, 1, today);
  auto conn = redis.Connect();
  DayCost cost;
  const double r0 = RedisCpu(*conn), w0 = ThreadCpu();
  for (const BitBatch& b : batches) REQUIRE(writer.Write(b, nullptr).ok());
  cost.writer_s = ThreadCpu() - w0;
  cost.redis_s = RedisCpu(*conn) - r0;
  for (int n : p.count[1]) cost.events += n;
  return cost;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Today's keys of a population written under `l`: memory, FPR and false negatives.
void Report(const char* scenario, RedisServer& redis, const Layout& l, const Plan& p) {
  auto conn = redis.Connect();
  const int64_t today = BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay);
  auto sizing = ComputeSizing(200, 0.01, l.window_seconds, l.bucket_seconds);
  REQUIRE(sizing.ok());
  const double pb = sizing->bucket_fpr;
  const double opt_bits = -std::log(pb) / (std::log(2.0) * std::log(2.0));
  double bytes = 0, optimum = 0, usage = 0;
  uint64_t false_negatives = 0;
  std::vector<uint64_t> fp(5, 0), tests(5, 0);
  std::mt19937_64 rng(99);
  for (size_t u = 0; u < p.count[1].size(); ++u) {
    const std::string key = MakeKey(l.prefix, "u" + std::to_string(u), today, kDay);
    const std::string value = Cmd(*conn, {"GET", key}).str;
    bytes += static_cast<double>(value.size());
    usage += static_cast<double>(Cmd(*conn, {"MEMORY", "USAGE", key, "SAMPLES", "0"}).integer);
    optimum += p.count[1][u] * opt_bits / 8;
    const std::vector<Stage>* t = l.TableFor(value, today);
    REQUIRE(t != nullptr);
    const PositionRule rule = l.RuleFor(today);
    for (int i = 0; i < p.count[1][u]; ++i)
      false_negatives += !ValueContains(value, *t, rule, HashItem(Item(u, 1, i), l.seed));
    const int g = p.group_today[u];
    const uint64_t n = 400000 / static_cast<uint64_t>(kPopulation[g].users);
    for (uint64_t i = 0; i < n; ++i) {
      fp[g] += ValueContains(value, *t, rule, Hash128{rng(), rng()});
      ++tests[g];
    }
  }
  std::printf(
      "memory-v4: %-9s v%d: filter bytes %.0f, optimum %.0f: %.2fx; MEMORY USAGE %.0f "
      "(%.2fx the optimum); false negatives %llu\n",
      scenario, l.version(), bytes, optimum, bytes / optimum, usage, usage / optimum,
      static_cast<unsigned long long>(false_negatives));
  std::printf("memory-v4: %-9s v%d: FPR / p_b by class (p_b %.3g):", scenario, l.version(), pb);
  for (int g = 0; g < 5; ++g)
    std::printf(" %gx %.2f", kPopulation[g].factor,
                static_cast<double>(fp[g]) / static_cast<double>(tests[g]) / pb);
  std::printf("\n");
  CHECK(false_negatives == 0);
}

}  // namespace

TEST_CASE("memory v4: filter bytes over the Bloom optimum, v3 against v4", "[.bench][v4]") {
  for (bool shuffled : {false, true}) {
    const Plan p = MakePlan(shuffled, 53);
    for (int version : {3, 4}) {
      RedisServer redis;
      WriteDays(redis, LayoutOf(version), p, WriteMode::kBitfield);
      Report(shuffled ? "shuffled" : "persists", redis, LayoutOf(version), p);
    }
    // An upgraded version-3 deployment: v4_from is today, so yesterday's keys are
    // version 3's and today's classes come from them.
    Layout upgraded = LayoutOf(4);
    upgraded.v4_from = BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay);
    REQUIRE(upgraded.Finish().ok());
    RedisServer redis;
    WriteDays(redis, upgraded, p, WriteMode::kBitfield);
    Report(shuffled ? "shuffled, upgraded" : "persists, upgraded", redis, upgraded, p);
  }
}

TEST_CASE("memory v4: write cost per event in each write mode, v3 against v4", "[.bench][v4]") {
  const Plan p = MakePlan(false, 53);
  const int reps = 5;
  for (WriteMode mode : {WriteMode::kBitfield, WriteMode::kBitop, WriteMode::kModule}) {
    std::map<int, std::vector<double>> writer, redis_cpu;
    for (int rep = 0; rep < reps; ++rep) {
      for (int version : {3, 4}) {
        auto redis = ServerWithModule();
        const DayCost c = WriteDays(*redis, LayoutOf(version), p, mode);
        writer[version].push_back(c.writer_s * 1e6 / static_cast<double>(c.events));
        redis_cpu[version].push_back(c.redis_s * 1e6 / static_cast<double>(c.events));
      }
    }
    std::printf(
        "memory-v4: write %-8s CPU per event, medians of %d alternations: writer v3 %.3f us, v4 "
        "%.3f us (%.2fx); Redis v3 %.3f us, v4 %.3f us (%.2fx)\n",
        WriteModeName(mode), reps, Median(writer[3]), Median(writer[4]),
        Median(writer[4]) / Median(writer[3]), Median(redis_cpu[3]), Median(redis_cpu[4]),
        Median(redis_cpu[4]) / Median(redis_cpu[3]));
  }
}

}  // namespace ef::test
