// MockCluster: librdkafka's in-process mock Kafka cluster (rdkafka_mock.h). It
// speaks the real Kafka protocol over TCP on 127.0.0.1 (random ports), so any
// client can use it. Limits measured in shared/KAFKA-MOCK.md: ~5 MiB retained per
// partition, no offsets-by-timestamp, topics auto-create on subscribe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace ef {

class MockCluster {
 public:
  static StatusOr<std::unique_ptr<MockCluster>> Create(int brokers);
  ~MockCluster();

  // "127.0.0.1:p1,127.0.0.1:p2,..."; fixed for the life of the object.
  std::string bootstrap_servers() const;
  Status CreateTopic(const std::string& topic, int partitions, int replication = 1);
  // broker_id -1 = all brokers.
  Status SetBrokerDown(int broker_id);
  Status SetBrokerUp(int broker_id);
  // Moves the leadership of one partition to `broker_id` (-1 = leaderless);
  // clients learn it from the next NOT_LEADER error or metadata refresh.
  Status SetPartitionLeader(const std::string& topic, int32_t partition, int broker_id);
  // Makes `broker_id` the coordinator of consumer group `group` (FindCoordinator
  // answers it from now on; the old coordinator answers NOT_COORDINATOR).
  Status SetGroupCoordinator(const std::string& group, int broker_id);
  // Queues `errors` (librdkafka error codes, 0 = success) for the next requests
  // of API `api_key` (1 Fetch, 8 OffsetCommit, 11 JoinGroup, 12 Heartbeat, ...)
  // on any broker, one error per request, in order. Cluster-wide; stays queued
  // until consumed or cleared.
  void PushRequestErrors(int16_t api_key, const std::vector<int>& errors);
  // Drops the errors still queued for `api_key`.
  void ClearRequestErrors(int16_t api_key);
  // Makes every Metadata answer for `topic` carry the librdkafka error code `err`
  // (e.g. 3, UNKNOWN_TOPIC_OR_PART: a topic the broker does not have; the mock
  // would otherwise create any topic a client asks about). 0 clears it.
  void SetTopicError(const std::string& topic, int err);
  // Adds `rtt_ms` of latency to every response of `broker_id` (0 = none).
  Status SetBrokerRtt(int broker_id, int rtt_ms);

  struct Impl;

 private:
  MockCluster() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef
