// RangeSource: a MessageSource over fixed offset ranges [start, end) of given
// partitions, for `replay`. It assigns the partitions directly: no group
// membership, no commits (Commit is a no-op), so it never touches the live
// group's offsets. Messages at or past a partition's end are dropped; a range is
// done once a message at or past its end arrives, or the partition's end-of-log
// event says nothing is left before its end (so a range whose last offsets hold
// no record — a transaction marker, a compaction gap — still finishes);
// Done() once every range is.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

namespace ef {

struct OffsetRange {
  TopicPartition tp;
  int64_t start = 0;
  int64_t end = 0;  // exclusive
};

class RangeSource : public MessageSource {
 public:
  static StatusOr<std::unique_ptr<RangeSource>> Create(const KafkaConfig& config,
                                                       std::vector<OffsetRange> ranges);
  ~RangeSource() override;

  void SetRevokeHandler(RevokeHandler) override {}
  Status Poll(size_t max_messages, int timeout_ms, int max_wait_ms,
              std::vector<Message>* out) override;
  Status Commit(const std::vector<PartitionOffset>&, bool) override { return Status::Ok(); }
  Status PauseAll() override;
  Status ResumeAll() override;
  std::vector<TopicPartition> Assignment() override;
  int64_t Position(const TopicPartition& tp) override;
  void Close() override;

  bool Done() const;
  // Next offset to read per range (== end when done), in the order of the ranges.
  std::vector<int64_t> Positions() const;
  const std::vector<OffsetRange>& ranges() const { return ranges_; }

  struct Impl;

 private:
  RangeSource() = default;
  size_t RangeOf(const char* topic, int32_t partition) const;  // ranges_.size() if none
  std::unique_ptr<Impl> impl_;
  std::vector<OffsetRange> ranges_;
};

}  // namespace ef
