// The Kafka edge as the pipeline sees it. Implemented by KafkaConsumer (librdkafka)
// and by an in-memory fake in tests. No librdkafka types cross this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ef {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  bool operator==(const TopicPartition&) const = default;
  bool operator<(const TopicPartition& o) const {
    return topic < o.topic || (topic == o.topic && partition < o.partition);
  }
};

struct PartitionOffset {
  TopicPartition tp;
  int64_t offset = 0;    // for commits: the next offset to consume
  std::string metadata;  // committed with the offset (see kafka/commit_metadata.h)
};

// One consumed record. Pointers are valid until the next Poll on the source.
struct Message {
  const std::string* topic = nullptr;
  int32_t partition = 0;
  int64_t offset = 0;
  const char* payload = nullptr;
  size_t len = 0;
  int64_t timestamp_ms = 0;  // Kafka message timestamp; <= 0 if none
};

class MessageSource {
 public:
  virtual ~MessageSource() = default;

  // Called from inside Poll (same thread) before partitions are taken away, so the
  // owner can flush and commit what Redis acknowledged for them. `lost`: the
  // group already gave them to another member (session timed out): a commit
  // would be refused, and must not be tried. After the handler returns, no
  // Message of these partitions is handed out (not even one gathered earlier in
  // the same Poll) until they are assigned again.
  using RevokeHandler = std::function<void(const std::vector<TopicPartition>&, bool lost)>;
  virtual void SetRevokeHandler(RevokeHandler handler) = 0;

  // Appends up to max_messages to *out (cleared first), waiting at most
  // timeout_ms for the first and then at most max_wait_ms more for the batch to
  // fill. Messages of the previous
  // Poll are released. Errors: kUnavailable (transient, already logged, may
  // retry), anything else is fatal.
  virtual Status Poll(size_t max_messages, int timeout_ms, int max_wait_ms,
                      std::vector<Message>* out) = 0;

  // Commits offsets (next offset to read) for the given partitions. A sync
  // commit the group refuses because it is rebalancing (or this member's
  // generation is over) is kFailedPrecondition: the partitions' next owner
  // re-reads from their last commit. An async commit may be held back while
  // the group rebalances (KafkaConsumer: one sent then is refused, or worse):
  // kCancelled, nothing sent; the next commit carries the same offsets.
  virtual Status Commit(const std::vector<PartitionOffset>& offsets, bool sync) = 0;

  // Stops / restarts fetching on all assigned partitions. After Resume, fetching
  // continues after the last message Poll returned: nothing is skipped.
  virtual Status PauseAll() = 0;
  virtual Status ResumeAll() = 0;

  // The partitions assigned now. Poll only returns messages of these.
  virtual std::vector<TopicPartition> Assignment() = 0;

  // The next offset Poll will hand out for the partition: one past the last
  // message returned, or further when the log skips offsets there (transaction
  // control records, compaction gaps). -1 while not known (nothing fetched yet).
  // Once every message before it is acknowledged, this is the offset to commit.
  virtual int64_t Position(const TopicPartition& /*tp*/) { return -1; }

  // The partition's high watermark, never waiting for a broker: the newest of the
  // last fetch response and a broker answer at most about a second old (asked on
  // another thread, also while the partition is paused or not fetched); -1 when
  // not known.
  virtual int64_t HighWatermark(const TopicPartition& /*tp*/) { return -1; }

  // Leaves the group (after the final commit).
  virtual void Close() = 0;
};

}  // namespace ef
