// Reads the Kafka timestamps of messages at given offsets, from outside the
// consumer group: what `lag` needs to turn "N messages behind" into the exact
// age of the oldest unwritten event. Works while the daemon is down.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

namespace ef {

// For each entry of `at` (topic, partition, offset; metadata ignored), the
// timestamp in epoch ms of the first message at or after that offset (a plain
// offset, or the next one when the offset holds no message, e.g. a
// transaction marker). -1 for an entry where no message arrives within
// timeout_ms, where the offset is at the end of the partition, or where the
// message carries no timestamp. The result has one element per entry, in order.
//
// Uses a consumer with the configured group.id and properties (so ACLs and
// security settings apply as for the daemon) that only assign()s the
// partitions: it never joins the group, never commits, never stores offsets.
// Each call opens and closes its own connection.
// Errors: kInvalidArgument for a bad kafka.properties entry; kInternal for a
// fatal client error or an authorization failure; kUnavailable when no entry
// got an answer and the client reported an error (e.g. brokers unreachable).
StatusOr<std::vector<int64_t>> ReadMessageTimestamps(const KafkaConfig& config,
                                                     const std::vector<PartitionOffset>& at,
                                                     int timeout_ms);

}  // namespace ef
