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
//
// Hysteresis (Current): a worse status shows at once; a better one only after
// recover_samples samples in a row judged better than the status shown, and then
// the worst of those samples' judgements. A recovery from STALL is therefore at
// most two transitions (STALL -> WARN -> OK), never a flap: a partition draining
// a backlog around the freshness target stays WARN until it has been under the
// target for recover_samples samples.
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
  // Samples in a row judged better than the status shown before it improves.
  size_t recover_samples = 3;
};

class StatusEvaluator {
 public:
  explicit StatusEvaluator(StatusRules rules = {}) : rules_(rules) {}
  // Keeps the last window_samples samples; updates Current.
  void Add(const LagSample& sample);
  // The judgement of the samples alone, without hysteresis.
  PartitionStatus Evaluate() const;
  // One line saying why, e.g. "committed offset 120 unchanged for 10 samples (9.0 s) with lag 500".
  std::string Reason() const;
  // The status to show and alert on: Evaluate with hysteresis (see above).
  PartitionStatus Current() const { return current_; }
  // Why Current is what it is: Reason, or while a better judgement waits out
  // the hysteresis, what it was raised for and how far the recovery is.
  std::string CurrentReason() const;
  const std::deque<LagSample>& samples() const { return samples_; }
  // The window rules (STALL, WARN by growth) need two samples at least.
  bool window_full() const { return samples_.size() >= std::max<size_t>(rules_.window_samples, 2); }

 private:
  PartitionStatus Evaluate(std::string* why) const;
  StatusRules rules_;
  std::deque<LagSample> samples_;
  PartitionStatus current_ = PartitionStatus::kOk;
  std::string current_reason_ = "no samples yet";        // Reason when current_ was set
  size_t better_run_ = 0;                                // samples in a row judged better
  PartitionStatus worst_in_run_ = PartitionStatus::kOk;  // the worst of those
};

}  // namespace ef
