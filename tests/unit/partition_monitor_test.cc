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
