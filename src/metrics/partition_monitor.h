// PartitionMonitor: per-partition offsets, lag and status of the running daemon,
// sampled every metrics.refresh_interval from the ingest thread and published as
// Prometheus gauges (labels group, topic, partition):
//   exposure_filter_partition_position         next offset the daemon will read
//   exposure_filter_partition_committed_offset next offset committed (acknowledged by Redis)
//   exposure_filter_partition_high_watermark   from the consumer's fetch responses
//   exposure_filter_partition_lag_messages     high watermark - the first offset not
//                                              written (PartitionSnapshot::unwritten_from),
//                                              never negative
//   exposure_filter_partition_lag_seconds      while lag > 0: now - event time of the oldest
//                                              event fetched and not yet written, if any is;
//                                              else the smaller of now - the newest event
//                                              written and now - when the partition was
//                                              last seen caught up; 0 when caught up
//   exposure_filter_partition_status{status}   1 for the current status (lag/status.h), else 0
// Status changes are logged once each. Readiness (for /readyz) is false while any
// partition is STALL, or its lag in seconds is above the freshness target, while
// the Redis writes fail, while no partition has been assigned for
// `unassigned_grace_ms` (Kafka unreachable, or more daemons than partitions), and
// while a partition assigned that long ago has never been fetched.
// Update runs on one thread; Ready may be called from any thread.
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kafka/source.h"
#include "lag/status.h"
#include "metrics/http_server.h"
#include "metrics/partition_gauges.h"

namespace ef {

struct PartitionSnapshot {
  TopicPartition tp;
  int64_t position = -1;
  int64_t committed = -1;       // -1: nothing acknowledged yet
  int64_t high = -1;            // -1: not known yet
  int64_t newest_event_ms = 0;  // 0: nothing written yet
  // Event time of the oldest event fetched (decoded) and not yet acknowledged by
  // Redis; 0: none in hand (what is behind, if anything, was not fetched yet).
  int64_t oldest_pending_ms = 0;
  // The first offset not yet written: committed, or while nothing of the
  // partition was acknowledged, the first offset in hand (else the position).
  // Lag in messages counts from here, never from what was merely fetched.
  int64_t unwritten_from = -1;
};

// What readiness needs from the pipeline besides the partitions.
struct IngestHealth {
  bool sink_failing = false;
  std::string sink_error;  // the last sink error while failing
};

class PartitionMonitor {
 public:
  // `group`: the consumer group, the `group` label of every series.
  PartitionMonitor(prometheus::Registry& registry, StatusRules rules, double freshness_target_s,
                   int64_t unassigned_grace_ms = 30000, std::string group = "");
  // Partitions missing from `parts` (revoked) lose their series.
  void Update(const std::vector<PartitionSnapshot>& parts, int64_t now_ms,
              const IngestHealth& health = {});
  Readiness Ready() const;

 private:
  struct Series {
    prometheus::Gauge* position;
    PartitionGauges::Series gauges;
    StatusEvaluator evaluator;
    PartitionStatus last = PartitionStatus::kOk;
    double last_lag_seconds = 0;
    int64_t assigned_at_ms = 0;  // first Update that saw the partition
    int64_t caught_up_ms = -1;   // last Update with lag 0 (-1: none since assigned)
  };
  Series& Get(const TopicPartition& tp);
  void Remove(Series& s);

  StatusRules rules_;
  std::string group_;
  double freshness_target_s_;
  int64_t unassigned_grace_ms_;
  int64_t unassigned_since_ms_ = -1;  // -1: partitions are assigned
  prometheus::Family<prometheus::Gauge>& position_;
  PartitionGauges gauges_;
  std::map<TopicPartition, Series> series_;
  mutable std::mutex mu_;
  Readiness readiness_;
};

}  // namespace ef
