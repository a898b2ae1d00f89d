// StagePlanner cost for one key of a batch with the default layout (m_0 = 3345,
// k_0 = 12, growth 2, k_step 2). BM_StagePlan: Plan() of n random items into a key
// known to fill stage s far below fill_s (the bound holds: no read, every item is
// placed there: one group of n * k_s positions, sorted and deduped).
// BM_StagePlanValue: PlanValue() from a value whose stage s is k_s * n / 2 bits short
// of fill_s (a batch the writer reads first: item by item on a copy of the stage's
// bits; counter `groups` 2: stage s + 1 started within the batch, 0: stage 0 only,
// written with the coalescer's positions). One iteration = one key.
// Items/s counts items.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/stage_planner.h"
#include "bloom/stages.h"
#include "config/config.h"

namespace ef {
namespace {

void BM_StagePlan(benchmark::State& state) {
  const auto stage = static_cast<uint32_t>(state.range(0));
  const auto n = static_cast<size_t>(state.range(1));
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  if (!layout.ok() || layout->stage_table.size() <= stage) std::abort();
  const std::vector<Stage> stages = layout->stage_table;
  std::mt19937_64 rng(7);
  std::vector<Hash128> items(n);
  for (Hash128& h : items) h = Hash128{rng(), rng()};
  StagePlanner planner(stages);
  StageStats stats;
  for (auto _ : state) {
    const bool staged =
        planner.Plan(StageState{stage, 0}, items.data(), n, nullptr, PositionRule::kRemix, &stats);
    benchmark::DoNotOptimize(staged);
    benchmark::DoNotOptimize(planner.positions().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["positions"] = static_cast<double>(planner.positions().size());
}
// {stage, items}: a busy key (stage 1, 20 items in the batch) up to the heaviest
// (stage 5, 500 items), and the largest stages (6: m = 428k, 7: m = 928k bits)
// with one and a few items.
BENCHMARK(BM_StagePlan)
    ->Args({1, 20})
    ->Args({2, 60})
    ->Args({3, 200})
    ->Args({5, 500})
    ->Args({6, 1})
    ->Args({7, 1})
    ->Args({7, 4});

void BM_StagePlanValue(benchmark::State& state) {
  const auto stage = static_cast<uint32_t>(state.range(0));
  const auto n = static_cast<size_t>(state.range(1));
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  if (!layout.ok() || layout->stage_table.size() <= stage + 1) std::abort();
  const std::vector<Stage> stages = layout->stage_table;
  const Stage& st = stages[stage];
  std::mt19937_64 rng(11);
  // Stages before s: random bytes; stage s: random bits up to fill_s - k_s * n / 2.
  std::string value((st.offset + st.m + 7) / 8, '\0');
  for (size_t i = 0; i < st.offset / 8; ++i) value[i] = static_cast<char>(rng() & 0xff);
  const uint64_t target = st.fill - std::min<uint64_t>(st.fill, uint64_t{st.k} * n / 2);
  for (uint64_t set = 0; set < target;) {
    const uint64_t p = st.offset + rng() % st.m;
    const auto bit = static_cast<unsigned char>(0x80u >> (p & 7));
    if (static_cast<unsigned char>(value[p / 8]) & bit) continue;
    value[p / 8] = static_cast<char>(static_cast<unsigned char>(value[p / 8]) | bit);
    ++set;
  }
  std::vector<Hash128> items(n);
  for (Hash128& h : items) h = Hash128{rng(), rng()};
  StagePlanner planner(stages);
  StageStats stats;
  for (auto _ : state) {
    const bool staged =
        planner.PlanValue(value, items.data(), n, nullptr, PositionRule::kRemix, &stats);
    benchmark::DoNotOptimize(staged);
    benchmark::DoNotOptimize(planner.positions().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["groups"] = static_cast<double>(planner.groups().size());
}
// {stage, items}: a light key at stage 0's end (3 and 25 items), busy keys at
// stages 1 and 3, and the heaviest (stage 5, 500 items).
BENCHMARK(BM_StagePlanValue)
    ->Args({0, 3})
    ->Args({0, 25})
    ->Args({1, 20})
    ->Args({3, 200})
    ->Args({5, 500});

// NeedsValue for a batch of n items that fails the quick bound (fill + k_s * n >=
// fill_s), so the distinct items are counted (a sort of n hashes).
void BM_StageNeedsValue(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  if (!layout.ok()) std::abort();
  const std::vector<Stage> stages = layout->stage_table;
  std::mt19937_64 rng(13);
  std::vector<Hash128> items(n);
  for (Hash128& h : items) h = Hash128{rng(), rng()};
  StagePlanner planner(stages);
  const StageState s{0, stages[0].fill - static_cast<uint32_t>(std::min<size_t>(
                                             stages[0].fill, stages[0].k * n / 2))};
  for (auto _ : state) {
    const bool needs = planner.NeedsValue(s, items.data(), n);
    benchmark::DoNotOptimize(needs);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_StageNeedsValue)->Arg(4)->Arg(25)->Arg(500);

// The writer's sequence for a key it knows (RedisBitWriter): NeedsValue, then Plan
// from the state alone. The batch holds n items of which n / 2 are distinct (users
// re-see items) and the key's stage 0 is k_0 * 3n / 4 bits short of fill_0: the
// quick bound fails (k_0 * n items' bits could reach fill_0), the distinct items
// cannot, so no read, and every item goes into stage 0. One iteration = one key.
void BM_StageNeedsValueThenPlan(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  if (!layout.ok()) std::abort();
  const std::vector<Stage> stages = layout->stage_table;
  std::mt19937_64 rng(17);
  std::vector<Hash128> items(n);
  for (size_t i = 0; i < n; ++i) items[i] = i < n / 2 ? Hash128{rng(), rng()} : items[i - n / 2];
  std::shuffle(items.begin(), items.end(), rng);
  StagePlanner planner(stages);
  StageStats stats;
  const StageState s{0, stages[0].fill - static_cast<uint32_t>(stages[0].k * 3 * n / 4)};
  for (auto _ : state) {
    StagePlanner::Fit fit;
    if (planner.NeedsValue(s, items.data(), n, &fit)) std::abort();  // must not read
    const bool staged =
        planner.Plan(s, items.data(), n, nullptr, PositionRule::kRemix, &stats, fit);
    benchmark::DoNotOptimize(staged);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_StageNeedsValueThenPlan)->Arg(8)->Arg(40)->Arg(120);

// StagePopcount of stage s of a value that holds stages 0..s (random bytes): the
// writer counts the newest stage of every key it reads (RedisBitWriter, v2).
// One iteration = one count; bytes_per_second counts the stage's bytes.
void BM_StagePopcount(benchmark::State& state) {
  const auto stage = static_cast<uint32_t>(state.range(0));
  StatusOr<Layout> layout = LayoutFromConfig(FilterConfig{});
  if (!layout.ok() || layout->stage_table.size() <= stage) std::abort();
  const Stage& st = layout->stage_table[stage];
  std::mt19937_64 rng(9);
  std::string value((st.offset + st.m + 7) / 8, '\0');
  for (char& c : value) c = static_cast<char>(rng() & 0xff);
  for (auto _ : state) {
    const uint32_t n = StagePopcount(value, st);
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((st.m + 7) / 8));
}
// Stage 1 (976 bytes), 3 (5,018 bytes), 5 (24.5 KiB).
BENCHMARK(BM_StagePopcount)->Arg(1)->Arg(3)->Arg(5);

}  // namespace
}  // namespace ef
