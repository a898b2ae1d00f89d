#include "lag/status.h"

#include <fmt/format.h>

#include <cmath>

#include "common/duration.h"

namespace ef {
namespace {

// A measured age or span: 1.0s, 4m 5s, 1d 19h 44m.
std::string Human(double seconds) { return FormatDurationHuman(seconds); }

// A configured threshold, as written in config and options: 10s, 1m.
std::string Limit(double seconds) { return FormatDurationMs(std::llround(seconds * 1000)); }

}  // namespace

const char* PartitionStatusName(PartitionStatus s) {
  switch (s) {
    case PartitionStatus::kOk:
      return "OK";
    case PartitionStatus::kWarn:
      return "WARN";
    case PartitionStatus::kStall:
      return "STALL";
    case PartitionStatus::kStop:
      return "STOP";
    case PartitionStatus::kErr:
      return "ERR";
  }
  return "UNKNOWN";
}

void StatusEvaluator::Add(const LagSample& sample) {
  samples_.push_back(sample);
  while (samples_.size() > std::max<size_t>(rules_.window_samples, 1)) samples_.pop_front();
  std::string why;
  const PartitionStatus judged = Evaluate(&why);
  if (judged >= current_) {
    current_ = judged;
    current_reason_ = std::move(why);
    better_run_ = 0;
    worst_in_run_ = PartitionStatus::kOk;
    return;
  }
  worst_in_run_ = better_run_ == 0 ? judged : std::max(worst_in_run_, judged);
  if (++better_run_ < std::max<size_t>(rules_.recover_samples, 1)) return;
  current_ = worst_in_run_;
  current_reason_ = current_ == judged
                        ? std::move(why)
                        : fmt::format("{} at worst over the last {} samples; now: {}",
                                      PartitionStatusName(current_), better_run_, why);
  better_run_ = 0;
  worst_in_run_ = PartitionStatus::kOk;
}

std::string StatusEvaluator::CurrentReason() const {
  if (better_run_ == 0) return current_reason_;
  return fmt::format("{}; recovering: {} of {} samples better", current_reason_, better_run_,
                     std::max<size_t>(rules_.recover_samples, 1));
}

PartitionStatus StatusEvaluator::Evaluate() const { return Evaluate(nullptr); }

std::string StatusEvaluator::Reason() const {
  std::string why;
  Evaluate(&why);
  return why;
}

PartitionStatus StatusEvaluator::Evaluate(std::string* why) const {
  auto say = [&](std::string s) {
    if (why) *why = std::move(s);
  };
  if (samples_.empty()) {
    say("no samples yet");
    return PartitionStatus::kOk;
  }
  const LagSample& last = samples_.back();
  const LagSample& first = samples_.front();
  const double span_s = static_cast<double>(last.at_ms - first.at_ms) / 1000.0;
  if (last.lag_seconds > rules_.freshness_limit_seconds) {
    say(fmt::format("lag {} above the hard limit {}", Human(last.lag_seconds),
                    Limit(rules_.freshness_limit_seconds)));
    return PartitionStatus::kErr;
  }
  const int64_t stop_after = rules_.stop_after_ms > 0
                                 ? rules_.stop_after_ms
                                 : (window_full() ? last.at_ms - first.at_ms : 0);
  if (last.lag_messages > 0 && last.last_commit_ms > 0 && stop_after > 0 &&
      last.at_ms - last.last_commit_ms > stop_after) {
    say(fmt::format("no commit for {} with lag {}: the consumer is not running",
                    Human(static_cast<double>(last.at_ms - last.last_commit_ms) / 1000.0),
                    last.lag_messages));
    return PartitionStatus::kStop;
  }
  if (window_full()) {
    bool all_lagging = true, unchanged = true, growing = true;
    for (size_t i = 0; i < samples_.size(); ++i) {
      all_lagging &= samples_[i].lag_messages > 0;
      unchanged &= samples_[i].committed == first.committed;
      if (i > 0) growing &= samples_[i].lag_messages > samples_[i - 1].lag_messages;
    }
    if (all_lagging && unchanged) {
      say(fmt::format("committed offset {} unchanged for {} samples ({}) with lag {}",
                      first.committed, samples_.size(), Human(span_s), last.lag_messages));
      return PartitionStatus::kStall;
    }
    if (growing) {
      say(fmt::format("lag grew at every sample for {}, now {}", Human(span_s), last.lag_messages));
      return PartitionStatus::kWarn;
    }
  }
  if (last.lag_seconds > rules_.freshness_target_seconds) {
    say(fmt::format("lag {} above the freshness target {}", Human(last.lag_seconds),
                    Limit(rules_.freshness_target_seconds)));
    return PartitionStatus::kWarn;
  }
  say(last.lag_messages > 0
          ? fmt::format("lag {} messages, {}", last.lag_messages, Human(last.lag_seconds))
          : "caught up");
  return PartitionStatus::kOk;
}

}  // namespace ef
