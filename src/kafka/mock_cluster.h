// MockCluster: librdkafka's in-process mock Kafka cluster (rdkafka_mock.h). It
// speaks the real Kafka protocol over TCP on 127.0.0.1 (random ports), so any
// client can use it. Limits measured in shared/KAFKA-MOCK.md: ~5 MiB retained per
// partition, no offsets-by-timestamp, topics auto-create on subscribe.
#pragma once

#include <memory>
#include <string>

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

  struct Impl;

 private:
  MockCluster() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef
