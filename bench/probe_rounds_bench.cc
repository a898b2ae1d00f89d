// The probe rounds of one bit-sliced stage (bloom/probe_rounds.h), by path: 1,000
// candidates against a stage of 12,050 positions (stage 2 of the default layout,
// k = 11) sliced from 31 buckets, each bit set with probability 1/2 (a bucket at
// its design fill); by position rule (2: x mod m; 9: version 3's remix and
// multiply-shift). Each iteration refills the work list (as TestItems does per
// stage) from one of 16 sets of hashes, then runs the rounds.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "bloom/probe_rounds.h"

namespace {

constexpr uint32_t kM = 12050;
constexpr uint32_t kK = 11;
constexpr size_t kItems = 1000;
constexpr size_t kSets = 16;

void Run(benchmark::State& state, ef::ProbeRounds::Isa isa, ef::PositionRule rule) {
  const ef::ProbeRounds rounds(isa);
  if (rounds.isa() != isa) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  std::mt19937_64 rng(7);
  std::vector<uint32_t> sliced(kM);
  for (uint32_t& w : sliced) w = static_cast<uint32_t>(rng()) & 0x7fffffffu;
  std::vector<std::vector<uint64_t>> h1(kSets, std::vector<uint64_t>(kItems));
  std::vector<std::vector<uint64_t>> h2(kSets, std::vector<uint64_t>(kItems));
  for (size_t s = 0; s < kSets; ++s) {
    for (size_t i = 0; i < kItems; ++i) {
      h1[s][i] = rng();
      h2[s][i] = rng();
    }
  }
  const ef::FastMod mod(kM);
  ef::ProbeList<uint32_t> list;
  list.Resize(kItems);
  size_t set = 0;
  size_t left = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kItems; ++i) {
      list.x[i] = h1[set][i];
      list.h2[i] = h2[set][i];
      list.alive[i] = 0x7fffffffu;
      list.item[i] = static_cast<uint32_t>(i);
    }
    set = (set + 1) % kSets;
    left += rounds.Run(sliced.data(), mod, rule, kK, kItems, &list);
    benchmark::DoNotOptimize(list.alive.data());
  }
  state.counters["left_per_set"] =
      benchmark::Counter(static_cast<double>(left) / static_cast<double>(state.iterations()));
}

using ef::PositionRule;
using Isa = ef::ProbeRounds::Isa;
void BM_ProbeRounds_Scalar(benchmark::State& s) { Run(s, Isa::kScalar, PositionRule::kModulo); }
void BM_ProbeRounds_Avx512(benchmark::State& s) { Run(s, Isa::kAvx512, PositionRule::kModulo); }
void BM_ProbeRounds_Scalar_V3(benchmark::State& s) { Run(s, Isa::kScalar, PositionRule::kRemix); }
void BM_ProbeRounds_Avx512_V3(benchmark::State& s) { Run(s, Isa::kAvx512, PositionRule::kRemix); }

}  // namespace

BENCHMARK(BM_ProbeRounds_Scalar)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProbeRounds_Avx512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProbeRounds_Scalar_V3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProbeRounds_Avx512_V3)->Unit(benchmark::kMicrosecond);
