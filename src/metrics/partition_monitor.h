// PartitionMonitor: per-partition offsets, lag and status of the running daemon,
// sampled every metrics.refresh_interval from the ingest thread and published as
// Prometheus gauges (labels topic, partition):
//   exposure_filter_partition_position         next offset the daemon will read
//   exposure_filter_partition_committed_offset next offset committed (acknowledged by Redis)
//   exposure_filter_partition_high_watermark   from the consumer's fetch responses
//   exposure_filter_partition_lag_messages     high watermark - committed, never negative
//   exposure_filter_partition_lag_seconds      now - event time of the newest event written,
//                                              while lag > 0; 0 when caught up
//   exposure_filter_partition_status{status}   1 for the current status (lag/status.h), else 0
// Status changes are logged once each. Readiness (for /readyz) is false while any
// partition is STALL, or its lag in seconds is above the freshness target.
// Update runs on one thread; Ready may be called from any thread.
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <vector>

#include "kafka/source.h"
#include "lag/status.h"
#include "metrics/http_server.h"

namespace ef {

struct PartitionSnapshot {
  TopicPartition tp;
  int64_t position = -1;
  int64_t committed = -1;        // -1: nothing acknowledged yet
  int64_t high = -1;             // -1: not known yet
  int64_t newest_event_ms = 0;   // 0: nothing written yet
};

class PartitionMonitor {
 public:
  PartitionMonitor(prometheus::Registry& registry, StatusRules rules, double freshness_target_s);
  // Partitions missing from `parts` (revoked) lose their series.
  void Update(const std::vector<PartitionSnapshot>& parts, int64_t now_ms);
  Readiness Ready() const;

 private:
  struct Series {
    prometheus::Gauge* position;
    prometheus::Gauge* committed;
    prometheus::Gauge* high;
    prometheus::Gauge* lag_messages;
    prometheus::Gauge* lag_seconds;
    std::vector<prometheus::Gauge*> status;  // one per PartitionStatus
    StatusEvaluator evaluator;
    PartitionStatus last = PartitionStatus::kOk;
    double last_lag_seconds = 0;
  };
  Series& Get(const TopicPartition& tp);
  void Remove(const TopicPartition& tp, Series& s);

  StatusRules rules_;
  double freshness_target_s_;
  prometheus::Family<prometheus::Gauge>& position_;
  prometheus::Family<prometheus::Gauge>& committed_;
  prometheus::Family<prometheus::Gauge>& high_;
  prometheus::Family<prometheus::Gauge>& lag_messages_;
  prometheus::Family<prometheus::Gauge>& lag_seconds_;
  prometheus::Family<prometheus::Gauge>& status_;
  std::map<TopicPartition, Series> series_;
  mutable std::mutex mu_;
  Readiness readiness_;
};

}  // namespace ef
