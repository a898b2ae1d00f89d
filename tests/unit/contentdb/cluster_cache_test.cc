// contentdb/cluster_cache.h: the byte budget (issue 52), both limits together,
// and SharedClusterCache under threads. The table's other rules (kSelf, misses,
// kRefreshMs, compaction) are checked in tests/unit/pipeline/ingest_test.cc.
#include "contentdb/cluster_cache.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bloom/hash.h"

namespace ef::contentdb {
namespace {

Hash128 H(const std::string& item) { return HashItem(item, 0); }

// Item i's cluster: most items are their own, one in 5 has a short cluster, one
// in 50 a long one, one in 7 is not known.
std::string ClusterOf(const std::string& item, int i) {
  if (i % 7 == 0) return "";
  if (i % 50 == 1) return "long-" + std::string(900, 'x') + std::to_string(i % 13);
  if (i % 5 == 2) return "c" + std::to_string(i % 1000);
  return item;
}

}  // namespace

TEST_CASE("ClusterCache: a byte budget bounds its memory, whatever the clusters (issue 52)",
          "[contentdb][near_duplicates]") {
  for (const size_t budget : {size_t{4096}, size_t{64} * 1024, size_t{1} << 20}) {
    INFO("budget " << budget);
    ClusterCacheLimits limits;
    limits.bytes = budget;
    ClusterCache cache(limits);
    size_t most = 0;
    std::string_view c;
    for (int i = 0; i < 200000; ++i) {
      const std::string item = "item-" + std::to_string(i);
      cache.Put(H(item), item, ClusterOf(item, i), 0);
      most = std::max(most, cache.memory_bytes());
      // A find may move an entry of the older generation into the newer one.
      (void)cache.Find(H("item-" + std::to_string(i / 2)), 0, &c);
      most = std::max(most, cache.memory_bytes());
    }
    CHECK(most <= budget);
    CHECK(cache.memory_bytes() <= budget);
    // What was put last is found, with its cluster (in a budget that holds it).
    const std::string item = "item-199999";
    CHECK(cache.Find(H(item), 0, &c) == ClusterCache::Hit::kSelf);  // 199999 % 5 == 4
    const std::string known = "item-199992";  // 199992 % 5 == 2: a short cluster
    REQUIRE(cache.Find(H(known), 0, &c) == ClusterCache::Hit::kCluster);
    CHECK(c == "c992");
  }
  // 1 MiB: 512 KiB a generation, 8,192 slots of 40 bytes (320 KiB) at most
  // half full, so a generation takes 4,096 entries and keeps them all.
  ClusterCacheLimits limits;
  limits.bytes = size_t{1} << 20;
  ClusterCache cache(limits);
  for (int i = 0; i < 4096; ++i) {
    const std::string item = "i" + std::to_string(i);
    cache.Put(H(item), item, item, 0);
  }
  std::string_view c;
  for (int i = 0; i < 4096; ++i) {
    INFO(i);
    REQUIRE(cache.Find(H("i" + std::to_string(i)), 0, &c) == ClusterCache::Hit::kSelf);
  }
  CHECK(cache.size() == 4096);
  CHECK(cache.memory_bytes() <= limits.bytes);
}

TEST_CASE("ClusterCache: an entry longer than a generation's bytes is not kept (issue 52)",
          "[contentdb][near_duplicates]") {
  ClusterCacheLimits limits;
  limits.bytes = 16 * 1024;  // 8 KiB a generation: 128 slots (4 KiB), 4 KiB of clusters
  ClusterCache cache(limits);
  std::string_view c;
  cache.Put(H("small"), "small", "s-cluster", 0);
  cache.Put(H("big"), "big", std::string(5 * 1024, 'b'), 0);
  CHECK(cache.Find(H("big"), 0, &c) == ClusterCache::Hit::kNone);
  CHECK(cache.memory_bytes() <= limits.bytes);
  // Not kept is not "as before": an item whose new cluster does not fit answers
  // kNone, never its old cluster.
  REQUIRE(cache.Find(H("small"), 0, &c) == ClusterCache::Hit::kCluster);
  cache.Put(H("small"), "small", std::string(5 * 1024, 's'), 0);
  CHECK(cache.Find(H("small"), 0, &c) == ClusterCache::Hit::kNone);
  // One that fits is kept.
  const std::string two_k(2 * 1024, 'h');
  cache.Put(H("two_k"), "two_k", two_k, 0);
  REQUIRE(cache.Find(H("two_k"), 0, &c) == ClusterCache::Hit::kCluster);
  CHECK(c == two_k);
  CHECK(cache.memory_bytes() <= limits.bytes);
  // Nothing at all: 0 bytes, or 0 items.
  for (const ClusterCacheLimits none_limits :
       {ClusterCacheLimits{ClusterCacheLimits::kUnlimited, 0}, ClusterCacheLimits{0}}) {
    ClusterCache none(none_limits);
    none.Put(H("a"), "a", "b", 0);
    CHECK(none.Find(H("a"), 0, &c) == ClusterCache::Hit::kNone);
    CHECK(none.memory_bytes() == 0);
  }
}

TEST_CASE("ClusterCache: with an item limit and a byte limit, the first reached holds (issue 52)",
          "[contentdb][near_duplicates]") {
  // Items first: 100 items, a budget far above what they need.
  ClusterCache by_items(ClusterCacheLimits{100, size_t{1} << 30});
  // Bytes first: a budget of 64 KiB, an item limit far above what it holds.
  ClusterCache by_bytes(ClusterCacheLimits{1000000, 64 * 1024});
  for (int i = 0; i < 10000; ++i) {
    const std::string item = "x" + std::to_string(i);
    by_items.Put(H(item), item, "cluster-" + std::to_string(i % 10), 0);
    by_bytes.Put(H(item), item, "cluster-" + std::to_string(i % 10), 0);
    REQUIRE(by_items.size() <= 100);
    REQUIRE(by_bytes.memory_bytes() <= 64 * 1024);
  }
  CHECK(by_bytes.size() > 100);
}

TEST_CASE("SharedClusterCache: threads find what was put, within the byte budget (issue 52)",
          "[contentdb][near_duplicates]") {
  ClusterCacheLimits limits;
  limits.bytes = size_t{4} << 20;
  SharedClusterCache cache(limits);
  std::atomic<int> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      constexpr int kBatch = 100;  // items a call, as a request's candidates
      std::vector<std::string> items(kBatch), want(kBatch), clusters(kBatch);
      std::vector<Hash128> hashes(kBatch);
      std::vector<ClusterCache::Hit> found(kBatch);
      for (int round = 0; round < 3; ++round) {
        for (int b = 0; b < 20000; b += kBatch) {
          for (int k = 0; k < kBatch; ++k) {
            const int n = ((b + k) * 7 + t * 1000) % 20000;  // threads overlap on items
            items[k] = "item-" + std::to_string(n);
            want[k] = ClusterOf(items[k], n);
            hashes[k] = H(items[k]);
          }
          cache.FindMany(hashes.data(), kBatch, 0, found.data(), clusters.data());
          std::vector<Hash128> put;
          std::vector<std::string_view> put_ids, put_clusters;
          for (int k = 0; k < kBatch; ++k) {
            switch (found[k]) {
              case ClusterCache::Hit::kNone:
                put.push_back(hashes[k]);
                put_ids.push_back(items[k]);
                put_clusters.push_back(want[k]);
                break;
              case ClusterCache::Hit::kSelf:
                wrong += want[k] != items[k];
                ++hits;
                break;
              case ClusterCache::Hit::kCluster:
                wrong += want[k] != clusters[k];
                ++hits;
                break;
              case ClusterCache::Hit::kMiss:
                wrong += !want[k].empty();
                ++hits;
                break;
            }
          }
          cache.PutMany(put.data(), put_ids.data(), put_clusters.data(), put.size(), 0);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(wrong == 0);
  CHECK(hits > 0);
  CHECK(cache.memory_bytes() <= limits.bytes);
  CHECK(cache.size() > 0);
}

}  // namespace ef::contentdb

namespace ef::contentdb {

// docs/CONFIG.md (serve.content_cache_bytes): "64 MiB keeps at least the last
// 560,000 items looked up" (with clusters of a few bytes: ShortClusterOf). A generation's table is
// filled to 3/4 at its largest, which may be any count of slots: before (a power of two at most
// half full) 64 MiB kept about 260,000 to 520,000. Item i's cluster, as ClusterOf with no long
// ones: most items are their own, one in 5 has a short cluster, one in 7 is not known.
std::string ShortClusterOf(const std::string& item, int i) {
  if (i % 7 == 0) return "";
  if (i % 5 == 2) return "c" + std::to_string(i % 1000);
  return item;
}

TEST_CASE("SharedClusterCache: 64 MiB keeps the last 560,000 items looked up (issue 52)",
          "[contentdb][near_duplicates]") {
  ClusterCacheLimits limits;
  limits.bytes = size_t{64} << 20;
  SharedClusterCache cache(limits);
  constexpr int kItems = 560000, kBatch = 1000;
  std::vector<std::string> items(kBatch), clusters(kBatch);
  std::vector<std::string_view> ids(kBatch), cluster_views(kBatch);
  std::vector<Hash128> hashes(kBatch);
  // More than the budget holds first (so its generations have filled and
  // flipped), then the 560,000 checked.
  for (int start = -kItems; start < kItems; start += kBatch) {
    for (int k = 0; k < kBatch; ++k) {
      items[k] = "item-" + std::to_string(start + k);
      clusters[k] = ShortClusterOf(items[k], start + k + kItems);
      ids[k] = items[k];
      cluster_views[k] = clusters[k];
      hashes[k] = H(items[k]);
    }
    cache.PutMany(hashes.data(), ids.data(), cluster_views.data(), kBatch, 0);
  }
  CHECK(cache.memory_bytes() <= limits.bytes);
  std::vector<ClusterCache::Hit> found(kBatch);
  std::vector<std::string> got(kBatch);
  int kept = 0, wrong = 0;
  for (int start = 0; start < kItems; start += kBatch) {
    for (int k = 0; k < kBatch; ++k) hashes[k] = H("item-" + std::to_string(start + k));
    cache.FindMany(hashes.data(), kBatch, 0, found.data(), got.data());
    for (int k = 0; k < kBatch; ++k) {
      const std::string item = "item-" + std::to_string(start + k);
      const std::string want = ShortClusterOf(item, start + k + kItems);
      switch (found[k]) {
        case ClusterCache::Hit::kNone:
          continue;
        case ClusterCache::Hit::kSelf:
          wrong += want != item;
          break;
        case ClusterCache::Hit::kCluster:
          wrong += want != got[k];
          break;
        case ClusterCache::Hit::kMiss:
          wrong += !want.empty();
          break;
      }
      ++kept;
    }
  }
  CHECK(wrong == 0);
  CHECK(kept == kItems);
}

}  // namespace ef::contentdb
