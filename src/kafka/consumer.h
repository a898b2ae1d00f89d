// KafkaConsumer: the MessageSource over librdkafka's high-level consumer.
// Consumer group with subscribe; auto-commit and auto offset store are off: the
// owner commits explicit offsets only after Redis acknowledged the writes.
// Both rebalance protocols: eager (range, roundrobin) and cooperative
// (cooperative-sticky: incremental assign/unassign, only what is revoked stops).
// Poll fails for good (kPermissionDenied) on authentication or authorization
// errors and when a subscribed topic stays missing for 10 s.
// Thread-compatible: all calls from one thread (the callbacks run inside Poll/Close).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

struct rd_kafka_message_s;

namespace ef {

class KafkaConsumer : public MessageSource {
 public:
  // Validates the properties and subscribes. Errors name the bad property.
  static StatusOr<std::unique_ptr<KafkaConsumer>> Create(const KafkaConfig& config);
  ~KafkaConsumer() override;

  void SetRevokeHandler(RevokeHandler handler) override;
  // Called (on a librdkafka thread: must be thread-safe) when a partition's
  // fetch position was deleted by the topic's retention before it was read, and
  // fetching went on at `to`: the messages from `from` to `to` - 1 are lost.
  using LostHandler = std::function<void(const TopicPartition& tp, int64_t from, int64_t to)>;
  void SetLostHandler(LostHandler handler);
  Status Poll(size_t max_messages, int timeout_ms, int max_wait_ms,
              std::vector<Message>* out) override;
  Status Commit(const std::vector<PartitionOffset>& offsets, bool sync) override;
  Status PauseAll() override;
  Status ResumeAll() override;
  std::vector<TopicPartition> Assignment() override;
  int64_t HighWatermark(const TopicPartition& tp) override;
  int64_t Position(const TopicPartition& tp) override;
  void Close() override;

  struct Impl;

 private:
  // A consumer error event: fatal (returned) or logged (OK).
  Status OnConsumerError(const rd_kafka_message_s& msg);
  // kPermissionDenied once a subscribed topic has been reported missing for
  // kTopicMissingFatalMs (10 s) with no message or assignment of it since.
  Status CheckTopicMissing();
  explicit KafkaConsumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// librdkafka properties every handle of ours gets before the user's own
// (client.id, log routing, fetch limits). Exposed for the producer and tools.
// Prefetch memory: librdkafka's queue limits (queued.max.messages.kbytes 32 MiB,
// queued.min.messages 1M) bound the one queue of all partitions, not each
// partition; the fetch responses in flight come on top, at most fetch.max.bytes
// (8 MiB, compressed) per broker. So the prefetch does not grow with the
// partition count (tests/robustness/rss_test.cc).
std::vector<std::pair<std::string, std::string>> ConsumerDefaults(const KafkaConfig& config);

}  // namespace ef
