// Reads every message of a topic, with its headers, as an independent consumer
// would: a librdkafka consumer that assigns all partitions from the beginning
// (no group join, no commits) and reads up to the high watermarks it saw at the
// start. For checking what the daemon or a tool wrote to Kafka.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ef::test {

struct KafkaRecord {
  std::string topic;
  int32_t partition = -1;
  int64_t offset = -1;
  std::string key;
  std::string payload;
  int64_t timestamp_ms = -1;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, duplicates kept

  // The value of the first header called `name`, if any.
  std::optional<std::string> Header(const std::string& name) const;
};

// All messages of `topic` (every partition) below the high watermarks as of the
// call, ordered by partition then offset. Throws std::runtime_error when the
// topic does not exist or they cannot be read within `timeout`.
std::vector<KafkaRecord> ReadTopic(const std::string& bootstrap_servers, const std::string& topic,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace ef::test
