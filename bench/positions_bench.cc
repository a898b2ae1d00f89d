// The position rules alone: k positions for each of 4,096 item hashes, at the
// default stage 0 (m = 3345, k = 12) and at stage 7 (m = 927680, k = 26).
//   BM_Positions_V2Mod      rule 2 with `%` (bloom/positions.h ComputePositions)
//   BM_Positions_V2FastMod  rule 2 with FastMod (what TestItems' probe rounds use)
//   BM_Positions_V3         the version-3 rule (ComputePositionsV3)
// One iteration = 4,096 items; items/s counts items. Scalar code, so that the
// rules are compared, not the vector units.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "bloom/fast_mod.h"
#include "bloom/hash.h"
#include "bloom/positions.h"

namespace ef {
namespace {

constexpr size_t kItems = 4096;

std::vector<Hash128> Items() {
  std::mt19937_64 rng(3);
  std::vector<Hash128> items(kItems);
  for (Hash128& h : items) h = Hash128{rng(), rng()};
  return items;
}

template <typename Rule>
void Run(benchmark::State& state, Rule rule) {
  const auto m = static_cast<uint32_t>(state.range(0));
  const auto k = static_cast<uint32_t>(state.range(1));
  const std::vector<Hash128> items = Items();
  std::vector<uint32_t> out(k);
  for (auto _ : state) {
    uint64_t sum = 0;
    for (const Hash128& h : items) {
      rule(h, m, k, out.data());
      sum += out[k - 1];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kItems));
}

void BM_Positions_V2Mod(benchmark::State& state) {
  Run(state, [](Hash128 h, uint32_t m, uint32_t k, uint32_t* out) {
    ComputePositions(h, m, k, PositionRule::kModulo, out);
  });
}

void BM_Positions_V2FastMod(benchmark::State& state) {
  const FastMod mod(static_cast<uint32_t>(state.range(0)));
  Run(state, [&mod](Hash128 h, uint32_t, uint32_t k, uint32_t* out) {
    uint64_t x = h.h1;
    for (uint32_t i = 0; i < k; ++i, x += h.h2) out[i] = mod.Mod(x);
  });
}

void BM_Positions_V3(benchmark::State& state) { Run(state, ComputePositionsV3); }

BENCHMARK(BM_Positions_V2Mod)->Args({3345, 12})->Args({927680, 26})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Positions_V2FastMod)
    ->Args({3345, 12})
    ->Args({927680, 26})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Positions_V3)->Args({3345, 12})->Args({927680, 26})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ef
