// LagExporter: what `exposure-filter lag --serve` publishes on /metrics, for
// consumer groups read from Kafka alone (docs/LAG.md "lag --serve"). The
// per-partition series are the daemon's (metrics/partition_gauges.h), so one
// dashboard or alert serves both:
//   exposure_filter_partition_committed_offset{group,topic,partition}  -1: no commit
//   exposure_filter_partition_high_watermark{group,topic,partition}
//   exposure_filter_partition_lag_messages{group,topic,partition}
//   exposure_filter_partition_lag_seconds{group,topic,partition}  age of the first
//       uncommitted message; 0 when caught up; NaN when that message could not be read
//   exposure_filter_partition_status{group,topic,partition,status}  1 for the
//       current status (lag/status.h: OK WARN STALL STOP ERR), 0 for the others
// and the exporter's own:
//   exposure_filter_lag_group_without_commits{group,topic}  1 when the group has no
//       committed offset on any partition of the topic (then those partitions have
//       no series: there is no lag to tell), else 0
//   exposure_filter_lag_last_refresh_timestamp_seconds{group}  wall time of the
//       group's last successful read
//   exposure_filter_lag_refresh_errors_total  failed reads of a group or of the
//       group list; 0 from the start
// A failed read leaves the group's series at their last values (the timestamp
// tells their age). Publish and Forget are called from one thread; the registry
// may be collected from another (prometheus-cpp locks its families).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kafka/source.h"
#include "lag/status.h"
#include "metrics/partition_gauges.h"

namespace ef {

struct ExportedPartition {
  TopicPartition tp;
  int64_t committed = -1;  // -1: no commit for this partition
  int64_t high = -1;
  int64_t lag_messages = 0;
  std::optional<double> lag_seconds;  // nullopt: unknown
  PartitionStatus status = PartitionStatus::kOk;
};

struct ExportedGroup {
  std::string group;
  int64_t at_ms = 0;  // when it was read
  // Partitions of the topics the group has committed offsets on.
  std::vector<ExportedPartition> partitions;
  // Every configured topic: whether the group has a committed offset on it.
  std::map<std::string, bool> topic_has_commits;
};

class LagExporter {
 public:
  explicit LagExporter(prometheus::Registry& registry);
  // Replaces the group's series with `g`'s: partitions missing from it lose theirs.
  void Publish(const ExportedGroup& g);
  // A group no longer read (gone from --all-groups' list) loses every series.
  void Forget(const std::string& group);
  // One failed read (of a group, or of the group list).
  void CountError() { errors_.Increment(); }
  // The groups with series now.
  std::set<std::string> groups() const;

 private:
  struct GroupSeries {
    std::map<TopicPartition, PartitionGauges::Series> partitions;
    std::map<std::string, prometheus::Gauge*> without_commits;  // by topic
    prometheus::Gauge* last_refresh = nullptr;
  };
  PartitionGauges gauges_;
  prometheus::Family<prometheus::Gauge>& without_commits_;
  prometheus::Family<prometheus::Gauge>& last_refresh_;
  prometheus::Counter& errors_;
  std::map<std::string, GroupSeries> groups_;
};

}  // namespace ef
