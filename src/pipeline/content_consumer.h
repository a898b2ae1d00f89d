// ContentConsumer: the loop of `exposure-filter content` (docs/CONTENT.md "Items
// topic"): source.Poll -> ItemDecoder (item ID + fingerprint, or a reject) ->
// one batch -> assign (contentdb::ContentIndex::Assign) -> the batch's offsets
// become committable -> commit (async every commit_interval; sync on revoke and
// at the end).
// Guarantees:
//  - an offset is committed only after every message before it in its
//    partition was assigned (Assign succeeded) or rejected (at-least-once;
//    Assign is idempotent, so a redelivered item keeps its cluster);
//  - while Assign fails, the batch is kept and sent again with capped
//    exponential backoff; the source is paused and polled meanwhile (the group
//    stays alive), and what still arrives joins the batch: nothing is dropped;
//  - bad items are counted by reason and never stop the partition;
//  - on stop, the batch is assigned (retrying at most shutdown_grace_ms) and what
//    was assigned is committed synchronously.
// Single-threaded: Run and the revoke callback run on the caller's thread.
//
// Partition state, and its invariants (this class, nowhere else):
//  - done_[tp]: every message of tp before this offset was assigned or
//    rejected. Only partitions the source has assigned: entries are dropped on
//    revoke, and a batch's partitions no longer assigned are not marked done.
//  - batch_: the messages taken since the last successful Assign: their items
//    (copied) and, per partition, the offset after the last one (bad messages
//    included). Nothing of batch_ is in done_ until its Assign succeeded.
//  - A commit sends, for each assigned partition with a done_ entry, done_[tp],
//    raised to the source's Position(tp) when batch_ holds nothing of tp (every
//    message Poll returned of tp is done): that steps over what the log skips
//    (transaction markers). On revoke, done_ alone (the revoke dropped messages
//    of the Poll under way: the position is past them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "contentdb/index.h"
#include "event/item_decoder.h"
#include "kafka/source.h"
#include "metrics/content_metrics.h"

namespace ef {

struct ContentConsumerOptions {
  size_t batch_max_items = 1000;  // messages per batch (and per Assign)
  int batch_max_wait_ms = 20;
  int poll_timeout_ms = 100;  // bounds how late a stop request is seen
  int64_t commit_interval_ms = 1000;
  int64_t backoff_min_ms = 100;
  int64_t backoff_max_ms = 5000;
  // After a stop request, how long a failing Assign is still retried; then the
  // batch is given up (its offsets stay uncommitted: it is read again).
  int64_t shutdown_grace_ms = 10000;
  // Stop once every partition reached its offset here (next offset to read;
  // e.g. the high watermarks at start): `content --exit-at-end`. Empty: run until
  // stopped.
  std::map<TopicPartition, int64_t> end_offsets;
  // If set: the steady-clock ms (common/clock.h SteadyNowMs) since which Assign
  // fails, 0 while it succeeds; read by another thread (`content`'s /readyz).
  std::atomic<int64_t>* failing_since_ms = nullptr;
};

struct ContentTotals {
  uint64_t messages = 0;
  uint64_t items_new = 0;     // started their own cluster
  uint64_t items_joined = 0;  // joined an existing cluster
  uint64_t items_known = 0;   // already in the map (redelivery, repeats)
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_by_reason;  // ItemRejectReasonName -> count
  uint64_t batches = 0;                                // successful Assign calls
  uint64_t assign_failures = 0;
  uint64_t commits = 0;
  uint64_t assigned() const { return items_new + items_joined + items_known; }
};

class ContentConsumer {
 public:
  using AssignFn = std::function<StatusOr<std::vector<contentdb::Assignment>>(
      const std::vector<contentdb::ContentItem>&)>;

  // metrics may be null.
  ContentConsumer(MessageSource& source, ItemDecoder& decoder, AssignFn assign,
                  ContentMetrics* metrics, ContentConsumerOptions options);

  // Until `stop` is set (or, with end_offsets, every partition reached its end):
  // then the batch is assigned and offsets committed synchronously. Fatal source
  // errors are returned; kCancelled if Assign still failed when the shutdown
  // grace ran out; kPermissionDenied / kInvalidArgument / kFailedPrecondition
  // from Assign at once (retrying cannot help).
  Status Run(const std::atomic<bool>& stop);

  // Every end offset reached (false without end_offsets).
  bool AtEnd();

  const ContentTotals& totals() const { return totals_; }
  const std::map<TopicPartition, int64_t>& done() const { return done_; }

 private:
  struct Batch {
    std::vector<contentdb::ContentItem> items;
    std::map<TopicPartition, int64_t> next;  // per partition: offset after its last message
    bool empty() const { return next.empty(); }
  };
  // Decodes *messages into batch_.
  void Take(const std::vector<Message>& messages);
  // Assigns batch_ (retrying while Redis fails, polling the paused source),
  // then marks it done.
  Status AssignBatch(const std::atomic<bool>& stop);
  // Where AssignBatch's retries stand, handed between its steps.
  struct AssignRetry {
    int64_t backoff_ms = 0;     // the next wait
    int64_t failing_since = 0;  // SteadyNowMs of the first failure, 0 while none
    int64_t stop_seen_at = 0;   // SteadyNowMs when stop was first seen while failing, or 0
    int attempts = 0;
    bool paused = false;  // the source is paused
  };
  // The batch assigned: counts and logs it, resumes the source, marks it done.
  void Assigned(const std::vector<contentdb::Assignment>& assignments, const AssignRetry& retry);
  // An assignment failed: counts and logs it and pauses the source; kCancelled
  // once stop has been set for the shutdown grace.
  Status AssignFailed(const Status& st, const std::atomic<bool>& stop, AssignRetry* retry);
  // The backoff, polling the paused source (heartbeats, rebalances): what still
  // arrives (fetched before the pause) joins the batch. Ends early on stop.
  Status WaitOutBackoff(const std::atomic<bool>& stop, AssignRetry* retry);
  void MarkDone();
  std::vector<PartitionOffset> CommitOffsets(bool step_over_gaps);
  Status Commit(bool sync);
  void CommitIfDue();
  void OnRevoke(const std::vector<TopicPartition>& tps, bool lost);
  void LogProgressIfDue(bool force);

  MessageSource& source_;
  ItemDecoder& decoder_;
  AssignFn assign_;
  ContentMetrics* metrics_;
  ContentConsumerOptions options_;

  std::vector<Message> messages_;
  Batch batch_;
  std::map<TopicPartition, int64_t> done_;
  int64_t last_commit_ms_ = 0;
  int64_t last_progress_ms_ = 0;
  ContentTotals totals_;
};

}  // namespace ef
