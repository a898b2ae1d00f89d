// Per-item hashing cost with the default layout (filter.* defaults: m = 3345, k = 12):
// HashItem (MurmurHash3_x64_128) + ComputePositions over 4096 varied item IDs of three
// shapes (BM_HashPositions_*), and the combined per-event cost behind the "decode+hash
// >= 5 M events/s per core" target: Decoder::Decode, then HashItem + ComputePositions
// for every item of the decoded event (BM_DecodeHash_*). Items/s counts item IDs,
// positions_per_second counts the k positions per item, events_per_second payloads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "bloom/hash_batch.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "common/status.h"
#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"
#include "payloads.h"

namespace ef {
namespace {

constexpr size_t kItems = 4096;

// The layout the daemon runs with when filter.* is left at its defaults.
const Layout& DefaultLayout() {
  static const Layout layout = [] {
    StatusOr<Layout> l = LayoutFromConfig(FilterConfig{});
    if (!l.ok()) std::abort();
    return *l;
  }();
  return layout;
}

// "i123456789": 10 bytes.
std::vector<std::string> ShortIds() {
  std::mt19937_64 rng(11);
  std::vector<std::string> out;
  for (size_t i = 0; i < kItems; ++i) {
    out.push_back("i" + std::to_string(100000000 + rng() % 900000000));
  }
  return out;
}

// "65f1c0a2b4e8d7f3a9c1e5b7": 24 lowercase hex digits (an ObjectId-like ID).
std::vector<std::string> LongHexIds() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::mt19937_64 rng(12);
  std::vector<std::string> out;
  for (size_t i = 0; i < kItems; ++i) {
    std::string s;
    for (int half = 0; half < 2; ++half) {
      uint64_t bits = rng();
      for (int d = 0; d < 12; ++d, bits >>= 4) s += kHex[bits & 0xf];
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Integer IDs as the decoder passes them on: their decimal text (1 to 10 digits,
// mostly 9-10).
std::vector<std::string> IntegerIds() {
  std::mt19937_64 rng(13);
  std::vector<std::string> out;
  for (size_t i = 0; i < kItems; ++i) out.push_back(std::to_string(rng() % 10000000000));
  return out;
}

void SetHashCounters(benchmark::State& state, int64_t items, uint32_t k) {
  state.SetItemsProcessed(items);
  state.counters["positions_per_second"] =
      benchmark::Counter(static_cast<double>(items) * k, benchmark::Counter::kIsRate);
}

void RunHashPositions(benchmark::State& state, const std::vector<std::string>& ids) {
  const Layout& layout = DefaultLayout();
  std::vector<uint32_t> positions(layout.k);
  size_t i = 0;
  for (auto _ : state) {
    const std::string& id = ids[i];
    if (++i == ids.size()) i = 0;
    ComputePositions(HashItem(id, layout.seed), layout.m, layout.k, positions.data());
    benchmark::DoNotOptimize(positions.data());
    benchmark::ClobberMemory();
  }
  SetHashCounters(state, static_cast<int64_t>(state.iterations()), layout.k);
  size_t total = 0;
  for (const std::string& id : ids) total += id.size();
  state.counters["avg_bytes"] = static_cast<double>(total) / static_cast<double>(ids.size());
  state.counters["m"] = layout.m;
  state.counters["k"] = layout.k;
}

void BM_HashPositions_Short(benchmark::State& state) {
  static const std::vector<std::string> ids = ShortIds();
  RunHashPositions(state, ids);
}
BENCHMARK(BM_HashPositions_Short);

void BM_HashPositions_LongHex(benchmark::State& state) {
  static const std::vector<std::string> ids = LongHexIds();
  RunHashPositions(state, ids);
}
BENCHMARK(BM_HashPositions_LongHex);

void BM_HashPositions_Integer(benchmark::State& state) {
  static const std::vector<std::string> ids = IntegerIds();
  RunHashPositions(state, ids);
}
BENCHMARK(BM_HashPositions_Integer);

// Hashing alone, 1,000 IDs per iteration (a read request's candidates):
// HashItem one by one, and ItemHasher::HashAll on each of its paths.
void RunHashAll(benchmark::State& state, const std::vector<std::string>& ids, int mode) {
  constexpr size_t kBatch = 1000;
  const Layout& layout = DefaultLayout();
  const ItemHasher hasher(mode == 2 ? ItemHasher::Isa::kAvx512 : ItemHasher::Isa::kScalar);
  if (mode == 2 && hasher.isa() != ItemHasher::Isa::kAvx512) {
    state.SkipWithError("no AVX-512 F/DQ/BW/VL on this CPU");
    return;
  }
  std::vector<Hash128> out(kBatch);
  size_t first = 0;
  for (auto _ : state) {
    const std::string* batch = ids.data() + first;
    first = first + 2 * kBatch <= ids.size() ? first + kBatch : 0;
    if (mode == 0) {
      for (size_t i = 0; i < kBatch; ++i) out[i] = HashItem(batch[i], layout.seed);
    } else {
      hasher.HashAll(
          kBatch, [&](size_t i) { return std::string_view(batch[i]); }, layout.seed, out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

void BM_HashAll_OneByOne(benchmark::State& state) {
  static const std::vector<std::string> ids = ShortIds();
  RunHashAll(state, ids, 0);
}
BENCHMARK(BM_HashAll_OneByOne)->Unit(benchmark::kMicrosecond);

void BM_HashAll_Scalar(benchmark::State& state) {
  static const std::vector<std::string> ids = ShortIds();
  RunHashAll(state, ids, 1);
}
BENCHMARK(BM_HashAll_Scalar)->Unit(benchmark::kMicrosecond);

void BM_HashAll_Avx512(benchmark::State& state) {
  static const std::vector<std::string> ids = ShortIds();
  RunHashAll(state, ids, 2);
}
BENCHMARK(BM_HashAll_Avx512)->Unit(benchmark::kMicrosecond);

void BM_HashAll_Avx512LongHex(benchmark::State& state) {
  static const std::vector<std::string> ids = LongHexIds();
  RunHashAll(state, ids, 2);
}
BENCHMARK(BM_HashAll_Avx512LongHex)->Unit(benchmark::kMicrosecond);

void BM_HashAll_OneByOneLongHex(benchmark::State& state) {
  static const std::vector<std::string> ids = LongHexIds();
  RunHashAll(state, ids, 0);
}
BENCHMARK(BM_HashAll_OneByOneLongHex)->Unit(benchmark::kMicrosecond);

// One iteration = one payload: Decode, then hash and place every item of the event.
void RunDecodeHash(benchmark::State& state, const std::vector<std::string>& payloads) {
  const Layout& layout = DefaultLayout();
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder(events, filter);
  Event event;
  std::vector<uint32_t> positions(layout.k);
  size_t i = 0;
  int64_t items = 0;
  for (auto _ : state) {
    const std::string& p = payloads[i];
    if (++i == payloads.size()) i = 0;
    const RejectReason r = decoder.Decode(p.data(), p.size(), 0, bench::kNowMs, &event);
    if (r != RejectReason::kNone) {
      state.SkipWithError(RejectReasonName(r));
      break;
    }
    for (std::string_view item : event.items) {
      ComputePositions(HashItem(item, layout.seed), layout.m, layout.k, positions.data());
      benchmark::DoNotOptimize(positions.data());
      benchmark::ClobberMemory();
    }
    items += static_cast<int64_t>(event.items.size());
  }
  SetHashCounters(state, items, layout.k);
  state.counters["events_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_DecodeHash_Single(benchmark::State& state) {
  static const std::vector<std::string> payloads = bench::SinglePayloads();
  RunDecodeHash(state, payloads);
}
BENCHMARK(BM_DecodeHash_Single);

void BM_DecodeHash_SingleIntegerIds(benchmark::State& state) {
  static const std::vector<std::string> payloads = bench::SingleIntegerPayloads();
  RunDecodeHash(state, payloads);
}
BENCHMARK(BM_DecodeHash_SingleIntegerIds);

void BM_DecodeHash_SingleWithContext(benchmark::State& state) {
  static const std::vector<std::string> payloads = bench::SingleWithContextPayloads();
  RunDecodeHash(state, payloads);
}
BENCHMARK(BM_DecodeHash_SingleWithContext);

void BM_DecodeHash_List20(benchmark::State& state) {
  static const std::vector<std::string> payloads = bench::ListPayloads(20);
  RunDecodeHash(state, payloads);
}
BENCHMARK(BM_DecodeHash_List20);

}  // namespace
}  // namespace ef
