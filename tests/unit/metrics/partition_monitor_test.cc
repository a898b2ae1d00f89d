// PartitionMonitor readiness (issue 9, defects 1 and 6): /readyz must not say
// 200 while the daemon consumes nothing. Before the fix a daemon with no
// partition (Kafka unreachable), one whose partition was never fetched (its
// position -1 read as lag 0), or one whose Redis writes failed, was ready.
#include "metrics/partition_monitor.h"

#include <prometheus/registry.h>

#include <catch2/catch.hpp>

namespace ef {
namespace {

constexpr int64_t kT0 = 1763800000000;
constexpr int64_t kGraceMs = 30000;

PartitionSnapshot Part(int32_t partition, int64_t position, int64_t committed, int64_t high) {
  PartitionSnapshot s;
  s.tp = TopicPartition{"exposures", partition};
  s.position = position;
  s.committed = committed;
  s.high = high;
  s.newest_event_ms = committed > 0 ? kT0 : 0;
  return s;
}

struct Monitor {
  prometheus::Registry registry;
  PartitionMonitor monitor{registry, StatusRules{}, 10.0, kGraceMs};
};

}  // namespace

TEST_CASE("readiness: no partition assigned for the grace period is not ready",
          "[metrics][readiness]") {
  Monitor m;
  m.monitor.Update({}, kT0);
  CHECK(m.monitor.Ready().ready);  // joining the group takes a moment
  m.monitor.Update({}, kT0 + kGraceMs - 1);
  CHECK(m.monitor.Ready().ready);
  m.monitor.Update({}, kT0 + kGraceMs);
  const Readiness r = m.monitor.Ready();
  CHECK_FALSE(r.ready);
  CHECK(r.reason.find("no partition assigned for 30 s") != std::string::npos);
  // Assigned and consuming: ready again.
  m.monitor.Update({Part(0, 10, 10, 10)}, kT0 + kGraceMs + 1000);
  CHECK(m.monitor.Ready().ready);
}

TEST_CASE("readiness: a partition assigned and never fetched is not ready after the grace",
          "[metrics][readiness]") {
  Monitor m;
  m.monitor.Update({Part(0, -1, -1, 500), Part(1, 20, 20, 20)}, kT0);
  CHECK(m.monitor.Ready().ready);
  m.monitor.Update({Part(0, -1, -1, 500), Part(1, 20, 20, 20)}, kT0 + kGraceMs);
  const Readiness r = m.monitor.Ready();
  CHECK_FALSE(r.ready);
  CHECK(r.reason.find("exposures/0 assigned 30 s ago and never fetched") != std::string::npos);
  CHECK(r.reason.find("exposures/1") == std::string::npos);
  m.monitor.Update({Part(0, 500, 500, 500), Part(1, 20, 20, 20)}, kT0 + kGraceMs + 1000);
  CHECK(m.monitor.Ready().ready);
}

TEST_CASE("readiness: failing Redis writes make the daemon not ready at once, with the error",
          "[metrics][readiness]") {
  Monitor m;
  IngestHealth failing{true, "redis 127.0.0.1:1: cannot connect: Connection refused"};
  m.monitor.Update({Part(0, 10, 10, 10)}, kT0, failing);
  const Readiness r = m.monitor.Ready();
  CHECK_FALSE(r.ready);
  CHECK(r.reason.find("redis writes failing: redis 127.0.0.1:1: cannot connect") !=
        std::string::npos);
  m.monitor.Update({Part(0, 10, 10, 10)}, kT0 + 1000, IngestHealth{});
  CHECK(m.monitor.Ready().ready);
}

}  // namespace ef

namespace ef {
namespace {

double LagSeconds(prometheus::Registry& registry, int32_t partition) {
  for (const auto& family : registry.Collect()) {
    if (family.name != "exposure_filter_partition_lag_seconds") continue;
    for (const auto& metric : family.metric) {
      for (const auto& l : metric.label)
        if (l.name == "partition" && l.value == std::to_string(partition))
          return metric.gauge.value;
    }
  }
  FAIL("no lag_seconds for partition " << partition);
  return -1;
}

}  // namespace

// Issue 26 item 9: about 5 s into a Redis outage /readyz said "lag 50 s" for a
// quiet partition: lag seconds were now minus the newest event written, which
// on a quiet partition is old long before anything is behind.
TEST_CASE(
    "lag seconds: a quiet partition that falls behind counts from when it was caught up, "
    "not from its last event",
    "[metrics][lag]") {
  Monitor m;
  PartitionSnapshot p = Part(0, 10, 10, 10);
  p.newest_event_ms = kT0 - 50000;  // the last event, 50 s before
  m.monitor.Update({p}, kT0);       // caught up at kT0
  CHECK(LagSeconds(m.registry, 0) == 0);
  p.high = 11;  // one new message, not written yet (Redis down, partition paused)
  m.monitor.Update({p}, kT0 + 5000);
  CHECK(LagSeconds(m.registry, 0) <= 5.0);
  CHECK(LagSeconds(m.registry, 0) > 0);
  CHECK(m.monitor.Ready().ready);  // 5 s is within the 10 s freshness target
  m.monitor.Update({p}, kT0 + 12000);
  CHECK(LagSeconds(m.registry, 0) == Approx(12.0).margin(0.01));
  CHECK_FALSE(m.monitor.Ready().ready);  // now it is behind the target for real
}

TEST_CASE(
    "lag seconds: a busy partition always behind by a few messages reads the age of its "
    "newest event written",
    "[metrics][lag]") {
  Monitor m;
  for (int i = 0; i < 20; ++i) {
    PartitionSnapshot p = Part(0, 1000 + 100 * i, 1000 + 100 * i, 1050 + 100 * i);
    p.newest_event_ms = kT0 + 1000 * i - 800;  // written 0.8 s after the event
    m.monitor.Update({p}, kT0 + 1000 * i);
    CHECK(LagSeconds(m.registry, 0) == Approx(0.8).margin(0.01));
  }
  CHECK(m.monitor.Ready().ready);
}

}  // namespace ef
