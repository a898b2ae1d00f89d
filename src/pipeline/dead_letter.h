// DeadLetterSink: copies rejected messages to a Kafka topic, unchanged, with
// headers naming why and where from:
//   exposure-filter-reason  e.g. "not_json"
//   exposure-filter-source  "<topic>/<partition>/<offset>"
// Nothing is lost: each copy is kept until Kafka acknowledged it, and
// CommitLimit(tp) stays at the oldest undelivered copy's offset, so the pipeline
// never commits past a rejected message whose copy could still be lost. A copy
// that fails with a retriable error is produced again (backoff 100 ms .. 10 s);
// one that fails for good (too large, not authorized, ...) is retried as well
// unless `drop_on_permanent_failure`: then it is counted as dropped
// (exposure_filter_dead_letter_total{result="dropped"}) and logged as an error.
// Memory: each undelivered copy counts CopyBytes (its payload, headers and a
// fixed overhead) against max_pending_bytes; Full() turns true once they reach
// it and stays true until deliveries (or Forget) bring them down to half of it,
// so that a slow topic does not pause and resume ingest for every copy; Ingest
// takes no new message meanwhile (pipeline/ingest.h). Send still keeps every
// copy it is given, so the cap is passed by at most the copies of the Poll
// under way.
// Single-threaded (delivery reports are served inside Send and Flush).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "kafka/producer.h"
#include "metrics/ingest_metrics.h"
#include "pipeline/ingest.h"

namespace ef {

struct DeadLetterOptions {
  bool drop_on_permanent_failure = false;
  int64_t retry_backoff_min_ms = 100;
  int64_t retry_backoff_max_ms = 10000;
  // kafka.dead_letter_max_pending_bytes: Full() once the undelivered copies
  // count this much (CopyBytes each).
  size_t max_pending_bytes = size_t{64} << 20;
};

class DeadLetterSink : public RejectSink {
 public:
  static StatusOr<std::unique_ptr<DeadLetterSink>> Create(const KafkaConfig& config,
                                                          DeadLetterOptions options = {},
                                                          IngestMetrics* metrics = nullptr);
  ~DeadLetterSink() override;

  void Send(const Message& message, RejectReason reason) override;
  Status Flush(int timeout_ms) override;
  int64_t CommitLimit(const TopicPartition& tp) override;
  void Forget(const std::vector<TopicPartition>& tps) override;
  bool Full() override;

  size_t outstanding() const { return copies_.size(); }
  // Sum of CopyBytes over the undelivered copies.
  size_t outstanding_bytes() const { return pending_bytes_; }

 private:
  struct Copy {
    TopicPartition tp;
    int64_t offset = 0;
    std::string payload;
    int64_t timestamp_ms = 0;
    std::vector<Header> headers;
    bool in_flight = false;
    int64_t retry_at_ms = 0;
    int64_t backoff_ms = 0;
    int attempts = 0;
  };
  DeadLetterSink(std::unique_ptr<KafkaProducer> producer, std::string topic,
                 DeadLetterOptions options, IngestMetrics* metrics);
  void Produce(uint64_t token, Copy& copy);
  void OnDelivery(uint64_t token, const Status& result, bool retriable);
  void Erase(std::map<uint64_t, Copy>::iterator it);
  // What a copy counts against max_pending_bytes: payload, headers, and the
  // bookkeeping around them (map nodes, strings).
  static size_t CopyBytes(const Copy& copy);
  void RetryDue();
  void UpdateGauge();

  std::unique_ptr<KafkaProducer> producer_;
  std::string topic_;
  DeadLetterOptions options_;
  IngestMetrics* metrics_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, Copy> copies_;                               // not yet delivered, by token
  std::map<TopicPartition, std::multiset<int64_t>> undelivered_;  // offsets of copies_
  size_t pending_bytes_ = 0;  // sum of CopyBytes over copies_, always
  // Set when pending_bytes_ reached max_pending_bytes, cleared when it is down
  // to max_pending_bytes / 2 (by Full, which is what reads it).
  bool full_ = false;
};

}  // namespace ef
