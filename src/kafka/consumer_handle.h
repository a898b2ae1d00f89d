// What every consumer handle of ours shares, in one place: our defaults
// (ConsumerDefaults), then the user's kafka.properties, then `forced` (what this
// handle needs whatever the user says), then log routing; `customize` may set
// callbacks and an opaque before the handle is created. Errors name the property.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/handles.h"
#include "kafka/source.h"

namespace ef::kafka {

StatusOr<HandlePtr> NewConsumerHandle(
    const KafkaConfig& config, const std::vector<std::pair<std::string, std::string>>& forced = {},
    const std::function<void(rd_kafka_conf_t*)>& customize = {});

// Everything a consumer of `config` would refuse at start (librdkafka's own
// checks of kafka.properties and of their combination, as rd_kafka_new makes
// them), without connecting: the handle is made and destroyed at once. Errors
// name the property, as NewConsumerHandle's.
Status CheckConsumerConfig(const KafkaConfig& config);

// Stable std::string storage for topic names, so Message::topic can point at it.
class TopicNames {
 public:
  const std::string* Intern(const char* name);

 private:
  std::vector<std::unique_ptr<std::string>> names_;
};

// A Message viewing `msg` (valid while msg lives); `topic` from TopicNames.
Message ToMessage(const rd_kafka_message_t& msg, const std::string* topic);

}  // namespace ef::kafka
