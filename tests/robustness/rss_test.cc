// Memory stays bounded while Redis is down for a minute and events keep
// arriving: the daemon pauses consumption instead of buffering (issue 9,
// part 2).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "support/fault_stream.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

// The bound (docs/RELIABILITY.md): the daemon's resident set with the default
// pipeline settings stays under 256 MiB while Redis is away; it pauses its
// partitions, so what it holds is one batch plus librdkafka's prefetch queue.
constexpr long kRssBoundKiB = 256 * 1024;

// VmRSS of `pid` in KiB; -1 if unreadable.
long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

TEST_CASE("rss: memory stays bounded while Redis is down for 60 s and events keep arriving",
          "[robustness][rss]") {
  Stack stack(4);
  const std::string config = stack.WriteConfig();
  Stream stream(stack, "rss", 100, 10ms);
  auto daemon = stack.StartDaemon(config);
  bool started = WaitFor([&] { return !daemon->Running() || stack.TotalCommitted() > 0; }, 30s);
  INFO(daemon->Output());
  REQUIRE(started);
  const long before = RssKiB(daemon->pid());
  const size_t produced_before = stream.delivered();
  stack.redis().Stop();
  long peak = before;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    peak = std::max(peak, RssKiB(daemon->pid()));
    std::this_thread::sleep_for(500ms);  // sampling period while the outage lasts
  }
  const size_t produced_during = stream.delivered() - produced_before;
  stack.redis().Start();
  stream.Stop();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  const long after = RssKiB(daemon->pid());
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const auto events = stream.events();
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), events);
  std::printf("rss: injected Redis down 60 s while %zu events arrived\n", produced_during);
  std::printf(
      "rss: VmRSS %ld MiB before, peak %ld MiB during (bound %ld MiB), %ld MiB after catching "
      "up; %zu events, all committed, %zu false negatives\n",
      before / 1024, peak / 1024, kRssBoundKiB / 1024, after / 1024, events.size(), missing.size());
  CHECK(before > 0);
  CHECK(peak < kRssBoundKiB);
  CHECK(stream.failed() == 0);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
