// WatermarkPoller: asks the brokers for partitions' low and high watermarks on a
// thread of its own, through a handle of its own, so that no caller ever waits
// for a broker. librdkafka 2.0's rd_kafka_query_watermark_offsets does not honour
// its timeout while the partition's broker is down: it waits until the broker is
// back (fixed in librdkafka 2.3). Called from the ingest thread's tick, it held
// SIGTERM for minutes while Redis and Kafka were both down (issue 26 item 7).
//
// Contract: Want() names the partitions to ask about (replacing the last set);
// about every interval_ms the thread asks each in turn; Get() answers at once
// with the last answer (or false if none yet). Destruction stops the thread,
// waiting at most stop_wait_ms for a query under way: a thread still stuck in
// librdkafka then is detached with its handle (both freed when the query
// returns, if it ever does); the process is ending anyway. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

namespace ef::kafka {

class WatermarkPoller {
 public:
  struct Options {
    int64_t interval_ms = 1000;
    int query_timeout_ms = 1000;
    int64_t stop_wait_ms = 1000;
  };
  // A consumer handle of the same config (kafka/consumer_handle.h) that never
  // subscribes; errors name the property.
  static StatusOr<std::unique_ptr<WatermarkPoller>> Create(const KafkaConfig& config,
                                                           Options options);
  ~WatermarkPoller();
  WatermarkPoller(const WatermarkPoller&) = delete;
  WatermarkPoller& operator=(const WatermarkPoller&) = delete;

  void Want(const std::vector<TopicPartition>& partitions);
  // The last watermarks the broker gave for tp; false if none yet.
  bool Get(const TopicPartition& tp, int64_t* low, int64_t* high) const;

  struct State;

 private:
  explicit WatermarkPoller(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace ef::kafka
