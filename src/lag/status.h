// Per-partition health in Burrow's terms, adapted (docs/OPERATING.md):
//   OK    nothing below holds
//   WARN  lag (messages) grew at every step across a full window of samples, or
//         lag in seconds is above the freshness target (default 10 s)
//   STALL lag > 0 in every sample of a full window and the committed offset did
//         not move: the consumer is alive but stuck (e.g. Redis down)
//   STOP  lag > 0 and no commit for longer than stop_after_ms: the consumer is
//         gone. Seen from outside the daemon, through the commit metadata's
//         commit time (kafka/commit_metadata.h); the daemon's heartbeat commits
//         keep a live but stuck daemon at STALL.
//   ERR   lag in seconds above the hard freshness limit (default 60 s)
// Precedence: ERR > STOP > STALL > WARN > OK. Pure; not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace ef {

enum class PartitionStatus { kOk = 0, kWarn, kStall, kStop, kErr };
const char* PartitionStatusName(PartitionStatus s);  // "OK", "WARN", "STALL", "STOP", "ERR"

struct LagSample {
  int64_t at_ms = 0;           // when the sample was taken (wall clock)
  int64_t committed = -1;      // committed offset (-1 none)
  int64_t lag_messages = 0;    // never negative
  double lag_seconds = 0;      // now - event time of the oldest unwritten message; 0 when caught up
  int64_t last_commit_ms = 0;  // commit time from commit metadata; 0 = unknown
};

struct StatusRules {
  size_t window_samples = 10;
  double freshness_target_seconds = 10;
  double freshness_limit_seconds = 60;
  // No commit for this long while lagging = STOP; 0 = the window's time span.
  int64_t stop_after_ms = 0;
};

class StatusEvaluator {
 public:
  explicit StatusEvaluator(StatusRules rules = {}) : rules_(rules) {}
  // Keeps the last window_samples samples.
  void Add(const LagSample& sample);
  PartitionStatus Evaluate() const;
  // One line saying why, e.g. "committed offset 120 unchanged for 10 samples (9.0 s) with lag 500".
  std::string Reason() const;
  const std::deque<LagSample>& samples() const { return samples_; }
  // The window rules (STALL, WARN by growth) need two samples at least.
  bool window_full() const { return samples_.size() >= std::max<size_t>(rules_.window_samples, 2); }

 private:
  PartitionStatus Evaluate(std::string* why) const;
  StatusRules rules_;
  std::deque<LagSample> samples_;
};

}  // namespace ef
