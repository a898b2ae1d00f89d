// Reads a consumer group's committed offsets and the partitions' watermarks from
// outside the group (no join, no commit): what `lag` and the tests need, and it
// works while the daemon is down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

namespace ef {

struct PartitionOffsets {
  TopicPartition tp;
  int64_t committed = -1;  // -1: the group has no commit for the partition
  int64_t low = -1;        // low watermark (oldest retained offset)
  int64_t high = -1;       // high watermark (next offset to be written)
  std::string metadata;    // the commit's metadata string ("" if none)
  // Messages not yet committed: high - max(committed, low), never negative.
  int64_t LagMessages() const;
  // Messages deleted by the topic's retention before the group read them:
  // low - committed when the commit is below the low watermark, else 0. A
  // consumer resumes at the low watermark; these exposures are gone for good.
  int64_t LostMessages() const;
};

// For every partition of config.topics. Errors: kUnavailable when the cluster
// does not answer within timeout_ms; kPermissionDenied for a topic the broker
// does not have (UNKNOWN_TOPIC_OR_PART: refused for good, exit code 3, as `run`
// says) or may not be read; a topic's other metadata errors as FromKafkaError.
StatusOr<std::vector<PartitionOffsets>> ReadGroupOffsets(const KafkaConfig& config, int timeout_ms);

}  // namespace ef
