#include "kafka/mock_cluster.h"

// rdkafka_mock.h requires rdkafka.h first.
#include <librdkafka/rdkafka.h>
// clang-format off
#include <librdkafka/rdkafka_mock.h>
// clang-format on

#include "kafka/handles.h"
#include "kafka/log.h"

namespace ef {

struct MockCluster::Impl {
  kafka::HandlePtr rk;  // owns the cluster's thread; destroyed after the cluster
  rd_kafka_mock_cluster_t* cluster = nullptr;
  ~Impl() {
    if (cluster) rd_kafka_mock_cluster_destroy(cluster);
  }
};

StatusOr<std::unique_ptr<MockCluster>> MockCluster::Create(int brokers) {
  if (brokers < 1) return InvalidArgument("mock cluster: brokers must be >= 1");
  kafka::ConfPtr conf(rd_kafka_conf_new());
  kafka::InstallLogging(conf.get());
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
  if (!rk) return Internal(std::string("mock cluster: ") + err);
  conf.release();
  std::unique_ptr<MockCluster> mc(new MockCluster());
  mc->impl_ = std::make_unique<Impl>();
  mc->impl_->rk.reset(rk);
  mc->impl_->cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (!mc->impl_->cluster) return Internal("mock cluster: rd_kafka_mock_cluster_new failed");
  return mc;
}

MockCluster::~MockCluster() = default;

std::string MockCluster::bootstrap_servers() const {
  return rd_kafka_mock_cluster_bootstraps(impl_->cluster);
}

Status MockCluster::CreateTopic(const std::string& topic, int partitions, int replication) {
  return kafka::FromKafkaError(
      rd_kafka_mock_topic_create(impl_->cluster, topic.c_str(), partitions, replication),
      "mock cluster: create topic " + topic);
}

Status MockCluster::SetBrokerDown(int broker_id) {
  return kafka::FromKafkaError(rd_kafka_mock_broker_set_down(impl_->cluster, broker_id),
                               "mock cluster: broker down");
}

Status MockCluster::SetBrokerUp(int broker_id) {
  return kafka::FromKafkaError(rd_kafka_mock_broker_set_up(impl_->cluster, broker_id),
                               "mock cluster: broker up");
}

Status MockCluster::SetPartitionLeader(const std::string& topic, int32_t partition, int broker_id) {
  return kafka::FromKafkaError(
      rd_kafka_mock_partition_set_leader(impl_->cluster, topic.c_str(), partition, broker_id),
      "mock cluster: set leader of " + topic + "/" + std::to_string(partition));
}

Status MockCluster::SetGroupCoordinator(const std::string& group, int broker_id) {
  return kafka::FromKafkaError(
      rd_kafka_mock_coordinator_set(impl_->cluster, "group", group.c_str(), broker_id),
      "mock cluster: set coordinator of group " + group);
}

void MockCluster::PushRequestErrors(int16_t api_key, const std::vector<int>& errors) {
  std::vector<rd_kafka_resp_err_t> codes;
  codes.reserve(errors.size());
  for (int e : errors) codes.push_back(static_cast<rd_kafka_resp_err_t>(e));
  rd_kafka_mock_push_request_errors_array(impl_->cluster, api_key, codes.size(), codes.data());
}

void MockCluster::ClearRequestErrors(int16_t api_key) {
  rd_kafka_mock_clear_request_errors(impl_->cluster, api_key);
}

void MockCluster::SetTopicError(const std::string& topic, int err) {
  rd_kafka_mock_topic_set_error(impl_->cluster, topic.c_str(),
                                static_cast<rd_kafka_resp_err_t>(err));
}

Status MockCluster::SetBrokerRtt(int broker_id, int rtt_ms) {
  return kafka::FromKafkaError(rd_kafka_mock_broker_set_rtt(impl_->cluster, broker_id, rtt_ms),
                               "mock cluster: broker rtt");
}

}  // namespace ef
