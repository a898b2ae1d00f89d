// In-memory fakes of the pipeline's edges, for unit tests. All are single-threaded
// like the pipeline itself (use each from one thread), deterministic, and never
// sleep: Poll never waits, whatever its timeouts say.
//
// FakeSource (kafka/source.h MessageSource): a broker in memory.
//  - Per-partition logs that tests append to (Append → the offset given, 0, 1, 2,
//    ... per partition unless an explicit offset is passed to AppendAt, e.g. to
//    model compacted gaps). Appending to a partition of the constructor's topic that
//    is not assigned yet assigns it. Poll returns up to max_messages across the
//    assigned partitions, partition by partition in TopicPartition order, each in
//    offset order, continuing after the last message it returned (its fetch
//    position). Message pointers stay valid for the whole life of the fake (more
//    than the interface promises).
//  - PauseAll/ResumeAll: while paused, Poll returns nothing (OK). DeliverWhilePaused(n)
//    lets the next n messages through anyway, like the messages librdkafka had
//    already fetched before the pause.
//  - Commit: every call is recorded (offsets, sync flag) in commits(); committed()
//    is the last committed next-offset per partition. FailNextCommits(n) makes the
//    next n calls return kUnavailable (still recorded, with ok = false).
//  - RevokeOnNextPoll(tps, lost): the next Poll first calls the revoke handler with
//    tps (from inside Poll, like librdkafka), then drops them from the assignment;
//    their messages are no longer returned. Assign(tp) hands a partition (back),
//    fetching from its last committed offset (0 if none), like a new owner.
//  - LeakyRevokeOnNextPoll(tps): like RevokeOnNextPoll, but the next Poll gathers
//    its messages first and revokes afterwards, returning messages of the revoked
//    partitions anyway: what KafkaConsumer did before issue 9 (defect 3), to test
//    that the pipeline never commits a partition it does not own even then.
//  - AppendMarker(partition): a transaction control record: takes an offset,
//    never returned by Poll. Position(tp) is the offset of the next record Poll
//    would return (control records right after the last returned one are
//    stepped over, like librdkafka), or the end of the log; -1 for a partition
//    assigned but not polled since. HighWatermark(tp) is the end of the log.
//  - UnavailableOnNextPoll(): the next Poll returns kUnavailable with no messages.
//  - on_poll: called at the start of every Poll (before anything else); tests use
//    it to append messages "while the pipeline is busy" or to set a stop flag.
//  - Counters: polls(), polls_while_paused(), pause_calls(), resume_calls(), paused(),
//    closed().
//
// FakeSink (pipeline/sink.h BitSink): Redis as the bit writer sees it.
//  - Every acknowledged Write applies the batch like Redis would: the key's bit set
//    gets the union of positions (SETBIT is idempotent) and its expire_at is set
//    (EXPIREAT, last write wins). bits(key), expire_at(key), keys(); RedisValue(key)
//    renders the bitmap as Redis stores it (bit 0 = MSB of byte 0) for
//    read/bloom_reader.h TestItems.
//  - acked_batches(): a copy of every acknowledged batch's live keys, in order, to
//    check coalescing (one entry per key, positions sorted and unique).
//  - FailNextWrites(n, code): the next n Write calls fail with `code` (default
//    kUnavailable) and change nothing. FailAlways(true): every Write fails until
//    FailAlways(false).
//  - Counters: write_calls() (all attempts), writes_ok(), write_failures().
//  - on_write: called at the start of every Write with the number of that call
//    since the sink was made (1, 2, ...: the new value of write_calls()), before
//    failing or applying, e.g. to set a stop flag or to look at the source while
//    the batch is in flight.
//  - WriteStats filled on success: keys = live keys, bits = positions sent,
//    commands = 2 per key (SETBIT/BITFIELD + EXPIREAT), skipped_keys = 0.
//
// FakeRejectSink (pipeline/ingest.h RejectSink): a dead-letter topic in memory.
//  - Send records (topic/partition/offset, reason) in sent(); the copy is
//    outstanding until Deliver(n) delivers the oldest n (or DeliverAll()).
//    With deliver_on_flush, Flush delivers everything outstanding.
//  - CommitLimit(tp): the lowest outstanding offset of tp, INT64_MAX if none.
//  - Forget(tps): drops their outstanding copies; forgotten() lists the calls.
//  - max_outstanding: Full() is true while that many copies are outstanding
//    (default: never); peak_outstanding() is the most there ever were.
//
// FakeClock (common/clock.h Clock): wall time the test sets: Set(ms), Advance(ms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bloom/bit_batch.h"
#include "common/clock.h"
#include "common/status.h"
#include "kafka/source.h"
#include "pipeline/ingest.h"
#include "pipeline/sink.h"

namespace ef::testing {

class FakeSource : public MessageSource {
 public:
  struct Record {
    int64_t offset = 0;
    std::string payload;
    int64_t timestamp_ms = 0;
    bool control = false;  // a transaction marker: never returned by Poll
  };
  struct CommitCall {
    std::vector<PartitionOffset> offsets;
    bool sync = false;
    bool ok = true;
  };

  explicit FakeSource(std::string topic = "exposures", int32_t partitions = 1);

  const std::string& topic() const { return topic_; }
  TopicPartition Tp(int32_t partition) const { return TopicPartition{topic_, partition}; }

  // Appends to the log of `partition` of topic(); returns the offset (one past the
  // partition's last offset).
  int64_t Append(int32_t partition, std::string payload, int64_t timestamp_ms = 0);
  // Appends with an explicit offset, which must exceed the partition's last one.
  void AppendAt(const TopicPartition& tp, int64_t offset, std::string payload,
                int64_t timestamp_ms = 0);
  // Messages not yet returned by Poll on assigned partitions.
  size_t Unconsumed() const;
  // Next offset the log would give to an appended message.
  int64_t EndOffset(int32_t partition) const;

  void Assign(const TopicPartition& tp);
  void RevokeOnNextPoll(std::vector<TopicPartition> tps, bool lost = false) {
    revoke_next_ = std::move(tps);
    revoke_lost_ = lost;
  }
  void LeakyRevokeOnNextPoll(std::vector<TopicPartition> tps) {
    leaky_revoke_next_ = std::move(tps);
  }
  // Appends a control record (see above); returns its offset.
  int64_t AppendMarker(int32_t partition);
  void UnavailableOnNextPoll() { unavailable_next_ = true; }
  // The next Poll gathers messages first (positions move past them), then revokes
  // tps and drops their gathered messages from its output: what KafkaConsumer does
  // when a revoke is served in the middle of a Poll.
  void ErasingRevokeOnNextPoll(std::vector<TopicPartition> tps) {
    erasing_revoke_next_ = std::move(tps);
  }
  void DeliverWhilePaused(size_t n) { deliver_while_paused_ = n; }
  void FailNextCommits(int n) { fail_commits_ = n; }
  // The next n async commits are held back as KafkaConsumer holds them while the
  // group rebalances: kCancelled, nothing committed, not recorded in commits().
  void HoldNextAsyncCommits(int n) { hold_async_commits_ = n; }
  int held_commits() const { return held_commits_; }

  std::function<void(FakeSource&)> on_poll;

  const std::vector<CommitCall>& commits() const { return commits_; }
  const std::map<TopicPartition, int64_t>& committed() const { return committed_; }
  uint64_t polls() const { return polls_; }
  uint64_t polls_while_paused() const { return polls_while_paused_; }
  uint64_t pause_calls() const { return pause_calls_; }
  uint64_t resume_calls() const { return resume_calls_; }
  bool paused() const { return paused_; }
  bool closed() const { return closed_; }

  // MessageSource.
  void SetRevokeHandler(RevokeHandler handler) override { revoke_handler_ = std::move(handler); }
  Status Poll(size_t max_messages, int timeout_ms, int max_wait_ms,
              std::vector<Message>* out) override;
  Status Commit(const std::vector<PartitionOffset>& offsets, bool sync) override;
  Status PauseAll() override;
  Status ResumeAll() override;
  std::vector<TopicPartition> Assignment() override;
  int64_t Position(const TopicPartition& tp) override;
  // The end of tp's log (its next offset), as a broker's high watermark.
  int64_t HighWatermark(const TopicPartition& tp) override { return EndOffset(tp.partition); }
  void Close() override { closed_ = true; }

 private:
  struct Log {
    std::deque<Record> records;  // deque: references stay valid on push_back
    size_t position = 0;         // index of the next record to return
    bool assigned = false;
    bool polled = false;  // polled since it was (last) assigned
  };
  Log& LogOf(const TopicPartition& tp);

  std::string topic_;
  std::map<TopicPartition, Log> logs_;  // map: keys (topic strings) never move
  RevokeHandler revoke_handler_;
  std::vector<TopicPartition> revoke_next_;
  bool revoke_lost_ = false;
  std::vector<TopicPartition> leaky_revoke_next_;
  std::vector<TopicPartition> erasing_revoke_next_;
  void Revoke(std::vector<TopicPartition>* tps, bool lost);
  bool unavailable_next_ = false;
  size_t deliver_while_paused_ = 0;
  int fail_commits_ = 0;
  int hold_async_commits_ = 0;
  int held_commits_ = 0;
  std::vector<CommitCall> commits_;
  std::map<TopicPartition, int64_t> committed_;
  uint64_t polls_ = 0;
  uint64_t polls_while_paused_ = 0;
  uint64_t pause_calls_ = 0;
  uint64_t resume_calls_ = 0;
  bool paused_ = false;
  bool closed_ = false;
};

class FakeSink : public BitSink {
 public:
  void FailNextWrites(uint64_t n, StatusCode code = StatusCode::kUnavailable) {
    fail_next_ = n;
    fail_code_ = code;
  }
  void FailAlways(bool on, StatusCode code = StatusCode::kUnavailable) {
    fail_always_ = on;
    fail_code_ = code;
  }
  // The message of the simulated failures from now on.
  void set_fail_message(std::string message) { fail_message_ = std::move(message); }

  std::function<void(uint64_t attempt)> on_write;

  // Bits set in `key` so far (empty if the key was never written).
  std::set<uint32_t> bits(const std::string& key) const;
  // EXPIREAT of `key`, or -1 if the key was never written.
  int64_t expire_at(const std::string& key) const;
  std::vector<std::string> keys() const;
  // The string Redis would hold for `key` ("" if missing): ceil((max bit + 1) / 8)
  // bytes, bit p at byte p / 8, mask 0x80 >> (p % 8).
  std::string RedisValue(const std::string& key) const;

  const std::vector<std::vector<KeyBits>>& acked_batches() const { return acked_batches_; }
  uint64_t write_calls() const { return write_calls_; }
  uint64_t writes_ok() const { return writes_ok_; }
  uint64_t write_failures() const { return write_failures_; }

  Status Write(const BitBatch& batch, WriteStats* stats) override;

 private:
  std::map<std::string, std::set<uint32_t>> bits_;
  std::map<std::string, int64_t> expire_at_;
  std::vector<std::vector<KeyBits>> acked_batches_;
  uint64_t fail_next_ = 0;
  bool fail_always_ = false;
  StatusCode fail_code_ = StatusCode::kUnavailable;
  std::string fail_message_ = "fake sink: write failed (simulated)";
  uint64_t write_calls_ = 0;
  uint64_t writes_ok_ = 0;
  uint64_t write_failures_ = 0;
};

class FakeRejectSink : public RejectSink {
 public:
  struct Sent {
    TopicPartition tp;
    int64_t offset = 0;
    RejectReason reason = RejectReason::kNone;
  };
  bool deliver_on_flush = false;
  // Full() once this many copies are outstanding.
  size_t max_outstanding = SIZE_MAX;

  void Send(const Message& m, RejectReason reason) override;
  Status Flush(int timeout_ms) override;
  int64_t CommitLimit(const TopicPartition& tp) override;
  void Forget(const std::vector<TopicPartition>& tps) override;
  bool Full() override { return outstanding_.size() >= max_outstanding; }

  void Deliver(size_t n);
  void DeliverAll() { Deliver(outstanding_.size()); }
  const std::vector<Sent>& sent() const { return sent_; }
  size_t outstanding() const { return outstanding_.size(); }
  // The most copies ever outstanding at once.
  size_t peak_outstanding() const { return peak_outstanding_; }
  const std::vector<std::vector<TopicPartition>>& forgotten() const { return forgotten_; }
  int flushes() const { return flushes_; }

 private:
  std::vector<Sent> sent_;
  std::deque<Sent> outstanding_;
  std::vector<std::vector<TopicPartition>> forgotten_;
  size_t peak_outstanding_ = 0;
  int flushes_ = 0;
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMs() override { return now_ms_; }
  void Set(int64_t now_ms) { now_ms_ = now_ms; }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  int64_t now_ms_;
};

}  // namespace ef::testing
