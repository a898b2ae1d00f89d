// End to end on real parts: redis-server + librdkafka mock cluster over TCP +
// the exposure-filter binary as a child process.
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "read/bloom_reader.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

Layout DefaultLayout(int64_t items_per_bucket = 200, double fpr = 0.01) {
  FilterConfig f;
  f.items_per_bucket = items_per_bucket;
  f.fpr = fpr;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return l.value();
}

std::vector<std::string> Missing(Stack& stack, const Layout& layout,
                                 const std::vector<TestEvent>& events) {
  return MissingItems(*stack.redis().Connect(), layout, events);
}

// "stopped: N messages, ..." from the daemon's last log line.
int64_t MessagesProcessed(const std::string& log) {
  auto pos = log.rfind("stopped: ");
  if (pos == std::string::npos) return -1;
  return std::stoll(log.substr(pos + 9));
}

}  // namespace

TEST_CASE("every produced exposure is found and the measured FPR is within target",
          "[integration]") {
  Stack stack;
  const int64_t now = SystemClock().NowMs();
  // 200 users x 60 events over 3 days: about 30 items per user and day.
  auto events = MakeEvents("fpr", 200, 60, 3, now, 42);
  stack.Produce(events);
  auto daemon = stack.StartDaemon(
      stack.WriteConfig("ef.yaml", "filter:\n  items_per_bucket: 40\n  fpr: 0.01\n"));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  const Layout layout = DefaultLayout(40, 0.01);
  auto missing = Missing(stack, layout, events);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());  // zero false negatives

  // Never-exposed items for the same users: the share reported seen is the FPR.
  std::set<std::string> users;
  for (const auto& e : events) users.insert(e.user);
  auto conn = stack.redis().Connect();
  BloomReader reader(*conn, layout);
  size_t probes = 0, false_positives = 0;
  for (const auto& u : users) {
    std::vector<std::string> candidates;
    for (int i = 0; i < 100; ++i) candidates.push_back(u + "-never-" + std::to_string(i));
    auto r = reader.Check(u, candidates, now / 1000);
    REQUIRE(r.ok());
    for (bool s : r->seen) false_positives += s;
    probes += candidates.size();
  }
  const double fpr = static_cast<double>(false_positives) / static_cast<double>(probes);
  INFO("measured FPR " << fpr << " over " << probes << " probes");
  CHECK(fpr <= 0.01);
  // Each key expires at its bucket's end + window (EXPIREAT, contract rule 4).
  const int64_t bucket = BucketStart(events[0].ts_ms / 1000, layout.bucket_seconds);
  const std::string key = MakeKey("ef:", events[0].user, bucket, layout.bucket_seconds);
  auto expire = stack.redis().Command({"EXPIRETIME", key});
  CHECK(expire.integer == ExpireAt(bucket, layout.bucket_seconds, layout.window_seconds));
}

TEST_CASE("SIGTERM drains and commits, and a restart resumes from the committed offsets",
          "[integration]") {
  Stack stack;
  const int64_t now = SystemClock().NowMs();
  auto first = MakeEvents("a", 50, 20, 2, now, 1);
  stack.Produce(first);
  const std::string config = stack.WriteConfig();
  {
    auto daemon = stack.StartDaemon(config, "run1.log");
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
    REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
    CHECK(daemon->Output().find("stopped: ") != std::string::npos);
  }
  const int64_t committed_after_first = stack.TotalCommitted();
  CHECK(committed_after_first == static_cast<int64_t>(first.size()));

  auto second = MakeEvents("b", 50, 10, 2, now, 2);
  stack.Produce(second);
  auto daemon = stack.StartDaemon(config, "run2.log");
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  // The second run read only what the first had not committed.
  CHECK(MessagesProcessed(daemon->Output()) == static_cast<int64_t>(second.size()));
  CHECK(Missing(stack, DefaultLayout(), first).empty());
  CHECK(Missing(stack, DefaultLayout(), second).empty());
}

TEST_CASE("a Redis outage in the middle of the stream loses nothing", "[integration]") {
  Stack stack;
  const int64_t now = SystemClock().NowMs();
  auto before = MakeEvents("pre", 40, 20, 1, now, 3);
  stack.Produce(before);
  auto daemon = stack.StartDaemon(stack.WriteConfig());
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  const int64_t committed_before = stack.TotalCommitted();

  stack.redis().Stop();
  auto during = MakeEvents("during", 40, 20, 1, now, 4);
  stack.Produce(during);
  // The daemon sees the failure (logged once) and commits nothing past it.
  REQUIRE(WaitFor([&] { return daemon->Output().find("pausing consumption") != std::string::npos; },
                  30s));
  CHECK(stack.TotalCommitted() == committed_before);
  CHECK(daemon->Running());

  stack.redis().Start();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  CHECK(daemon->Output().find("writes succeed again") != std::string::npos);
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  CHECK(Missing(stack, DefaultLayout(), before).empty());
  CHECK(Missing(stack, DefaultLayout(), during).empty());
}

TEST_CASE("SIGKILL mid-stream loses nothing: the next run re-reads what was not committed",
          "[integration]") {
  Stack stack;
  const int64_t now = SystemClock().NowMs();
  auto events = MakeEvents("kill", 100, 100, 2, now, 5);
  stack.Produce(events);
  const int64_t produced = static_cast<int64_t>(events.size());
  // Run 1 writes in many small batches and commits only every hour: when it is
  // killed, its work is written and (at least partly) uncommitted for sure,
  // whatever the machine's speed.
  const std::string uncommitting =
      stack.WriteConfig("run1.yaml", "pipeline:\n  batch_max_events: 500\n  commit_interval: 1h\n");
  const std::string config =
      stack.WriteConfig("ef.yaml", "pipeline:\n  batch_max_events: 500\n");  // many small batches
  {
    // Not StartDaemon: it sets pipeline.commit_interval=200ms on the command line,
    // which wins over run1.yaml's 1h (a loaded machine then saw run 1 commit all
    // 10,000 before its SIGKILL: "committed when killed: 10000 of 10000").
    auto daemon =
        std::make_unique<Process>(std::vector<std::string>{EF_BINARY, "run", "-c", uncommitting},
                                  stack.dir().File("run1.log"));
    auto conn = stack.redis().Connect();
    const bool written = WaitFor(
        [&] { return !daemon->Running() || MissingItems(*conn, DefaultLayout(), events).empty(); },
        60s);
    INFO(daemon->Output());
    REQUIRE(written);
    REQUIRE(daemon->Running());
    daemon->Signal(SIGKILL);
    REQUIRE(daemon->Wait(10s).has_value());
  }
  // Read after the kill: nothing commits any more.
  const int64_t committed_at_kill = stack.TotalCommitted();
  INFO("committed when killed: " << committed_at_kill << " of " << produced);
  REQUIRE(committed_at_kill < produced);
  auto daemon = stack.StartDaemon(config, "run2.log");
  // Stopped only once it runs (owns partitions): when the first run had
  // committed everything before its SIGKILL, AwaitCommitted returns at once, and
  // a SIGTERM before the daemon installs its handler kills it (exit 143).
  REQUIRE(WaitFor([&] { return AssignmentsWithPartitions(daemon->Output()) > 0; }, 60s));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  // The second run re-read exactly what the first had not committed.
  CHECK(MessagesProcessed(daemon->Output()) == produced - committed_at_kill);
  CHECK(Missing(stack, DefaultLayout(), events).empty());
}

TEST_CASE("bad events are counted and skipped without blocking the partition", "[integration]") {
  Stack stack(1);
  const int64_t now = SystemClock().NowMs();
  stack.ProduceRaw({"not json", "{\"user_id\": \"\", \"item_id\": \"x\"}",
                    "{\"item_id\": \"x\", \"ts\": 1}", std::string("\0\1\2", 3)});
  auto good = MakeEvents("good", 5, 5, 1, now, 6);
  stack.Produce(good);
  auto daemon = stack.StartDaemon(stack.WriteConfig());
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  CHECK(Missing(stack, DefaultLayout(), good).empty());
  const std::string log = daemon->Output();
  CHECK(log.find("4 rejected") != std::string::npos);
}

TEST_CASE("a writer whose layout disagrees with the stored one refuses to run", "[integration]") {
  Stack stack;
  auto first = stack.StartDaemon(stack.WriteConfig("a.yaml"), "a.log");
  REQUIRE(WaitFor([&] { return stack.redis().Command({"EXISTS", "ef:meta"}).integer == 1; }, 30s));
  REQUIRE(first->Stop(SIGTERM, 30s) == 0);
  auto second = stack.StartDaemon(stack.WriteConfig("b.yaml", "filter:\n  fpr: 0.001\n"), "b.log");
  auto code = second->Wait(30s);
  REQUIRE(code.has_value());
  CHECK(*code == 5);  // app::kExitLayout
  const std::string log = second->Output();
  INFO(log);
  CHECK(log.find("disagrees") != std::string::npos);
  CHECK(log.find("m: stored 3345, configured") != std::string::npos);
}

TEST_CASE("check reports seen and unseen items of a user", "[integration]") {
  Stack stack;
  const int64_t now = SystemClock().NowMs();
  std::vector<TestEvent> events = {{"carol", {"i1"}, now}, {"carol", {"i2", "i3"}, now - 86400000}};
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  auto r = RunCommand(
      {EF_BINARY, "check", "-c", config, "--user", "carol", "--json", "i1", "i2", "i3", "i4"}, "",
      true);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\"seen\":[\"i1\",\"i2\",\"i3\"]") != std::string::npos);
  CHECK(r.out.find("\"unseen\":[\"i4\"]") != std::string::npos);
  auto piped = RunCommand({EF_BINARY, "check", "-c", config, "-u", "carol", "--unseen"},
                          "i1\ni9\ni3\n", true);
  REQUIRE(piped.code == 0);
  CHECK(piped.out == "i9\n");
}

}  // namespace ef::test

namespace ef::test {

TEST_CASE("SIGTERM while Kafka is unreachable exits by itself with a clear error",
          "[integration]") {
  Stack stack;
  stack.Produce(MakeEvents("down", 5, 5, 1, SystemClock().NowMs(), 9));
  auto daemon = stack.StartDaemon(stack.WriteConfig());
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(stack.kafka().SetBrokerDown(-1).ok());
  daemon->Signal(SIGTERM);
  // The final commit waits a bounded time (10 s) for the coordinator.
  auto code = daemon->Wait(45s);
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  CHECK(daemon->Output().find("commit") != std::string::npos);
}

}  // namespace ef::test
