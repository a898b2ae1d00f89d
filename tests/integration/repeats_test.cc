// Repeated exposures (issue 29 item 3): users re-see items, so a stream where each
// item arrives 3 times on average must not fill a stage faster than its distinct
// items do. Users below the design load (0.5x and 0.9x distinct items of
// filter.items_per_bucket, each sent 3 times in random order over many events and
// batches) go through Kafka (mock cluster) and the daemon into a real
// redis-server: every key keeps stage 0 alone, version 1's bytes, and no item is
// missing.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/stages.h"
#include "common/clock.h"
#include "support/stack.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

}  // namespace

TEST_CASE(
    "repeats: users below the design load whose items arrive 3 times each keep stage 0 alone "
    "(version 1's bytes) and lose nothing",
    "[integration][v3][stages]") {
  constexpr int kItemsPerBucket = 200;
  struct Class {
    double multiple;
    int users;
  };
  const std::vector<Class> classes = {{0.5, 20}, {0.9, 40}};
  Stack stack(4);
  const int64_t now_ms = SystemClock().NowMs();
  std::mt19937_64 rng(33);
  std::vector<TestEvent> events;
  std::vector<TestEvent> distinct;  // one event per user: its distinct items
  size_t exposures = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    const int n = static_cast<int>(classes[c].multiple * kItemsPerBucket);
    for (int u = 0; u < classes[c].users; ++u) {
      const std::string user = "r" + std::to_string(c) + "-u" + std::to_string(u);
      std::vector<std::string> items;
      for (int i = 0; i < n; ++i) items.push_back(user + "-i" + std::to_string(i));
      distinct.push_back({user, items, now_ms});
      std::vector<std::string> stream;
      for (int r = 0; r < 3; ++r) stream.insert(stream.end(), items.begin(), items.end());
      std::shuffle(stream.begin(), stream.end(), rng);
      exposures += stream.size();
      for (size_t i = 0; i < stream.size();) {
        TestEvent e{user, {}, now_ms};
        const size_t k = std::min(stream.size() - i, size_t{1} + rng() % 12);
        e.items.assign(stream.begin() + static_cast<std::ptrdiff_t>(i),
                       stream.begin() + static_cast<std::ptrdiff_t>(i + k));
        i += k;
        events.push_back(std::move(e));
      }
    }
  }
  std::shuffle(events.begin(), events.end(), rng);
  stack.Produce(events);
  // Small batches: a user's repeats are spread over many writes.
  auto daemon = stack.StartDaemon(stack.WriteConfig(
      "ef.yaml", "pipeline:\n  batch_max_events: 200\n  commit_interval: 200ms\n"));
  REQUIRE(stack.AwaitCommitted(*daemon, 120s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const size_t v1_bytes = (layout->m + 7) / 8;
  const int64_t bucket = BucketStart(now_ms / 1000, layout->bucket_seconds);
  size_t keys = 0, over = 0, max_bytes = 0;
  for (const TestEvent& d : distinct) {
    const std::string value =
        stack.redis()
            .Command({"GET", MakeKey(layout->prefix, d.user, bucket, layout->bucket_seconds)})
            .str;
    ++keys;
    over += value.size() > v1_bytes;
    max_bytes = std::max(max_bytes, value.size());
  }
  auto conn = stack.redis().Connect();
  const auto missing = MissingItems(*conn, *layout, distinct);
  std::printf(
      "repeats: %zu users at 0.5x and 0.9x the design load, %zu exposures (each item 3 times) "
      "in %zu events; keys past stage 0: %zu of %zu (largest %zu bytes, version 1: %zu); "
      "missing items: %zu\n",
      keys, exposures, events.size(), over, keys, max_bytes, v1_bytes, missing.size());
  CHECK(missing.empty());
  CHECK(over == 0);
  CHECK(max_bytes <= v1_bytes);
}

}  // namespace ef::test
