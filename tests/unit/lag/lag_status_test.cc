// StatusEvaluator (lag/status.h): every rule, the precedence between them, the
// window and the reasons.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "lag/status.h"

namespace ef {
namespace {

constexpr int64_t kT0 = 1'763'800'000'000;  // a wall-clock time in ms

LagSample At(int64_t offset_ms, int64_t committed, int64_t lag_messages, double lag_seconds = 0,
             int64_t last_commit_ms = 0) {
  LagSample s;
  s.at_ms = kT0 + offset_ms;
  s.committed = committed;
  s.lag_messages = lag_messages;
  s.lag_seconds = lag_seconds;
  s.last_commit_ms = last_commit_ms;
  return s;
}

StatusRules Window(size_t n) {
  StatusRules r;
  r.window_samples = n;
  return r;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("status names", "[lag]") {
  CHECK(std::string(PartitionStatusName(PartitionStatus::kOk)) == "OK");
  CHECK(std::string(PartitionStatusName(PartitionStatus::kWarn)) == "WARN");
  CHECK(std::string(PartitionStatusName(PartitionStatus::kStall)) == "STALL");
  CHECK(std::string(PartitionStatusName(PartitionStatus::kStop)) == "STOP");
  CHECK(std::string(PartitionStatusName(PartitionStatus::kErr)) == "ERR");
  // The enum orders by severity: callers take the worst with std::max.
  CHECK(PartitionStatus::kOk < PartitionStatus::kWarn);
  CHECK(PartitionStatus::kWarn < PartitionStatus::kStall);
  CHECK(PartitionStatus::kStall < PartitionStatus::kStop);
  CHECK(PartitionStatus::kStop < PartitionStatus::kErr);
}

TEST_CASE("OK: no samples, caught up, or lagging within the target", "[lag]") {
  StatusEvaluator ev;
  CHECK(ev.Evaluate() == PartitionStatus::kOk);
  CHECK(ev.Reason() == "no samples yet");

  ev.Add(At(0, 100, 0));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);
  CHECK(ev.Reason() == "caught up");

  ev.Add(At(1000, 100, 5, 1.0));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);
  CHECK(ev.Reason() == "lag 5 messages, 1.0s");
}

TEST_CASE("ERR: lag in seconds above the hard limit, from one sample", "[lag]") {
  StatusEvaluator ev;  // limit 60 s
  ev.Add(At(0, 10, 3, 60.0));
  CHECK(ev.Evaluate() == PartitionStatus::kWarn);  // at the limit: not above it (but above target)
  ev.Add(At(1000, 10, 3, 60.5));
  CHECK(ev.Evaluate() == PartitionStatus::kErr);
  CHECK(ev.Reason() == "lag 1m 1s above the hard limit 1m");

  StatusRules rules;
  rules.freshness_limit_seconds = 5;
  rules.freshness_target_seconds = 2;
  StatusEvaluator custom(rules);
  custom.Add(At(0, 10, 3, 5.5));
  CHECK(custom.Evaluate() == PartitionStatus::kErr);
  CHECK(Contains(custom.Reason(), "above the hard limit 5s"));
}

TEST_CASE("WARN: lag in seconds above the freshness target, from one sample", "[lag]") {
  StatusEvaluator ev;  // target 10 s
  ev.Add(At(0, 10, 3, 10.0));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // at the target is still fresh
  ev.Add(At(1000, 10, 3, 12.34));
  CHECK(ev.Evaluate() == PartitionStatus::kWarn);
  CHECK(ev.Reason() == "lag 12.3s above the freshness target 10s");
  CHECK_FALSE(ev.window_full());  // needs no window
}

TEST_CASE("WARN: lag in messages grew at every sample of a full window", "[lag]") {
  StatusEvaluator ev(Window(3));
  ev.Add(At(0, 100, 10, 1));
  ev.Add(At(1000, 110, 20, 1));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // growing, but the window is not full
  ev.Add(At(2000, 120, 30, 1));
  CHECK(ev.window_full());
  CHECK(ev.Evaluate() == PartitionStatus::kWarn);
  CHECK(ev.Reason() == "lag grew at every sample for 2.0s, now 30");

  SECTION("one step without growth is not WARN") {
    ev.Add(At(3000, 140, 30, 1));  // window: 20, 30, 30
    CHECK(ev.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("shrinking lag is not WARN") {
    ev.Add(At(3000, 140, 25, 1));
    CHECK(ev.Evaluate() == PartitionStatus::kOk);
  }
}

TEST_CASE("STALL: lagging in every sample of a full window, committed offset not moving", "[lag]") {
  StatusEvaluator ev(Window(3));
  // A live daemon stuck on Redis: heartbeat commits keep last_commit_ms fresh.
  ev.Add(At(0, 120, 500, 1, kT0));
  ev.Add(At(1000, 120, 500, 2, kT0 + 1000));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // window not full yet
  ev.Add(At(2000, 120, 500, 3, kT0 + 2000));
  CHECK(ev.Evaluate() == PartitionStatus::kStall);
  CHECK(ev.Reason() == "committed offset 120 unchanged for 3 samples (2.0s) with lag 500");

  SECTION("the offset moving inside the window is not STALL") {
    StatusEvaluator moving(Window(3));
    moving.Add(At(0, 120, 500, 1, kT0));
    moving.Add(At(1000, 121, 500, 1, kT0 + 1000));
    moving.Add(At(2000, 121, 500, 1, kT0 + 2000));
    CHECK(moving.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("a sample without lag in the window is not STALL") {
    StatusEvaluator idle(Window(3));
    idle.Add(At(0, 120, 0, 0, kT0));
    idle.Add(At(1000, 120, 5, 1, kT0 + 1000));
    idle.Add(At(2000, 120, 5, 1, kT0 + 2000));
    CHECK(idle.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("caught up and idle is OK, not STALL") {
    StatusEvaluator idle(Window(3));
    for (int i = 0; i < 3; ++i) idle.Add(At(i * 1000, 120, 0, 0, kT0 + i * 1000));
    CHECK(idle.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("a group that never committed counts as not moving") {
    StatusEvaluator never(Window(3));
    for (int i = 0; i < 3; ++i) never.Add(At(i * 1000, -1, 50, 1, 0));
    CHECK(never.Evaluate() == PartitionStatus::kStall);
    CHECK(Contains(never.Reason(), "committed offset -1 unchanged"));
  }
}

TEST_CASE("STOP: lagging and no commit for longer than stop_after_ms", "[lag]") {
  StatusRules rules;
  rules.stop_after_ms = 5000;
  StatusEvaluator ev(rules);
  ev.Add(At(0, 100, 10, 1, kT0 - 5000));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // exactly stop_after: not yet
  ev.Add(At(1, 100, 10, 1, kT0 - 5000));
  CHECK(ev.Evaluate() == PartitionStatus::kStop);  // one sample is enough
  CHECK(ev.Reason() == "no commit for 5.0s with lag 10: the consumer is not running");

  SECTION("caught up: a stopped consumer with nothing to do is OK") {
    StatusEvaluator idle(rules);
    idle.Add(At(60000, 100, 0, 0, kT0));
    CHECK(idle.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("unknown commit time (no or foreign metadata) never gives STOP") {
    StatusEvaluator unknown(rules);
    unknown.Add(At(60000, 100, 10, 1, 0));
    CHECK(unknown.Evaluate() == PartitionStatus::kOk);
  }
  SECTION("fresh heartbeat commits keep it from STOP") {
    StatusEvaluator alive(rules);
    alive.Add(At(60000, 100, 10, 1, kT0 + 59000));
    CHECK(alive.Evaluate() == PartitionStatus::kOk);
  }
}

TEST_CASE("STOP without stop_after_ms: after the span of a full window", "[lag]") {
  StatusEvaluator ev(Window(3));             // stop_after_ms = 0
  const int64_t last_commit = kT0 - 100000;  // long ago
  ev.Add(At(0, 100, 10, 1, last_commit));
  ev.Add(At(1000, 101, 10, 1, last_commit));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // window not full: no span to compare with
  ev.Add(At(2000, 102, 10, 1, last_commit));
  CHECK(ev.Evaluate() == PartitionStatus::kStop);

  StatusEvaluator recent(Window(3));
  // Span 2 s; the last commit 2 s before the last sample: not longer than the span.
  recent.Add(At(0, 100, 10, 1, kT0));
  recent.Add(At(1000, 101, 10, 1, kT0));
  recent.Add(At(2000, 102, 10, 1, kT0));
  CHECK(recent.Evaluate() == PartitionStatus::kOk);
  recent.Add(At(3000, 103, 10, 1, kT0));  // span still 2 s, commit 3 s old
  CHECK(recent.Evaluate() == PartitionStatus::kStop);
}

TEST_CASE("precedence: ERR > STOP > STALL > WARN > OK", "[lag]") {
  StatusRules rules = Window(3);
  rules.stop_after_ms = 1500;

  SECTION("ERR over STOP") {
    StatusEvaluator ev(rules);
    ev.Add(At(0, 100, 10, 61, kT0 - 100000));
    CHECK(ev.Evaluate() == PartitionStatus::kErr);
  }
  SECTION("STOP over STALL") {
    StatusEvaluator ev(rules);
    for (int i = 0; i < 3; ++i) ev.Add(At(i * 1000, 100, 10, 1, kT0 - 100000));
    CHECK(ev.Evaluate() == PartitionStatus::kStop);
  }
  SECTION("STALL over WARN (lag growing and above the target, offset stuck)") {
    StatusEvaluator ev(rules);
    for (int i = 0; i < 3; ++i) ev.Add(At(i * 1000, 100, 10 + i, 20 + i, kT0 + i * 1000));
    CHECK(ev.Evaluate() == PartitionStatus::kStall);
  }
  SECTION("WARN over OK, both WARN reasons: growth is named first") {
    StatusEvaluator ev(rules);
    for (int i = 0; i < 3; ++i) ev.Add(At(i * 1000, 100 + i, 10 + i, 20, kT0 + i * 1000));
    CHECK(ev.Evaluate() == PartitionStatus::kWarn);
    CHECK(Contains(ev.Reason(), "lag grew at every sample"));
  }
}

TEST_CASE("the window keeps the last window_samples samples", "[lag]") {
  StatusEvaluator ev(Window(3));
  for (int i = 0; i < 3; ++i) ev.Add(At(i * 1000, 5, 7, 1, kT0 + i * 1000));
  CHECK(ev.Evaluate() == PartitionStatus::kStall);
  ev.Add(At(3000, 6, 7, 1, kT0 + 3000));  // the offset moved: window 5, 5, 6
  CHECK(ev.samples().size() == 3);
  CHECK(ev.samples().front().at_ms == kT0 + 1000);
  CHECK(ev.Evaluate() == PartitionStatus::kOk);
  ev.Add(At(4000, 6, 7, 1, kT0 + 4000));
  CHECK(ev.Evaluate() == PartitionStatus::kOk);  // 5, 6, 6
  ev.Add(At(5000, 6, 7, 1, kT0 + 5000));
  CHECK(ev.Evaluate() == PartitionStatus::kStall);  // 6, 6, 6: stuck again
  CHECK(ev.Reason() == "committed offset 6 unchanged for 3 samples (2.0s) with lag 7");

  SECTION("status follows the last sample: recovery clears ERR at once") {
    ev.Add(At(6000, 6, 7, 90, kT0 + 6000));
    CHECK(ev.Evaluate() == PartitionStatus::kErr);
    ev.Add(At(7000, 13, 0, 0, kT0 + 7000));
    CHECK(ev.Evaluate() == PartitionStatus::kOk);
    CHECK(ev.Reason() == "caught up");
  }
}

// Issue 48: after a Redis outage the status flapped OK <-> WARN 35 times while a
// backlog drained around the freshness target.
TEST_CASE("hysteresis: worse at once, better only after recover_samples better samples", "[lag]") {
  StatusEvaluator ev(Window(3));  // recover_samples 3 (the default)
  // Stuck: STALL once the window is full.
  ev.Add(At(0, 120, 500, 1, kT0));
  ev.Add(At(1000, 120, 500, 2, kT0 + 1000));
  CHECK(ev.Current() == PartitionStatus::kOk);
  ev.Add(At(2000, 120, 500, 3, kT0 + 2000));
  CHECK(ev.Current() == PartitionStatus::kStall);
  // Recovered: the committed offset moves, the backlog is older than the target.
  ev.Add(At(3000, 200, 420, 14, kT0 + 3000));
  CHECK(ev.Evaluate() == PartitionStatus::kWarn);
  CHECK(ev.Current() == PartitionStatus::kStall);  // held
  CHECK(Contains(ev.CurrentReason(), "recovering: 1 of 3 samples better"));
  ev.Add(At(4000, 300, 320, 11, kT0 + 4000));
  CHECK(ev.Current() == PartitionStatus::kStall);
  ev.Add(At(5000, 400, 220, 9, kT0 + 5000));  // under the target now: OK alone
  CHECK(ev.Evaluate() == PartitionStatus::kOk);
  CHECK(ev.Current() == PartitionStatus::kWarn);  // the worst of the three better samples
  CHECK(ev.CurrentReason() ==
        "WARN at worst over the last 3 samples; now: lag 220 messages, 9.0s");
  // Around the target: WARN stays until three samples in a row are OK.
  ev.Add(At(6000, 500, 120, 9, kT0 + 6000));
  ev.Add(At(7000, 600, 20, 8, kT0 + 7000));
  CHECK(ev.Current() == PartitionStatus::kWarn);
  ev.Add(At(8000, 620, 0, 0, kT0 + 8000));
  CHECK(ev.Current() == PartitionStatus::kOk);
  CHECK(ev.CurrentReason() == "caught up");
}

TEST_CASE("hysteresis: a worse judgement inside a recovery restarts it", "[lag]") {
  StatusRules rules;
  rules.recover_samples = 2;
  StatusEvaluator ev(rules);  // target 10 s
  ev.Add(At(0, 10, 3, 12));
  CHECK(ev.Current() == PartitionStatus::kWarn);
  ev.Add(At(1000, 20, 3, 5));   // better
  ev.Add(At(2000, 30, 3, 12));  // WARN again: the run restarts
  ev.Add(At(3000, 40, 3, 5));
  CHECK(ev.Current() == PartitionStatus::kWarn);
  ev.Add(At(4000, 50, 3, 5));
  CHECK(ev.Current() == PartitionStatus::kOk);
  // recover_samples 1: no hysteresis.
  rules.recover_samples = 1;
  StatusEvaluator none(rules);
  none.Add(At(0, 10, 3, 12));
  none.Add(At(1000, 20, 3, 5));
  CHECK(none.Current() == PartitionStatus::kOk);
}

}  // namespace ef
