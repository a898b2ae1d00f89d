// SharedClusterCache (contentdb/cluster_cache.h): the lookups serve and the
// library make for a request's candidates (FindMany, 1,000 at a time, as
// client/call.cc PlanLookups), in caches holding 20,000 to 1.8M items. The
// candidates are drawn at random from those held, so the larger caches measure
// what a lookup that leaves the CPU's caches costs: issue 52's benchmark
// (scripts/bench-read.sh --near-duplicates) holds about 1.8M. One thread, nothing
// else running: serve shares the cores with Redis and its other threads, and
// pays more (docs/PERFORMANCE.md "The content map through a local cache").
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "contentdb/cluster_cache.h"

namespace ef::contentdb {
namespace {

constexpr size_t kBatch = 1000;  // candidates a request
constexpr uint32_t kSeed = 0;

// n items "item-<i>", 1 in 5 in a shared cluster (as ef_read_bench's), the
// others their own; the cache's budget is what 2n items take, so all stay.
struct Filled {
  explicit Filled(size_t n) : cache(ClusterCacheLimits{ClusterCacheLimits::kUnlimited, n * 256}) {
    std::vector<std::string> ids(n);
    std::vector<std::string> clusters(n);
    std::vector<std::string_view> id_views(n), cluster_views(n);
    for (size_t i = 0; i < n; ++i) {
      ids[i] = "item-" + std::to_string(i);
      clusters[i] = i % 5 == 0 ? "cl-" + std::to_string(i / 5 % 1000) : ids[i];
      hashes.push_back(HashItem(ids[i], kSeed));
      id_views[i] = ids[i];
      cluster_views[i] = clusters[i];
    }
    cache.PutMany(hashes.data(), id_views.data(), cluster_views.data(), n, kNowMs);
  }
  static constexpr int64_t kNowMs = 1000;
  std::vector<Hash128> hashes;
  SharedClusterCache cache;
};

// One iteration = one request's 1,000 lookups, all of them hits.
void BM_ClusterCacheFindMany(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  Filled f(n);
  std::mt19937_64 rng(7);
  constexpr size_t kRequests = 4096;  // batches drawn up front, sent in turn
  std::vector<Hash128> batches(kRequests * kBatch);
  for (Hash128& h : batches) h = f.hashes[rng() % n];
  std::vector<ClusterCache::Hit> hits(kBatch);
  std::vector<std::string> clusters(kBatch);
  size_t at = 0, found = 0;
  for (auto _ : state) {
    f.cache.FindMany(&batches[at * kBatch], kBatch, Filled::kNowMs, hits.data(), clusters.data());
    for (ClusterCache::Hit h : hits) found += h != ClusterCache::Hit::kNone ? 1 : 0;
    at = at + 1 == kRequests ? 0 : at + 1;
  }
  if (found != static_cast<size_t>(state.iterations()) * kBatch)
    state.SkipWithError("a lookup of an item held was not answered");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
  state.counters["ns_per_lookup"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kBatch),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  state.counters["table_MiB"] = static_cast<double>(f.cache.memory_bytes()) / 1048576.0;
}
BENCHMARK(BM_ClusterCacheFindMany)
    ->Arg(20000)
    ->Arg(200000)
    ->Arg(1800000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ef::contentdb
