// Consumer-group rebalances on real parts: two daemons in one group over the
// librdkafka mock cluster, a stream produced while the second joins and leaves,
// for the eager and the cooperative assignment protocols (issue 9, defects 1, 3).
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "config/config.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The longest a group may take, after a member joined or left, to commit
// everything that was produced before (docs/RELIABILITY.md): the mock's first
// join waits 3 s, a rebalance needs one more join round plus one commit
// interval; 30 s leaves room for a loaded 2-core CI machine.
constexpr auto kResumeBound = 30s;

Layout TestLayout() {
  FilterConfig f;
  f.items_per_bucket = 200;
  f.fpr = 0.01;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return l.value();
}

// Produces one event every `interval` from a thread of its own, until stopped.
class Trickle {
 public:
  Trickle(Stack& stack, std::chrono::milliseconds interval) : stack_(stack) {
    thread_ = std::thread([this, interval] {
      int n = 0;
      while (!stop_.load()) {
        TestEvent e{
            "rb-u" + std::to_string(n % 37), {"rb-i" + std::to_string(n)}, SystemClock().NowMs()};
        stack_.Produce({e});
        {
          std::lock_guard<std::mutex> lock(mu_);
          events_.push_back(std::move(e));
        }
        ++n;
        std::this_thread::sleep_for(interval);  // pacing the load, not synchronisation
      }
    });
  }
  ~Trickle() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<TestEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  Stack& stack_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<TestEvent> events_;
};

// Every partition's committed offset has reached `high` (a snapshot of the
// high watermarks).
bool CommittedUpTo(Stack& stack, const std::vector<PartitionOffsets>& high) {
  auto now = stack.Offsets();
  for (const auto& h : high) {
    for (const auto& p : now) {
      if (p.tp == h.tp && p.committed < h.high) return false;
    }
  }
  return true;
}

void RunJoinAndLeave(const std::string& strategy) {
  Stack stack(4);
  const std::string config = WriteAssignmentConfig(stack, strategy);
  Trickle trickle(stack, 10ms);  // ~100 events/s: the low-traffic case
  auto first = stack.StartDaemon(config, "first.log");
  REQUIRE(WaitFor([&] { return AssignmentsWithPartitions(first->Output()) > 0; }, 30s));
  REQUIRE(WaitFor([&] { return stack.TotalCommitted() > 0; }, 30s));

  // A second daemon joins: plain scale-out.
  auto second = stack.StartDaemon(config, "second.log");
  const auto joined_at = Clock::now();
  bool second_assigned =
      WaitFor([&] { return AssignmentsWithPartitions(second->Output()) > 0; }, kResumeBound);
  INFO("first daemon:\n" << first->Output() << "\nsecond daemon:\n" << second->Output());
  REQUIRE(second_assigned);
  // Everything produced up to now is committed within the bound: the group
  // did not stall.
  auto snapshot = stack.Offsets();
  bool resumed = WaitFor([&] { return CommittedUpTo(stack, snapshot); }, kResumeBound);
  const double resume_s = std::chrono::duration<double>(Clock::now() - joined_at).count();
  std::printf("%s: second daemon joined; group committed past the join after %.1f s\n",
              strategy.c_str(), resume_s);
  REQUIRE(resumed);
  REQUIRE(first->Running());
  REQUIRE(second->Running());

  // The second leaves (SIGTERM): the first takes its partitions over.
  REQUIRE(second->Stop(SIGTERM, 30s) == 0);
  const auto left_at = Clock::now();
  snapshot = stack.Offsets();
  resumed = WaitFor([&] { return CommittedUpTo(stack, snapshot); }, kResumeBound);
  std::printf("%s: second daemon left; group committed past the leave after %.1f s\n",
              strategy.c_str(), std::chrono::duration<double>(Clock::now() - left_at).count());
  REQUIRE(resumed);

  trickle.Stop();
  REQUIRE(stack.AwaitCommitted(*first, 60s));
  REQUIRE(first->Stop(SIGTERM, 30s) == 0);
  auto events = trickle.events();
  auto missing = MissingItems(*stack.redis().Connect(), TestLayout(), events);
  std::printf("%s: %zu events produced, %zu missing\n", strategy.c_str(), events.size(),
              missing.size());
  CHECK(missing.empty());
}

}  // namespace

TEST_CASE("rebalance: a daemon joining and leaving at low traffic never stalls the group (eager)",
          "[integration][rebalance]") {
  RunJoinAndLeave("range");
}

TEST_CASE(
    "rebalance: a daemon joining and leaving at low traffic never stalls the group "
    "(cooperative-sticky)",
    "[integration][rebalance]") {
  RunJoinAndLeave("cooperative-sticky");
}

}  // namespace ef::test
