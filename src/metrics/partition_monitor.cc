#include "metrics/partition_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_fields.h"

namespace ef {
namespace {

// The age of what is behind, in seconds (see the header). The oldest event in
// hand is exact. Otherwise what is behind was not fetched yet: it is newer than
// the newest event written, and it arrived after the last time the partition
// was seen caught up, so its age is at most either; on a quiet partition the
// newest event written can be minutes old while what is behind arrived a second
// ago.
double LagSeconds(const PartitionSnapshot& p, int64_t lag, int64_t caught_up_ms, int64_t now_ms) {
  if (lag <= 0) return 0.0;
  int64_t since_ms = -1;
  if (p.oldest_pending_ms > 0) {
    since_ms = p.oldest_pending_ms;
  } else {
    if (p.newest_event_ms > 0) since_ms = p.newest_event_ms;
    if (caught_up_ms >= 0) since_ms = std::max(since_ms, caught_up_ms);
  }
  if (since_ms < 0) return 0.0;
  return std::max(0.0, static_cast<double>(now_ms - since_ms) / 1000.0);
}

}  // namespace

PartitionMonitor::PartitionMonitor(prometheus::Registry& r, StatusRules rules,
                                   double freshness_target_s, int64_t unassigned_grace_ms,
                                   std::string group)
    : rules_(rules),
      group_(std::move(group)),
      freshness_target_s_(freshness_target_s),
      unassigned_grace_ms_(unassigned_grace_ms),
      position_(prometheus::BuildGauge()
                    .Name("exposure_filter_partition_position")
                    .Help("Next offset the daemon will read")
                    .Register(r)),
      gauges_(r, {"Next offset committed after Redis acknowledged everything before it",
                  "High watermark minus the first offset not yet written",
                  "While lagging: now minus the event time of the oldest event not written (or "
                  "an upper bound of it when it was not fetched yet)"}) {}

PartitionMonitor::Series& PartitionMonitor::Get(const TopicPartition& tp) {
  auto it = series_.find(tp);
  if (it != series_.end()) return it->second;
  Series s{&position_.Add(PartitionGauges::Labels(group_, tp)), gauges_.Add(group_, tp),
           StatusEvaluator(rules_)};
  return series_.emplace(tp, std::move(s)).first->second;
}

void PartitionMonitor::Remove(Series& s) {
  position_.Remove(s.position);
  gauges_.Remove(s.gauges);
}

void PartitionMonitor::Update(const std::vector<PartitionSnapshot>& parts, int64_t now_ms,
                              const IngestHealth& health) {
  for (auto it = series_.begin(); it != series_.end();) {
    bool kept = std::any_of(parts.begin(), parts.end(),
                            [&](const PartitionSnapshot& p) { return p.tp == it->first; });
    if (kept) {
      ++it;
    } else {
      Remove(it->second);
      it = series_.erase(it);
    }
  }
  Readiness ready;
  auto not_ready = [&ready](const std::string& why) {
    ready.ready = false;
    if (!ready.reason.empty()) ready.reason += "; ";
    ready.reason += why;
  };
  if (health.sink_failing) not_ready("redis writes failing: " + health.sink_error);
  if (parts.empty()) {
    if (unassigned_since_ms_ < 0) unassigned_since_ms_ = now_ms;
    const int64_t for_ms = now_ms - unassigned_since_ms_;
    if (for_ms >= unassigned_grace_ms_) {
      not_ready("no partition assigned for " + std::to_string(for_ms / 1000) +
                " s (Kafka unreachable, or more daemons than partitions)");
    }
  } else {
    unassigned_since_ms_ = -1;
  }
  for (const auto& p : parts) {
    const bool is_new = series_.count(p.tp) == 0;
    Series& s = Get(p.tp);
    if (is_new) s.assigned_at_ms = now_ms;
    if (p.position < 0 && p.committed < 0 && now_ms - s.assigned_at_ms >= unassigned_grace_ms_) {
      not_ready(p.tp.topic + "/" + std::to_string(p.tp.partition) + " assigned " +
                std::to_string((now_ms - s.assigned_at_ms) / 1000) +
                " s ago and never fetched (partition leader unreachable?)");
    }
    const int64_t base = p.unwritten_from >= 0 ? p.unwritten_from
                         : p.committed >= 0    ? p.committed
                                               : p.position;
    const int64_t lag = p.high >= 0 && base >= 0 ? std::max<int64_t>(0, p.high - base) : 0;
    if (lag == 0) s.caught_up_ms = now_ms;
    const double lag_s = LagSeconds(p, lag, s.caught_up_ms, now_ms);
    s.position->Set(static_cast<double>(p.position));
    s.gauges.committed->Set(static_cast<double>(p.committed));
    s.gauges.high->Set(static_cast<double>(p.high));
    s.gauges.lag_messages->Set(static_cast<double>(lag));
    s.gauges.lag_seconds->Set(lag_s);
    s.evaluator.Add({now_ms, p.committed, lag, lag_s, 0});
    PartitionStatus st = s.evaluator.Current();
    PartitionGauges::SetStatus(s.gauges, st);
    if (st != s.last) {
      auto log = st == PartitionStatus::kOk ? spdlog::level::info : spdlog::level::warn;
      LogWith(log,
              {{"topic", p.tp.topic},
               {"partition", p.tp.partition},
               {"status", PartitionStatusName(st)}},
              "partition {}/{}: {} -> {}: {}", p.tp.topic, p.tp.partition,
              PartitionStatusName(s.last), PartitionStatusName(st), s.evaluator.CurrentReason());
      s.last = st;
    }
    std::string why;
    if (st == PartitionStatus::kStall) why = s.evaluator.CurrentReason();
    if (lag_s > freshness_target_s_)
      why = "lag " + std::to_string(static_cast<int64_t>(lag_s)) + " s above the freshness target";
    if (!why.empty()) {
      not_ready(p.tp.topic + "/" + std::to_string(p.tp.partition) + " " + PartitionStatusName(st) +
                ": " + why);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  readiness_ = std::move(ready);
}

Readiness PartitionMonitor::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return readiness_;
}

}  // namespace ef
