// Redis faults while a stream is produced: Redis stopped and started again,
// and Redis restarted empty followed by `exposure-filter replay` of the lost
// range (issue 9, part 2).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "common/clock.h"
#include "common/time_arg.h"
#include "support/fault_stream.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

}  // namespace

TEST_CASE("redis faults: Redis stopped mid-stream and started again loses nothing",
          "[robustness][redis]") {
  Stack stack(4);
  const std::string config = stack.WriteConfig();
  Stream stream(stack, "rstop", 5, 10ms);
  auto daemon = stack.StartDaemonAwaitingCommit(config);
  CommitGapMonitor monitor(stack);
  stack.redis().Stop();
  const int64_t committed_at_stop = stack.TotalCommitted();
  std::this_thread::sleep_for(8s);  // the outage's duration, events keep arriving
  // Nothing is committed while Redis is away.
  const int64_t committed_during = stack.TotalCommitted();
  stack.redis().Start();
  std::this_thread::sleep_for(2s);  // keep producing after the outage
  stream.Stop();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  monitor.Stop();
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const auto events = stream.events();
  const int64_t processed = MessagesProcessed(daemon->Output());
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), events);
  std::printf(
      "redis-stop: injected Redis down 8 s mid-stream (SIGTERM, then started on its AOF)\n");
  std::printf(
      "redis-stop: %zu events produced, daemon processed %lld (%lld re-read), committed %lld at "
      "the stop and %lld after 8 s down, all committed at the end, longest commit gap %.1f s, "
      "%zu false negatives\n",
      events.size(), static_cast<long long>(processed),
      static_cast<long long>(processed - static_cast<int64_t>(events.size())),
      static_cast<long long>(committed_at_stop), static_cast<long long>(committed_during),
      monitor.MaxGapSeconds(), missing.size());
  CHECK(stream.failed() == 0);
  // At most what was already on its way when Redis went away gets committed.
  CHECK(committed_during <= committed_at_stop + 2000);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

TEST_CASE(
    "redis faults: Redis restarted empty mid-stream, then replay of the lost range: nothing "
    "missing",
    "[robustness][redis][replay]") {
  Stack stack(4);
  const std::string config = stack.WriteConfig();
  const int64_t since_ms = SystemClock().NowMs() - 1000;
  Stream stream(stack, "rempty", 5, 10ms);
  auto daemon = stack.StartDaemon(config);
  bool started = WaitFor([&] { return !daemon->Running() || stack.TotalCommitted() > 500; }, 30s);
  INFO(daemon->Output());
  REQUIRE(started);
  const int64_t restart_ms = SystemClock().NowMs();
  stack.redis().RestartEmpty();     // data lost, events keep arriving
  std::this_thread::sleep_for(4s);  // keep producing after the restart
  stream.Stop();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  const auto events = stream.events();
  const auto lost = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), events);
  // The layout is back (meta re-created on reconnect).
  CHECK(stack.redis().Command({"EXISTS", "ef:meta"}).integer == 1);

  // The operator replays from before the first event to just after the restart.
  const std::string since = FormatTimeRfc3339(since_ms);
  const std::string until = FormatTimeRfc3339(restart_ms + 2000);
  auto r = RunCommand({EF_BINARY, "replay", "-c", config, "--since", since, "--until", until}, "",
                      /*stdout_only=*/true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), events);
  std::printf(
      "redis-empty: injected Redis restarted empty mid-stream, then replay --since %s --until %s\n",
      since.c_str(), until.c_str());
  std::printf(
      "redis-empty: %zu events produced, %zu items lost by the restart before replay, all "
      "committed, %zu false negatives after replay\n",
      events.size(), lost.size(), missing.size());
  CHECK(stream.failed() == 0);
  CHECK(!lost.empty());  // the fault really lost data
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
