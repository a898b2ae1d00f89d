// DeadLetterSink: copies rejected messages to a Kafka topic, unchanged, with
// headers naming why and where from:
//   exposure-filter-reason  e.g. "not_json"
//   exposure-filter-source  "<topic>/<partition>/<offset>"
// Flush() waits for delivery, so a commit never passes a rejected message
// whose copy could still be lost.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "kafka/producer.h"
#include "pipeline/ingest.h"

namespace ef {

class DeadLetterSink : public RejectSink {
 public:
  static StatusOr<std::unique_ptr<DeadLetterSink>> Create(const KafkaConfig& config);
  void Send(const Message& message, RejectReason reason) override;
  Status Flush() override;

 private:
  DeadLetterSink(std::unique_ptr<KafkaProducer> producer, std::string topic)
      : producer_(std::move(producer)), topic_(std::move(topic)) {}
  std::unique_ptr<KafkaProducer> producer_;
  std::string topic_;
  uint64_t failed_seen_ = 0;
};

}  // namespace ef
