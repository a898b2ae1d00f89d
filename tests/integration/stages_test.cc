// Layout v2 writer behaviour on real parts (issue 10): replaying a range twice
// adds no stage and no bit, two daemons writing the same heavy users lose nothing
// and over-allocate at most one stage, and the upgrade of a running v1
// deployment with `exposure-filter layout upgrade`.
#include "bloom/stages.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

// `users` users with `items` items each, all stamped `ts_ms`, in list events of
// up to 30 items, shuffled.
std::vector<TestEvent> HeavyEvents(const std::string& tag, int users, int items, int64_t ts_ms,
                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TestEvent> out;
  for (int u = 0; u < users; ++u) {
    for (int i = 0; i < items;) {
      TestEvent e;
      e.user = tag + "-u" + std::to_string(u);
      e.ts_ms = ts_ms;
      const int n = std::min(items - i, 1 + static_cast<int>(rng() % 30));
      for (int j = 0; j < n; ++j, ++i) e.items.push_back(e.user + "-i" + std::to_string(i));
      out.push_back(std::move(e));
    }
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// user -> the value of its key of the bucket of `ts_ms`.
std::map<std::string, std::string> Values(Stack& stack, const Layout& layout,
                                          const std::vector<TestEvent>& events, int64_t ts_ms) {
  std::map<std::string, std::string> out;
  const int64_t b = BucketStart(ts_ms / 1000, layout.bucket_seconds);
  for (const auto& e : events) {
    if (out.count(e.user)) continue;
    out[e.user] = stack.redis()
                      .Command({"GET", MakeKey(layout.prefix, e.user, b, layout.bucket_seconds)})
                      .str;
  }
  return out;
}

Layout V2Layout(const std::string& prefix = "ef:") {
  FilterConfig f;
  f.key_prefix = prefix;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

}  // namespace

TEST_CASE("stages: replaying the same range twice adds no stage and no bit",
          "[integration][v2][replay]") {
  Stack stack(4);
  const int64_t now = SystemClock().NowMs();
  // Heavy users (up to 12x items_per_bucket = 200) and light ones.
  auto events = HeavyEvents("rp", 6, 2400, now - 60000, 3);
  auto light = HeavyEvents("rl", 20, 50, now - 60000, 4);
  events.insert(events.end(), light.begin(), light.end());
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 120s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const Layout layout = V2Layout();
  auto conn = stack.redis().Connect();
  REQUIRE(MissingItems(*conn, layout, events).empty());
  const auto written = Values(stack, layout, events, now - 60000);
  size_t heavy_stages = 0;
  for (const auto& [user, v] : written)
    heavy_stages = std::max(heavy_stages, StagesPresent(layout.stage_table, v.size()));
  REQUIRE(heavy_stages >= 4);  // the heavy users really grew
  // `layout stats` sees the same: 26 keys of 26 users, the 20 light ones in stage 0.
  auto stats = RunCommand({EF_BINARY, "layout", "stats", "--json", "-c", config}, "", true);
  INFO(stats.out);
  REQUIRE(stats.code == 0);
  auto j = nlohmann::json::parse(stats.out);
  CHECK(j["version"] == 3);  // the daemon's fresh deployment
  CHECK(j["keys"] == written.size());
  CHECK(j["users"] == written.size());
  CHECK(j["keys_by_stages"]["1"] == 20);
  uint64_t bytes = 0;
  for (const auto& [user, v] : written) bytes += v.size();
  CHECK(j["value_bytes"] == bytes);

  const std::string since = FormatTimeRfc3339(now - 3600 * 1000);
  const std::string until = FormatTimeRfc3339(now + 5000);
  for (int round = 1; round <= 2; ++round) {
    // Small batches: a key is written by many batches of one replay, as in a
    // long replay.
    auto r = RunCommand({EF_BINARY, "replay", "-c", config, "--since", since, "--until", until,
                         "--set", "pipeline.batch_max_events=50"},
                        "", /*stdout_only=*/true);
    INFO("replay round " << round << ": " << r.out);
    REQUIRE(r.code == 0);
    const auto after = Values(stack, layout, events, now - 60000);
    size_t changed = 0;
    for (const auto& [user, v] : written) changed += after.at(user) != v;
    std::printf("stages/replay: round %d: %zu of %zu keys changed (heavy keys have %zu stages)\n",
                round, changed, written.size(), heavy_stages);
    CHECK(changed == 0);
  }
}

TEST_CASE("stages: two daemons writing the same heavy users lose nothing, at most one stage more",
          "[integration][v2][concurrent]") {
  Stack stack(8);
  const int64_t now = SystemClock().NowMs();
  auto events = HeavyEvents("cc", 8, 3000, now - 60000, 5);
  // Keyed by event, not by user: both daemons write every user's key at once.
  std::vector<std::string> payloads;
  for (const auto& e : events) payloads.push_back(e.Json());
  stack.ProduceRaw(payloads, now - 60000);
  // A single writer into its own prefix, for comparison.
  auto single = stack.StartDaemon(
      stack.WriteConfig("single.yaml",
                        "filter:\n  key_prefix: \"one:\"\nkafka:\n  group_id: one\n"),
      "single.log");
  // Two daemons in the stack's group, into the default prefix.
  const std::string config = stack.WriteConfig();
  auto a = stack.StartDaemon(config, "a.log");
  auto b = stack.StartDaemon(config, "b.log");
  REQUIRE(WaitFor([&] { return !single->Running() || GroupCaughtUp(stack, "one"); }, 120s));
  REQUIRE(stack.AwaitCommitted(*a, 120s));
  INFO("daemon a:\n" << a->Output() << "daemon b:\n" << b->Output());
  REQUIRE(b->Running());
  // The first to leave rebalances the group; the other's final commit may then
  // be refused ("rebalance in progress": a warning, exit 0, nothing lost, the
  // partitions' next owner re-reads from the last commit).
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  for (Process* d : {a.get(), b.get()}) {
    const auto code = d->Wait(30s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
  }
  REQUIRE(single->Stop(SIGTERM, 30s) == 0);
  // Both daemons wrote (the group split the partitions).
  CHECK(AssignmentsWithPartitions(a->Output()) > 0);
  CHECK(AssignmentsWithPartitions(b->Output()) > 0);

  const Layout two = V2Layout(), one = V2Layout("one:");
  auto conn = stack.redis().Connect();
  const auto missing = MissingItems(*conn, two, events);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
  CHECK(MissingItems(*conn, one, events).empty());
  const auto v_two = Values(stack, two, events, now - 60000);
  const auto v_one = Values(stack, one, events, now - 60000);
  for (const auto& [user, v] : v_two) {
    const size_t s2 = StagesPresent(two.stage_table, v.size());
    const size_t s1 = StagesPresent(one.stage_table, v_one.at(user).size());
    std::printf("stages/concurrent: %s: one writer %zu stages, two writers %zu\n", user.c_str(), s1,
                s2);
    CHECK(s2 <= s1 + 1);
  }
}

TEST_CASE("stages: a running v1 deployment is upgraded with `layout upgrade`, losing nothing",
          "[integration][v2][upgrade]") {
  Stack stack(4);
  const Layout v2 = V2Layout();
  // The deployment's existing data: a version-1 meta of the same stage 0.
  std::vector<std::string> hset = {"HSET", "ef:meta"};
  for (const auto& [f, v] : v2.SingleStage().ToFields()) {
    hset.push_back(f);
    hset.push_back(v);
  }
  stack.redis().Command(hset);
  const std::string config = stack.WriteConfig();
  auto daemon = stack.StartDaemon(config);
  const int64_t now = SystemClock().NowMs();
  auto before = HeavyEvents("up1", 3, 1500, now - 60000, 6);
  stack.Produce(before);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  // Still version 1: stage 0 only, even for 7.5x users; the daemon said why.
  for (const auto& [user, v] : Values(stack, v2, before, now - 60000))
    CHECK(v.size() <= (v2.m + 7) / 8);
  CHECK(daemon->Output().find("layout upgrade") != std::string::npos);
  auto show = RunCommand({EF_BINARY, "layout", "show", "-c", config}, "", true);
  CHECK(show.code == 0);
  CHECK(show.out.find("version 1 (stage 0 alone)") != std::string::npos);

  auto dry = RunCommand({EF_BINARY, "layout", "upgrade", "--to", "2", "--dry-run", "-c", config},
                        "", true);
  CHECK(dry.code == 0);
  CHECK(stack.redis().Command({"HGET", "ef:meta", "version"}).str == "1");
  auto up = RunCommand({EF_BINARY, "layout", "upgrade", "--to", "2", "-c", config}, "", true);
  INFO(up.out);
  REQUIRE(up.code == 0);
  CHECK(stack.redis().Command({"HGET", "ef:meta", "version"}).str == "2");
  auto again = RunCommand({EF_BINARY, "layout", "upgrade", "--to", "2", "-c", config}, "", true);
  CHECK(again.code == 0);
  CHECK(again.out.find("nothing to do") != std::string::npos);

  // The running daemon switches by itself at a write within 10 s: keep a trickle
  // of light events flowing until it says so. Then new items of heavy users go
  // to stage 1 and on.
  int trickle = 0;
  REQUIRE(WaitFor(
      [&] {
        stack.Produce({TestEvent{"trickle", {"t" + std::to_string(trickle++)}, now}});
        return daemon->Output().find("version 2 now") != std::string::npos || !daemon->Running();
      },
      30s));
  REQUIRE(daemon->Running());
  auto after = HeavyEvents("up2", 3, 1500, now - 30000, 7);
  stack.Produce(after);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  size_t grown = 0;
  for (const auto& [user, v] : Values(stack, v2, after, now - 30000))
    grown += StagesPresent(v2.stage_table, v.size()) > 1;
  CHECK(grown == 3);
  auto conn = stack.redis().Connect();
  std::vector<TestEvent> all = before;
  all.insert(all.end(), after.begin(), after.end());
  const auto missing = MissingItems(*conn, v2, all);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
  // A version-1 program now refuses the meta (it would miss later stages).
  auto v1_check =
      RunCommand({EF_BINARY, "run", "-c", config, "--set", "filter.stages=1"}, "", false);
  CHECK(v1_check.code == 5);  // app::kExitLayout
  CHECK(v1_check.out.find("version: stored 2, configured 1") != std::string::npos);
}

}  // namespace ef::test
