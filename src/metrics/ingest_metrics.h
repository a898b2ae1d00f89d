// The ingest path's Prometheus metrics (names start with exposure_filter_).
// Stages add per batch, not per event: counters are atomics shared with the
// scrape thread. Thread-safe as prometheus-cpp metrics are.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "bloom/stages.h"
#include "event/event.h"
#include "redis/connection.h"

namespace ef {

// Accumulates observations locally, then adds them to a prometheus Histogram in
// one call (ObserveMultiple), so the hot loop does no atomic per observation.
class LocalHistogram {
 public:
  explicit LocalHistogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0.0) {}
  void Observe(double v);
  void FlushTo(prometheus::Histogram& h);

 private:
  std::vector<double> bounds_;
  std::vector<double> counts_;
  double sum_ = 0;
  bool any_ = false;
};

struct IngestMetrics {
  // `group`: the consumer group, a label of the per-partition series ("" for none).
  explicit IngestMetrics(prometheus::Registry& registry, std::string group = "");

  prometheus::Counter* events_written;   // exposure_filter_events_total{result="written"}
  prometheus::Counter* events_rejected;  // exposure_filter_events_total{result="rejected"}
  std::array<prometheus::Counter*, static_cast<size_t>(RejectReason::kCount_)>
      rejected_by_reason;                // exposure_filter_events_rejected_total{reason}
  prometheus::Counter* items_written;    // exposure_filter_items_total
  prometheus::Counter* bits_written;     // exposure_filter_positions_written_total
  prometheus::Counter* keys_written;     // exposure_filter_keys_written_total
  prometheus::Counter* keys_skipped;     // exposure_filter_keys_skipped_total
  prometheus::Counter* keys_expired;     // exposure_filter_keys_expired_total
  prometheus::Counter* redis_commands;   // exposure_filter_redis_commands_total
  prometheus::Counter* expires_skipped;  // exposure_filter_redis_expire_skipped_total
  std::array<prometheus::Counter*, static_cast<size_t>(RedisErrorKind::kCount_)>
      redis_errors;                    // exposure_filter_redis_errors_total{kind}
  prometheus::Gauge* redis_up;         // exposure_filter_redis_up
  prometheus::Counter* batches;        // exposure_filter_batches_total
  prometheus::Counter* write_retries;  // exposure_filter_redis_write_retries_total
  prometheus::Counter* write_stalls;   // exposure_filter_redis_write_stalls_total
  // filter.near_duplicates (docs/CONTENT.md rule 5):
  prometheus::Counter* cluster_tokens;     // exposure_filter_cluster_tokens_total
  prometheus::Counter* cluster_lookups;    // exposure_filter_cluster_lookups_total
  prometheus::Counter* cluster_cache_hits;  // exposure_filter_cluster_cache_hits_total
  prometheus::Gauge* cluster_cache_bytes;   // exposure_filter_cluster_cache_bytes
  prometheus::Counter* items_unclustered;  // exposure_filter_items_unclustered_total
  // exposure_filter_content_map_bad_values_total: content-map values that were
  // no map entry, read as "not indexed" (contentdb/index.h).
  prometheus::Counter* content_map_bad_values;
  prometheus::Counter* commits_ok;             // exposure_filter_commits_total{result="ok"}
  prometheus::Counter* commits_failed;         // exposure_filter_commits_total{result="failed"}
  prometheus::Counter* dead_letter_delivered;  // exposure_filter_dead_letter_total{result=...}
  prometheus::Counter* dead_letter_failed;
  prometheus::Counter* dead_letter_dropped;
  prometheus::Gauge* dead_letter_outstanding;  // exposure_filter_dead_letter_outstanding
  // exposure_filter_dead_letter_outstanding_bytes: the memory they hold (as counted
  // against kafka.dead_letter_max_pending_bytes).
  prometheus::Gauge* dead_letter_outstanding_bytes;
  // exposure_filter_dead_letter_full: 1 while consumption is paused because the
  // undelivered copies reached that cap.
  prometheus::Gauge* dead_letter_full;
  // Layout v2 (docs/OPERATING.md "Heavy users"):
  prometheus::Counter* stage_advances;     // exposure_filter_stage_advances_total
  prometheus::Counter* stage_limit_items;  // exposure_filter_stage_limit_items_total
  prometheus::Counter* stage_limit_keys;   // exposure_filter_stage_limit_keys_total
  prometheus::Counter* stage0_fill_sum;    // exposure_filter_stage0_advance_fill_total
  prometheus::Counter* stage0_fill_count;  // exposure_filter_stage0_advances_total
  prometheus::Counter* keys_read;          // exposure_filter_redis_keys_read_total
  prometheus::Counter* items_present;      // exposure_filter_items_already_present_total
  // exposure_filter_stage_items_total{stage}: series made on first use.
  prometheus::Counter& StageItems(size_t stage);
  prometheus::Histogram* batch_events;   // exposure_filter_batch_events
  prometheus::Histogram* write_seconds;  // exposure_filter_redis_write_seconds
  prometheus::Histogram* e2e_seconds;    // exposure_filter_end_to_end_latency_seconds
  // exposure_filter_ingest_delay_seconds: acknowledgement minus the Kafka
  // message timestamp (LogAppendTime, or CreateTime as the producer set it): the
  // daemon's own delay, which late clients do not inflate (the freshness alert's).
  prometheus::Histogram* ingest_delay_seconds;

  static std::vector<double> LatencyBuckets();  // seconds, 1 ms .. 120 s

  // Adds a batch's stage figures (from WriteStats) to the counters above.
  void AddStages(const StageStats& s);
  // exposure_filter_messages_lost_total{group,topic,partition}: messages the
  // topic's retention deleted before the daemon read them. Thread-safe.
  void AddLost(const std::string& topic, int32_t partition, int64_t messages);
  // Creates the partition's series of the counters above at 0 (once; kept after
  // a revoke), so that `increase()` sees the first loss. Thread-safe.
  void EnsurePartition(const std::string& topic, int32_t partition);

 private:
  prometheus::Counter& Lost(const std::string& topic, int32_t partition);
  std::string group_;
  prometheus::Family<prometheus::Counter>* stage_items_family_;
  prometheus::Family<prometheus::Counter>* lost_family_;
  std::array<prometheus::Counter*, StageStats::kTrackedStages> stage_items_{};
};

}  // namespace ef
