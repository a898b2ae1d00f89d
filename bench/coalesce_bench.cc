// Coalescer cost per batch with the default layout (m = 3345, k = 12): one iteration =
// Add() of 20,000 pre-built events + Seal() + Clear(), the pipeline's default batch
// (pipeline.batch_max_events). Users are Zipf(s = 1) over 1,000,000, items Zipf(s = 1)
// over 10,000,000 (loadgen's default exponent), event times uniform over the 2 days
// before "now". Items/s counts item IDs, events_per_second events; keys_per_batch and
// positions_per_batch (after Seal's dedupe, vs raw_positions_per_batch = items * k)
// show how much the batch coalesces. BM_Coalesce_V4_*: the same under layout v4,
// whose keys (with a size class) get no stage-0 positions.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/layout.h"
#include "common/status.h"
#include "config/config.h"
#include "event/event.h"
#include "loadgen/zipf.h"
#include "payloads.h"
#include "pipeline/coalescer.h"

namespace ef {
namespace {

constexpr size_t kBatchEvents = 20000;
constexpr uint64_t kUsers = 1000000;
constexpr uint64_t kItems = 10000000;
constexpr double kZipfS = 1.0;
constexpr int64_t kSpreadMs = 2 * 86400 * 1000;

// The events of one batch and the ID strings their views point into.
struct Batch {
  std::vector<std::string> ids;  // not resized once `events` views point into it
  std::vector<Event> events;
  int64_t items = 0;
};

Batch MakeBatch(int items_per_event, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ZipfSampler users(kUsers, kZipfS);
  const ZipfSampler items(kItems, kZipfS);
  std::uniform_int_distribution<int64_t> age_ms(0, kSpreadMs - 1);
  Batch b;
  b.ids.reserve(kBatchEvents * (1 + items_per_event));
  std::vector<int64_t> ts(kBatchEvents);
  for (size_t e = 0; e < kBatchEvents; ++e) {
    b.ids.push_back("u" + std::to_string(users.Sample(rng)));
    for (int i = 0; i < items_per_event; ++i) {
      b.ids.push_back("i" + std::to_string(items.Sample(rng)));
    }
    ts[e] = bench::kNowMs - age_ms(rng);  // 2025-11-23T00:00:00.5Z - [0, 2d)
  }
  size_t next = 0;
  b.events.resize(kBatchEvents);
  for (size_t e = 0; e < kBatchEvents; ++e) {
    Event& event = b.events[e];
    event.user = b.ids[next++];
    for (int i = 0; i < items_per_event; ++i) event.items.push_back(b.ids[next++]);
    event.ts_ms = ts[e];
    b.items += items_per_event;
  }
  return b;
}

// The default layout, version 3 (or 4: every key with a size class, so the
// coalescer leaves out stage-0 positions and keeps the items' hashes).
Layout DefaultLayout(uint32_t version = 3) {
  FilterConfig f;
  f.layout_version = version;
  StatusOr<Layout> l = LayoutFromConfig(f);
  if (!l.ok()) std::abort();
  return *l;
}

void RunCoalesce(benchmark::State& state, const Batch& batch, uint32_t version = 3) {
  const Layout layout = DefaultLayout(version);
  Coalescer coalescer(layout);
  for (auto _ : state) {
    for (const Event& event : batch.events) coalescer.Add(event);
    coalescer.Seal();
    benchmark::DoNotOptimize(coalescer.batch().keys.data());
    benchmark::ClobberMemory();
    coalescer.Clear();
  }
  const auto batches = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * batch.items);
  state.counters["events_per_second"] = benchmark::Counter(
      batches * static_cast<double>(batch.events.size()), benchmark::Counter::kIsRate);

  // The batch's shape, from one more (untimed) pass: every iteration builds the same.
  for (const Event& event : batch.events) coalescer.Add(event);
  coalescer.Seal();
  state.counters["keys_per_batch"] = static_cast<double>(coalescer.batch().size);
  state.counters["positions_per_batch"] = static_cast<double>(coalescer.batch().TotalBits());
  state.counters["raw_positions_per_batch"] = static_cast<double>(batch.items) * layout.k;
  coalescer.Clear();
}

void BM_Coalesce_Single(benchmark::State& state) {
  static const Batch batch = MakeBatch(1, 21);
  RunCoalesce(state, batch);
}
BENCHMARK(BM_Coalesce_Single)->Unit(benchmark::kMillisecond);

void BM_Coalesce_List10(benchmark::State& state) {
  static const Batch batch = MakeBatch(10, 22);
  RunCoalesce(state, batch);
}
BENCHMARK(BM_Coalesce_List10)->Unit(benchmark::kMillisecond);

void BM_Coalesce_V4_Single(benchmark::State& state) {
  static const Batch batch = MakeBatch(1, 21);
  RunCoalesce(state, batch, 4);
}
BENCHMARK(BM_Coalesce_V4_Single)->Unit(benchmark::kMillisecond);

void BM_Coalesce_V4_List10(benchmark::State& state) {
  static const Batch batch = MakeBatch(10, 22);
  RunCoalesce(state, batch, 4);
}
BENCHMARK(BM_Coalesce_V4_List10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ef
