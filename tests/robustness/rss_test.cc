// Memory stays bounded while Redis is down for a minute and events keep
// arriving: the daemon pauses consumption instead of buffering; and while it
// drains a large backlog of 256 partitions at full speed (librdkafka's prefetch
// queue) (issue 9, part 2).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "common/clock.h"
#include "kafka/producer.h"
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

// A "Vm...:" line of /proc/<pid>/status in KiB (VmRSS: now; VmHWM: the kernel's
// peak resident set since the process started, so no spike between two reads is
// missed); -1 if unreadable.
long StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}
long RssKiB(pid_t pid) { return StatusKiB(pid, "VmRSS"); }
long PeakRssKiB(pid_t pid) { return StatusKiB(pid, "VmHWM"); }

}  // namespace

TEST_CASE("rss: memory stays bounded while Redis is down for 60 s and events keep arriving",
          "[robustness][rss]") {
  Stack stack(4);
  const std::string config = stack.WriteConfig();
  Stream stream(stack, "rss", 100, 10ms);
  auto daemon = stack.StartDaemonAwaitingCommit(config);
  const long before = RssKiB(daemon->pid());
  const size_t produced_before = stream.delivered();
  stack.redis().Stop();
  std::this_thread::sleep_for(60s);  // the outage: events keep arriving meanwhile
  // The peak since the daemon started, up to the end of the outage.
  const long peak = PeakRssKiB(daemon->pid());
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
      "rss: VmRSS %ld MiB before, VmHWM (peak VmRSS) %ld MiB up to the outage's end (bound %ld "
      "MiB), %ld MiB after catching "
      "up; %zu events, all committed, %zu false negatives\n",
      before / 1024, peak / 1024, kRssBoundKiB / 1024, after / 1024, events.size(), missing.size());
  // (No "peak >= before": the kernel syncs per-thread RSS counters lazily, so
  // two reads can disagree by a few hundred KiB.)
  CHECK(before > 0);
  CHECK(peak > 0);
  CHECK(peak < kRssBoundKiB);
  CHECK(stream.failed() == 0);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

namespace {

// The full-speed drain of 256 partitions. The bound (docs/RELIABILITY.md): the
// daemon's resident set with the default settings stays under 512 MiB while it
// drains a backlog as fast as it can, whatever the partition count. librdkafka's
// prefetch is bounded in total, not per partition (kafka/consumer.h): 32 MiB of
// payload in the queue plus one fetch response of at most 8 MiB (compressed)
// per broker, ~0.85M small events at most, ~380 bytes each in librdkafka
// (~330 MiB), plus the pipeline's batch and the writer's buffers. Measured:
// peaks of 256–423 MiB over 16 runs at 32, 256 and 1024 partitions.
constexpr int kWidePartitions = 256;
constexpr int kWideEvents = 1500000;
constexpr int kWideUsers = 50000;
constexpr int kWideSampleEvery = 25;  // every 25th event is checked in Redis: 60,000
constexpr long kWideRssBoundKiB = 512 * 1024;

}  // namespace

TEST_CASE("rss: memory stays bounded while 256 partitions of backlog are drained at full speed",
          "[robustness][rss][partitions]") {
  Stack stack(kWidePartitions);
  const std::string config = stack.WriteConfig();
  // The backlog, produced as fast as the producer goes, in big lz4 batches (the
  // mock broker keeps ~5 MiB per partition: 1.5M events use well under 0.5 MiB
  // each). Compressed batches are the hard case for the prefetch: a fetch
  // response is bounded in compressed bytes, the queue in decompressed ones.
  ProducerOptions po;
  po.bootstrap_servers = stack.kafka().bootstrap_servers();
  po.properties["linger.ms"] = "100";
  po.properties["compression.type"] = "lz4";  // as most producers (and loadgen) do
  auto producer = KafkaProducer::Create(po);
  REQUIRE(producer.ok());
  std::vector<TestEvent> sample;
  const int64_t now = SystemClock().NowMs();
  const auto produce_start = std::chrono::steady_clock::now();
  for (int n = 0; n < kWideEvents; ++n) {
    TestEvent e{"wide-u" + std::to_string(n % kWideUsers), {"wide-i" + std::to_string(n)}, now};
    Status st = producer.value()->Produce(stack.topic(), -1, e.user, e.Json(), e.ts_ms);
    if (!st.ok()) FAIL("producing the backlog: " << st.message());
    if (n % kWideSampleEvery == 0) sample.push_back(std::move(e));
  }
  REQUIRE(producer.value()->Flush(60000).ok());
  const double produce_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - produce_start).count();
  REQUIRE(producer.value()->delivered() == static_cast<uint64_t>(kWideEvents));
  int64_t backlog = 0;
  for (const auto& o : stack.Offsets()) backlog += o.high;
  REQUIRE(backlog == kWideEvents);  // nothing dropped by the mock's retention

  auto daemon = stack.StartDaemon(config);
  const auto drain_start = std::chrono::steady_clock::now();
  // Committed offsets read every 500 ms: each read is a consumer of its own.
  const bool drained = WaitFor([&] { return !daemon->Running() || stack.AllCommitted(); },
                               std::chrono::seconds(180), std::chrono::milliseconds(500));
  const double drain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - drain_start).count();
  // The peak since the daemon started (the kernel's, not sampled), and now.
  const long peak = PeakRssKiB(daemon->pid());
  const long after = RssKiB(daemon->pid());
  INFO(daemon->Output());
  REQUIRE(drained);
  REQUIRE(daemon->Running());
  REQUIRE(daemon->Stop(SIGTERM, std::chrono::seconds(30)) == 0);
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), sample);
  std::printf(
      "rss-256: injected a backlog of %d events over %d partitions, produced in %.1f s, then one "
      "daemon draining it from the start at full speed\n",
      kWideEvents, kWidePartitions, produce_s);
  std::printf(
      "rss-256: drained, every partition committed to its end, in %.1f s (incl. the group join); "
      "VmHWM (peak VmRSS) %ld MiB (bound %ld MiB), VmRSS %ld MiB at the end; %zu events checked "
      "in Redis, %zu false negatives\n",
      drain_s, peak / 1024, kWideRssBoundKiB / 1024, after / 1024, sample.size(), missing.size());
  CHECK(peak > 0);
  CHECK(peak < kWideRssBoundKiB);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
