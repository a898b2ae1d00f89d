// ExpireCache (write/expire_cache.h): the per-key lookup the writer does for
// every key of every batch, and the insert for every EXPIREAT it sends. Keys as
// the daemon builds them, users Zipf over 1M (loadgen's default), one bucket.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "loadgen/zipf.h"
#include "write/expire_cache.h"

namespace ef {
namespace {

constexpr int64_t kNow = 1763800000;
constexpr int64_t kExpire = kNow + 31 * 86400;

std::vector<std::string> ZipfKeys(size_t n) {
  std::mt19937_64 rng(5);
  ZipfSampler users(1000000, 1.0);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i)
    keys.push_back("ef:{u" + std::to_string(users.Sample(rng)) + "}:20410");
  return keys;
}

// One iteration = one batch's worth of keys (20,000): Known, then Remember the
// unknown ones, as RedisBitWriter::Write does. The cache warms up over the run.
void BM_ExpireCache_KnownRemember(benchmark::State& state) {
  const std::vector<std::string> keys = ZipfKeys(2000000);
  ExpireCache cache(1000000, 600);
  size_t at = 0;
  uint64_t skipped = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < 20000; ++i) {
      const std::string& k = keys[at];
      at = at + 1 == keys.size() ? 0 : at + 1;
      if (cache.Known(k, kExpire, kNow)) {
        ++skipped;
      } else {
        cache.Remember(k, kExpire, kNow);
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 20000);
  state.counters["hit_ratio"] =
      static_cast<double>(skipped) / static_cast<double>(state.iterations() * 20000);
}
BENCHMARK(BM_ExpireCache_KnownRemember)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ef
