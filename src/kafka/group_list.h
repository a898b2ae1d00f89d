// Lists the consumer groups a Kafka cluster knows (the ListGroups API, through
// librdkafka's admin ListConsumerGroups), from outside any group: what
// `lag --all-groups` and `lag --list-groups` start from. Simple consumer groups
// (offsets committed without a group membership) are listed too.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef {

// Every group the brokers list, sorted, without duplicates. Uses a handle with
// the configured properties (security settings apply). Any broker's error fails
// the whole list: a list missing groups would hide their lag.
// Errors: kPermissionDenied when a broker cannot list groups
// (_UNSUPPORTED_FEATURE: e.g. librdkafka's mock cluster, which does not
// implement ListGroups) or refuses it (authorization); kUnavailable when no
// answer came within timeout_ms; kInvalidArgument for a bad kafka.properties
// entry. The message names the servers.
StatusOr<std::vector<std::string>> ListConsumerGroups(const KafkaConfig& config, int timeout_ms);

}  // namespace ef
