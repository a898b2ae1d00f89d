// RAII ownership of librdkafka handles. Only src/kafka includes librdkafka.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace ef::kafka {

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
  void operator()(rd_kafka_conf_t* c) const { rd_kafka_conf_destroy(c); }
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
  void operator()(rd_kafka_topic_t* t) const { rd_kafka_topic_destroy(t); }
};

using HandlePtr = std::unique_ptr<rd_kafka_t, KafkaDeleter>;
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, KafkaDeleter>;
using PartitionListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, KafkaDeleter>;
using MessagePtr = std::unique_ptr<rd_kafka_message_t, KafkaDeleter>;
using QueuePtr = std::unique_ptr<rd_kafka_queue_t, KafkaDeleter>;

// Sets one property; the error names the property.
Status SetConf(rd_kafka_conf_t* conf, const std::string& name, const std::string& value);

// kPermissionDenied for authentication and authorization errors, kInternal for
// other fatal ones, kUnavailable for the rest (retriable).
Status FromKafkaError(rd_kafka_resp_err_t err, const std::string& what);

// The broker (or librdkafka) says the topic does not exist. Callers treat it as
// refused for good (exit code 3): at once for a one-off read, after a grace
// period for a subscription (KafkaConsumer).
inline bool IsUnknownTopic(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
}

}  // namespace ef::kafka
