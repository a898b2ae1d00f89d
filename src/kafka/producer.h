// KafkaProducer: a small librdkafka producer for loadgen, the dead-letter topic
// and tests. Thread-compatible.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ef {

struct ProducerOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // passed to librdkafka as is, after ours
};

struct Header {
  std::string name;
  std::string value;
};

class KafkaProducer {
 public:
  static StatusOr<std::unique_ptr<KafkaProducer>> Create(const ProducerOptions& options);
  ~KafkaProducer();

  // Queues one message (payload copied). partition -1 = partitioner's choice
  // (by key when given). timestamp_ms 0 = now. Blocks while the local queue is
  // full. Errors: kInvalidArgument (message too large, unknown partition).
  // `token` is handed to the delivery handler with the message's outcome.
  Status Produce(const std::string& topic, int32_t partition, std::string_view key,
                 std::string_view payload, int64_t timestamp_ms,
                 const std::vector<Header>& headers = {}, uint64_t token = 0);
  // Called for every delivery report (from Poll or Flush, on their caller's
  // thread) with the message's token: OK, or why it failed for good;
  // `retriable` tells whether producing it again may succeed.
  using DeliveryHandler = std::function<void(uint64_t token, const Status& result, bool retriable)>;
  void SetDeliveryHandler(DeliveryHandler handler) { handler_ = std::move(handler); }
  // Waits until everything queued is delivered or failed; kUnavailable on timeout.
  Status Flush(int timeout_ms);
  // Serves delivery reports; call now and then while producing.
  void Poll();

  uint64_t delivered() const { return delivered_.load(); }
  uint64_t failed() const { return failed_.load(); }

  struct Impl;

 private:
  KafkaProducer() = default;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> failed_{0};
  DeliveryHandler handler_;
  friend struct ProducerCallbacks;
};

}  // namespace ef
