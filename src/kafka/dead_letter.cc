#include "kafka/dead_letter.h"

#include <spdlog/spdlog.h>

namespace ef {

StatusOr<std::unique_ptr<DeadLetterSink>> DeadLetterSink::Create(const KafkaConfig& config) {
  ProducerOptions o;
  o.bootstrap_servers = config.bootstrap_servers;
  o.properties = config.properties;
  // Consumer-only properties would make the producer refuse to start.
  for (const char* k : {"group.id", "auto.offset.reset", "enable.auto.commit",
                        "enable.auto.offset.store", "fetch.wait.max.ms", "queued.min.messages",
                        "session.timeout.ms", "max.poll.interval.ms", "fetch.min.bytes",
                        "fetch.max.bytes", "max.partition.fetch.bytes", "queued.max.messages.kbytes",
                        "heartbeat.interval.ms", "partition.assignment.strategy"})
    o.properties.erase(k);
  auto p = KafkaProducer::Create(o);
  if (!p.ok()) return p.status().Prefixed("kafka.dead_letter_topic");
  return std::unique_ptr<DeadLetterSink>(
      new DeadLetterSink(std::move(p.value()), config.dead_letter_topic));
}

void DeadLetterSink::Send(const Message& m, RejectReason reason) {
  std::vector<Header> headers = {
      {"exposure-filter-reason", RejectReasonName(reason)},
      {"exposure-filter-source",
       *m.topic + "/" + std::to_string(m.partition) + "/" + std::to_string(m.offset)}};
  Status st = producer_->Produce(topic_, -1, {}, std::string_view(m.payload, m.len),
                                 m.timestamp_ms > 0 ? m.timestamp_ms : 0, headers);
  if (!st.ok()) spdlog::warn("dead letter: {}", st.message());
  producer_->Poll();
}

Status DeadLetterSink::Flush() {
  Status st = producer_->Flush(30000);
  if (!st.ok()) return st;
  if (producer_->failed() != failed_seen_) {
    uint64_t n = producer_->failed() - failed_seen_;
    failed_seen_ = producer_->failed();
    return Unavailable("dead letter topic " + topic_ + ": " + std::to_string(n) +
                       " message(s) failed delivery");
  }
  return Status::Ok();
}

}  // namespace ef
