#include "metrics/ingest_metrics.h"

#include <algorithm>
#include <string>

namespace ef {

void LocalHistogram::Observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i] += 1;
  sum_ += v;
  any_ = true;
}

void LocalHistogram::FlushTo(prometheus::Histogram& h) {
  if (!any_) return;
  h.ObserveMultiple(counts_, sum_);
  std::fill(counts_.begin(), counts_.end(), 0.0);
  sum_ = 0;
  any_ = false;
}

std::vector<double> IngestMetrics::LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75,
          1,     1.5,    2,     3,    5,     10,   20,  30,   60,  120};
}

IngestMetrics::IngestMetrics(prometheus::Registry& r, std::string group)
    : group_(std::move(group)) {
  auto& events = prometheus::BuildCounter()
                     .Name("exposure_filter_events_total")
                     .Help("Kafka messages processed, by result")
                     .Register(r);
  events_written = &events.Add({{"result", "written"}});
  events_rejected = &events.Add({{"result", "rejected"}});
  auto& rejects = prometheus::BuildCounter()
                      .Name("exposure_filter_events_rejected_total")
                      .Help("Messages rejected as bad events, by reason")
                      .Register(r);
  // Index 0 (kNone) is not a rejection: it gets no series of its own.
  for (size_t i = 1; i < rejected_by_reason.size(); ++i)
    rejected_by_reason[i] =
        &rejects.Add({{"reason", RejectReasonName(static_cast<RejectReason>(i))}});
  rejected_by_reason[0] = rejected_by_reason[static_cast<size_t>(RejectReason::kNotJson)];
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  items_written = counter("exposure_filter_items_total", "Item exposures written to Redis");
  bits_written = counter("exposure_filter_positions_written_total",
                         "Bit positions sent to Redis (after per-key, per-batch dedupe)");
  keys_written =
      counter("exposure_filter_keys_written_total", "Per-batch key writes sent to Redis");
  keys_skipped = counter("exposure_filter_keys_skipped_total",
                         "Key writes Redis refused for good (WRONGTYPE), skipped");
  keys_expired = counter("exposure_filter_keys_expired_total",
                         "Key writes dropped because the key's bucket had expired (an outage or "
                         "a replay across the window's edge)");
  redis_commands = counter("exposure_filter_redis_commands_total", "Redis commands sent");
  expires_skipped = counter("exposure_filter_redis_expire_skipped_total",
                            "EXPIREAT commands not sent: the key already had that expiry "
                            "(expire cache)");
  batches = counter("exposure_filter_batches_total", "Batches written to Redis");
  write_retries = counter("exposure_filter_redis_write_retries_total",
                          "Batch writes retried after a Redis failure");
  write_stalls = counter("exposure_filter_redis_write_stalls_total",
                         "Times a batch write had neither a reply nor an error for 30 s (a "
                         "writer's bug: see the error log)");
  cluster_tokens = counter("exposure_filter_cluster_tokens_total",
                           "filter.near_duplicates: cluster marks (the cluster's ID) written "
                           "beside exposed items (items that are not their cluster's first)");
  cluster_lookups = counter("exposure_filter_cluster_lookups_total",
                            "filter.near_duplicates: distinct items looked up in the content "
                            "map (cache misses), in one round trip per batch");
  cluster_cache_hits = counter("exposure_filter_cluster_cache_hits_total",
                               "filter.near_duplicates: exposed items whose cluster the local "
                               "cache answered (a cluster, or a recent \"not indexed\")");
  cluster_cache_bytes = &prometheus::BuildGauge()
                             .Name("exposure_filter_cluster_cache_bytes")
                             .Help(
                                 "filter.near_duplicates: memory of the local cache of the "
                                 "content map, as allocated (content.cache_bytes bounds it)")
                             .Register(r)
                             .Add({});
  items_unclustered = counter("exposure_filter_items_unclustered_total",
                              "filter.near_duplicates: exposed items whose cluster is not known "
                              "(not in the content index yet): written by item ID only");
  content_map_bad_values =
      counter("exposure_filter_content_map_bad_values_total",
              "filter.near_duplicates: content-map values read that were no map entry (another "
              "program's value at <prefix>cm{item}): the item counts as not indexed");
  auto& errors = prometheus::BuildCounter()
                     .Name("exposure_filter_redis_errors_total")
                     .Help("Redis errors, by kind")
                     .Register(r);
  for (size_t i = 1; i < redis_errors.size(); ++i)
    redis_errors[i] = &errors.Add({{"kind", RedisErrorKindName(static_cast<RedisErrorKind>(i))}});
  redis_errors[0] = redis_errors[static_cast<size_t>(RedisErrorKind::kReply)];
  redis_up = &prometheus::BuildGauge()
                  .Name("exposure_filter_redis_up")
                  .Help("1 when the last Redis write succeeded, 0 while it fails")
                  .Register(r)
                  .Add({});
  auto& commits = prometheus::BuildCounter()
                      .Name("exposure_filter_commits_total")
                      .Help("Kafka offset commits, by result")
                      .Register(r);
  commits_ok = &commits.Add({{"result", "ok"}});
  commits_failed = &commits.Add({{"result", "failed"}});
  auto& dead_letters = prometheus::BuildCounter()
                           .Name("exposure_filter_dead_letter_total")
                           .Help(
                               "Dead-letter copies, by result: delivered, failed (a delivery "
                               "attempt failed; retried), dropped (given up by config)")
                           .Register(r);
  dead_letter_delivered = &dead_letters.Add({{"result", "delivered"}});
  dead_letter_failed = &dead_letters.Add({{"result", "failed"}});
  dead_letter_dropped = &dead_letters.Add({{"result", "dropped"}});
  dead_letter_outstanding =
      &prometheus::BuildGauge()
           .Name("exposure_filter_dead_letter_outstanding")
           .Help("Dead-letter copies not delivered yet (their offsets are not committed)")
           .Register(r)
           .Add({});
  dead_letter_outstanding_bytes =
      &prometheus::BuildGauge()
           .Name("exposure_filter_dead_letter_outstanding_bytes")
           .Help(
               "Memory held by the dead-letter copies not delivered yet, as counted against "
               "kafka.dead_letter_max_pending_bytes")
           .Register(r)
           .Add({});
  dead_letter_full =
      &prometheus::BuildGauge()
           .Name("exposure_filter_dead_letter_full")
           .Help(
               "1 while consumption is paused because the undelivered dead-letter copies "
               "reached kafka.dead_letter_max_pending_bytes")
           .Register(r)
           .Add({});
  stage_advances = counter("exposure_filter_stage_advances_total",
                           "Layouts v2/v3: stages started (a key's newest stage reached its fill)");
  stage_limit_items =
      counter("exposure_filter_stage_limit_items_total",
              "Layouts v2/v3: items not written because their key's last stage had reached its "
              "fill (filter.stages reached: the key keeps its false-positive rate, that user may "
              "see such an item again)");
  stage_limit_keys = counter("exposure_filter_stage_limit_keys_total",
                             "Layouts v2/v3: key writes with items not written at the stage limit");
  stage0_fill_sum =
      counter("exposure_filter_stage0_advance_fill_total",
              "Layouts v2/v3: sum over advances out of stage 0 of stage 0's fill "
              "then (set bits / m); divided by exposure_filter_stage0_advances_total: "
              "the mean fill at advance");
  stage0_fill_count =
      counter("exposure_filter_stage0_advances_total", "Layouts v2/v3: advances out of stage 0");
  keys_read = counter("exposure_filter_redis_keys_read_total",
                      "Layouts v2/v3: keys read before writing (stage state not known: first "
                      "write since start, refresh, rebalance; or a stage may fill in the batch; "
                      "every key in replay)");
  items_present = counter("exposure_filter_items_already_present_total",
                          "Layouts v2/v3: items of such a read key found already set in its "
                          "current stage, repeats in the batch included (replay: in any stage); "
                          "not written again");
  stage_items_family_ = &prometheus::BuildCounter()
                             .Name("exposure_filter_stage_items_total")
                             .Help("Layouts v2/v3: items written, by the stage they went to")
                             .Register(r);
  StageItems(0);
  lost_family_ = &prometheus::BuildCounter()
                      .Name("exposure_filter_messages_lost_total")
                      .Help(
                          "Messages deleted by the topic's retention before the daemon read "
                          "them (its position was out of range): exposures lost for good")
                      .Register(r);
  batch_events = &prometheus::BuildHistogram()
                      .Name("exposure_filter_batch_events")
                      .Help("Messages per batch")
                      .Register(r)
                      .Add({}, prometheus::Histogram::BucketBoundaries{
                                   1, 10, 100, 1000, 5000, 10000, 20000, 50000, 100000});
  write_seconds = &prometheus::BuildHistogram()
                       .Name("exposure_filter_redis_write_seconds")
                       .Help("Time to write one batch to Redis and get every reply")
                       .Register(r)
                       .Add({}, LatencyBuckets());
  e2e_seconds = &prometheus::BuildHistogram()
                     .Name("exposure_filter_end_to_end_latency_seconds")
                     .Help("Redis acknowledgement time minus event time, per event")
                     .Register(r)
                     .Add({}, LatencyBuckets());
  ingest_delay_seconds =
      &prometheus::BuildHistogram()
           .Name("exposure_filter_ingest_delay_seconds")
           .Help(
               "Redis acknowledgement time minus the Kafka message timestamp (LogAppendTime, or "
               "CreateTime as the producer set it), per event: the daemon's own delay")
           .Register(r)
           .Add({}, LatencyBuckets());
}

prometheus::Counter& IngestMetrics::StageItems(size_t stage) {
  stage = std::min(stage, stage_items_.size() - 1);
  if (!stage_items_[stage])
    stage_items_[stage] = &stage_items_family_->Add({{"stage", std::to_string(stage)}});
  return *stage_items_[stage];
}

prometheus::Counter& IngestMetrics::Lost(const std::string& topic, int32_t partition) {
  // Family::Add returns the existing series for the same labels.
  return lost_family_->Add(
      {{"group", group_}, {"topic", topic}, {"partition", std::to_string(partition)}});
}

void IngestMetrics::AddLost(const std::string& topic, int32_t partition, int64_t messages) {
  Lost(topic, partition).Increment(static_cast<double>(messages));
}

void IngestMetrics::EnsurePartition(const std::string& topic, int32_t partition) {
  Lost(topic, partition);
}

void IngestMetrics::AddStages(const StageStats& s) {
  for (size_t i = 0; i < s.items.size(); ++i)
    if (s.items[i]) StageItems(i).Increment(static_cast<double>(s.items[i]));
  if (s.advances) stage_advances->Increment(static_cast<double>(s.advances));
  if (s.limit_items) stage_limit_items->Increment(static_cast<double>(s.limit_items));
  if (s.limit_keys) stage_limit_keys->Increment(static_cast<double>(s.limit_keys));
  if (s.stage0_advances) {
    stage0_fill_count->Increment(static_cast<double>(s.stage0_advances));
    stage0_fill_sum->Increment(static_cast<double>(s.stage0_fill_ppm_sum) / 1e6);
  }
}

}  // namespace ef
