// The per-partition lag series that the daemon (metrics/partition_monitor.h) and
// `lag --serve` (metrics/lag_exporter.h) both publish, under the same names and
// labels {group, topic, partition}, so one dashboard and one set of alerts serve
// both:
//   exposure_filter_partition_committed_offset
//   exposure_filter_partition_high_watermark
//   exposure_filter_partition_lag_messages
//   exposure_filter_partition_lag_seconds
//   exposure_filter_partition_status{status}   1 for the current status, 0 for the others
// The help texts say how each publisher measures. Thread-safe as prometheus-cpp
// families are.
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>
#include <vector>

#include "kafka/source.h"
#include "lag/status.h"

namespace ef {

// How the publisher measures, for the families' help texts.
struct PartitionGaugeHelp {
  const char* committed;
  const char* lag_messages;
  const char* lag_seconds;
};

class PartitionGauges {
 public:
  struct Series {
    prometheus::Gauge* committed = nullptr;
    prometheus::Gauge* high = nullptr;
    prometheus::Gauge* lag_messages = nullptr;
    prometheus::Gauge* lag_seconds = nullptr;
    std::vector<prometheus::Gauge*> status;  // one per PartitionStatus, in order
  };

  PartitionGauges(prometheus::Registry& registry, const PartitionGaugeHelp& help);
  static prometheus::Labels Labels(const std::string& group, const TopicPartition& tp);
  // The partition's series (created at 0).
  Series Add(const std::string& group, const TopicPartition& tp);
  void Remove(const Series& s);
  // 1 on st's series, 0 on the others.
  static void SetStatus(const Series& s, PartitionStatus st);

 private:
  prometheus::Family<prometheus::Gauge>& committed_;
  prometheus::Family<prometheus::Gauge>& high_;
  prometheus::Family<prometheus::Gauge>& lag_messages_;
  prometheus::Family<prometheus::Gauge>& lag_seconds_;
  prometheus::Family<prometheus::Gauge>& status_;
};

}  // namespace ef
