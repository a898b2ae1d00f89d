// Ingest: the one-way pipeline of `run` and `replay`:
//   source.Poll → decode → hash/coalesce per key → sink.Write (pipelined, acked)
//   → offsets of the batch become committable → commit (async, every
//   commit_interval; sync on revoke and at shutdown).
// Guarantees:
//  - an offset is committed only after every event before it in its partition
//    was acknowledged by Redis or rejected as a bad event (at-least-once);
//  - while the sink fails, the batch is kept and retried with capped exponential
//    backoff; the source is paused (and polled, so the group stays alive); any
//    message that still arrives joins the pending batch: nothing is dropped;
//  - bad events are counted by reason (and sent to the dead-letter sink when
//    configured); they never stop the partition;
//  - while the reject sink is Full (its undelivered copies at their memory
//    cap), no new message is taken: the batch under way is still written, then
//    the source is paused (and polled) and the reject sink flushed until it has
//    room: nothing is dropped, and the copies never grow past the cap by more
//    than one Poll's messages.
// Two batches overlap: while Redis acknowledges batch N (BitSink Send/Await),
// the messages the consumer already fetched are decoded into batch N+1; batches
// are acknowledged, and their offsets become committable, strictly in order.
// Single-threaded: Run, Step and the revoke callback all run on the caller's
// thread (the sink may write on a thread of its own between Send and Await).
//
// Partition state, and its invariants (kept in this class and nowhere else):
//  - acked_[tp]: every message of tp before this offset was acknowledged by the
//    sink or rejected; acked_ holds only partitions the source has assigned
//    (entries are dropped on revoke, and Ack ignores partitions no longer
//    assigned, even if a message of one slipped into a batch).
//  - A commit sends, for each assigned partition with an acked_ entry,
//    min(acked_[tp], the reject sink's CommitLimit(tp)), raised to the source's
//    Position(tp) when nothing of tp is pending (every message Poll returned is
//    acknowledged and no dead-letter copy is outstanding): that steps over
//    transaction markers and compaction gaps, so an idle partition reads lag 0.
//    Nothing is committed while the assignment is empty.
//  - messages_[next_message_..] were polled but not decoded yet (the batch was
//    full): no Poll happens before they are decoded, because Poll releases them.
//  - A batch holds at most batch_max_events messages and batch_max_positions
//    positions (items × k), plus at most one event: memory is bounded by
//    positions, not by messages.
//  - rejects_paused_: the source is paused because the reject sink was Full
//    (set and cleared by HoldForRejects only). While it is set, Step polls
//    nothing new, writes nothing and only serves the consumer and the reject
//    sink; it is cleared, and the source resumed, once Full is false.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "common/clock.h"
#include "common/status.h"
#include "event/decoder.h"
#include "kafka/source.h"
#include "metrics/ingest_metrics.h"
#include "metrics/partition_monitor.h"
#include "pipeline/clusters.h"
#include "pipeline/coalescer.h"
#include "pipeline/sink.h"

namespace ef {

struct IngestOptions {
  size_t batch_max_events = 20000;
  // Positions (items × k, before de-duplication) per batch: about 4 bytes each.
  size_t batch_max_positions = 4000000;
  int batch_max_wait_ms = 20;
  int poll_timeout_ms = 100;  // bounds how late a stop request is seen
  int64_t commit_interval_ms = 1000;
  int64_t backoff_min_ms = 100;
  int64_t backoff_max_ms = 5000;
  // After a stop request, how long to keep retrying a failing sink before giving
  // up on the pending batch (its offsets stay uncommitted: nothing is lost).
  int64_t shutdown_grace_ms = 10000;
  // A write with neither a reply nor an error for this long is reported (an
  // error log and exposure_filter_redis_write_stalls_total), and again each
  // time as long again passes. Redis commands time out (redis.command_timeout),
  // so only a writer's bug can get here: a stall must not be silent.
  int64_t stall_warn_ms = 30000;
};

// Where rejected messages go besides the counters (e.g. a dead-letter topic).
// A rejected message's offset is committed only once its copy is delivered:
// CommitLimit caps each partition's commit below the oldest copy not yet
// delivered.
class RejectSink {
 public:
  virtual ~RejectSink() = default;
  virtual void Send(const Message& message, RejectReason reason) = 0;
  // Serves delivery reports and retries, waiting at most timeout_ms for
  // outstanding copies (0: no wait). OK when nothing is outstanding.
  virtual Status Flush(int timeout_ms) = 0;
  // The lowest offset of tp whose copy is not delivered yet; INT64_MAX if none.
  virtual int64_t CommitLimit(const TopicPartition& tp) = 0;
  // The partitions are no longer ours: their outstanding copies need not hold
  // back any commit (they are still delivered when possible).
  virtual void Forget(const std::vector<TopicPartition>& tps) = 0;
  // True while the outstanding copies fill the sink's memory cap. Ingest then
  // takes no new message (it pauses the source, keeps polling it and calls
  // Flush) until Full is false again; Send must still keep every copy it is
  // given meanwhile (the messages of a Poll already made), so a cap may be
  // passed by at most one Poll's messages. false for a sink without a cap.
  virtual bool Full() { return false; }
};

struct IngestTotals {
  uint64_t messages = 0;
  uint64_t events_written = 0;
  uint64_t events_rejected = 0;
  uint64_t items_written = 0;
  uint64_t batches = 0;
  uint64_t write_failures = 0;
  uint64_t write_stalls = 0;  // stall_warn_ms passed with a write in flight
  uint64_t commits = 0;
  // filter.near_duplicates (SetClusters):
  // Cluster marks (founder IDs; tokens before revision 2, hence the name)
  // written beside items (CONTENT.md rule 5).
  uint64_t cluster_tokens = 0;
  uint64_t cluster_lookups = 0;     // distinct items asked of the ClusterSource
  uint64_t cluster_cache_hits = 0;  // exposed items the cache answered (a miss kept included)
  uint64_t items_unclustered = 0;   // exposed items with no known cluster
};

class Ingest {
 public:
  Ingest(MessageSource& source, BitSink& sink, Decoder& decoder, const Layout& layout, Clock& clock,
         IngestMetrics* metrics, IngestOptions options, RejectSink* rejects = nullptr);

  // Until `stop` is set: then the pending batch is flushed, offsets committed
  // synchronously, and OK returned. Fatal source errors are returned at once;
  // kCancelled if the sink still failed when the shutdown grace ran out.
  Status Run(const std::atomic<bool>& stop);

  // One cycle: poll a batch, decode, write it (retrying until written or
  // stopped) while decoding what the consumer already fetched into the next
  // batch, commit if due. *got is the number of messages polled. The next batch
  // is written by the next Step (which then does not wait for messages), or by
  // Flush. After an error, Step and Flush return that error again.
  Status Step(const std::atomic<bool>& stop, size_t* got = nullptr);
  // Writes what is decoded and not yet written (the next batch), no polling.
  Status Flush(const std::atomic<bool>& stop);
  // True while decoded messages wait to be written.
  bool pending() const { return !batches_[building_].empty(); }

  // Commits every acknowledged offset, with metadata (kafka/commit_metadata.h):
  // commit time and newest event time written. Called every commit_interval
  // even when offsets did not move, also while Redis fails: the commits are the
  // heartbeat that tells a stalled daemon from a stopped one from outside.
  Status CommitAcked(bool sync);

  // Offsets and newest event time of every assigned partition, now.
  std::vector<PartitionSnapshot> Snapshot();
  IngestHealth Health() const { return {sink_failing_, sink_error_}; }
  // filter.near_duplicates (docs/CONTENT.md rule 5): each exposed item's cluster
  // is taken from the event, else from a cache within `cache` (content.cache_items
  // and content.cache_bytes), else asked of `clusters` (not owned) in one call
  // per batch just before the batch is written; an item that is not its
  // cluster's first gets its cluster (the founder's ID) in the same key. A failed call is
  // retried like a failed write (the batch waits; nothing is committed past it).
  // Call before Run/Step.
  void SetClusters(ClusterSource* clusters, ClusterCacheLimits cache) {
    clusters_ = clusters;
    cluster_cache_ = std::make_unique<ClusterCache>(cache);
  }
  // At most cache_items items, no byte limit.
  void SetClusters(ClusterSource* clusters, size_t cache_items) {
    SetClusters(clusters, ClusterCacheLimits{cache_items});
  }

  // Calls fn about every interval_ms from the ingest thread, also while Redis
  // writes are being retried.
  void SetTick(int64_t interval_ms, std::function<void()> fn) {
    tick_interval_ms_ = interval_ms;
    tick_ = std::move(fn);
  }

  const IngestTotals& totals() const { return totals_; }
  // Next offsets acknowledged so far (committed or not), per partition.
  const std::map<TopicPartition, int64_t>& acked() const { return acked_; }
  // Event time of the newest event acknowledged by Redis, per partition.
  const std::map<TopicPartition, int64_t>& acked_event_ms() const { return acked_event_ms_; }

 private:
  struct PendingPartition {
    int64_t first = -1;           // first offset in the batch (-1: none yet)
    int64_t next = 0;             // next offset covered by the batch
    int64_t newest_event_ms = 0;  // newest event time in it
    int64_t oldest_event_ms = 0;  // oldest event time in it (0: no good event)
  };
  // Messages consumed and decoded, not yet acknowledged.
  struct Batch {
    explicit Batch(const Layout& layout) : coalescer(layout) {}
    Coalescer coalescer;
    std::vector<int64_t> event_ts_ms;  // event times, for the latency histogram
    // Kafka timestamps of the same events (those that have one), for the ingest
    // delay histogram.
    std::vector<int64_t> append_ts_ms;
    uint64_t items = 0;
    uint64_t positions = 0;  // items × k, before de-duplication
    size_t messages = 0;     // consumed into it, bad ones included
    // Exposed items whose cluster is not known yet (near_duplicates): asked of
    // the ClusterSource by ResolveClusters before the batch is written; their
    // tokens then join the coalescer. Copies: the decoder's views do not last.
    struct Unresolved {
      std::string user, item;
      int64_t ts_ms = 0;
      bool has_simhash = false;
      uint64_t simhash = 0;
    };
    std::vector<Unresolved> unresolved;
    std::map<TopicPartition, PendingPartition> partitions;
    bool empty() const { return partitions.empty(); }
    void Clear();
  };
  Batch& building() { return batches_[building_]; }
  // Messages the building batch can still take (0 when full, or while the
  // reject sink is Full).
  size_t Room();
  // The reject sink is Full and nothing taken waits to be written: pauses the
  // source (once), polls it once, flushes the reject sink, commits if due, and
  // sets *held. Resumes the source once the sink has room again.
  Status HoldForRejects(size_t* got, bool* held);
  // Polls (unless undecoded messages are left) and decodes into the building
  // batch as far as it has room.
  Status PollAndDecode(int timeout_ms, int max_wait_ms, size_t* got);
  // Writes the building batch; with `overlap`, polls and decodes the next one
  // meanwhile.
  Status WriteBuilding(const std::atomic<bool>& stop, bool overlap, size_t* got);
  // Decodes messages_ from next_message_ on into the building batch, until it
  // is full (or, with `all`, to the end).
  void DecodeMessages(bool all = false);
  // True while messages of tp are decoded or polled but not acknowledged.
  bool Pending(const TopicPartition& tp) const;
  // The offset to commit for tp, given acked_[tp] (see the invariants above).
  // step_over_gaps = false on revoke: the consumer's position may be past
  // messages the revoke dropped from the Poll under way (never written).
  int64_t CommitOffset(const TopicPartition& tp, int64_t acked, bool step_over_gaps = true);
  // Sends the sealed `batch` to the sink; the stall clock starts.
  void SendWrite(const Batch& batch);
  // Until the write in flight is Ready: the tick and the commit heartbeat go on
  // when due (so lag and status stay true while Redis holds a write), and a
  // stall is reported when due.
  void WaitForWrite(const Batch& batch);
  // Awaits the write of `batch` (sent to the sink), retrying until it is
  // acknowledged or given up.
  Status AwaitWrite(Batch& batch, const std::atomic<bool>& stop);
  // The write of `batch` (sent at write_sent_ms_) has been in flight past
  // stall_report_at_ms_: reported (log, metric, totals), next report in
  // stall_warn_ms.
  void ReportStallIfDue(const Batch& batch);
  Status RetryWrite(Batch& batch, Status first_error, const std::atomic<bool>& stop);
  // near_duplicates, at decode: the event's items' clusters from the event or
  // the cache; their tokens are appended to event_.items (token_scratch_ holds
  // them) and every item's hash to hash_scratch_ (for the coalescer); items not
  // known are queued in batch.unresolved.
  void AddClusterTokens(Batch& batch, int64_t steady_now_ms);
  // Asks the ClusterSource for batch.unresolved (one call), adds their tokens and
  // empties it. OK at once when nothing is unresolved.
  Status ResolveClusters(Batch& batch);
  void Ack(Batch& batch);
  void OnRevoke(const std::vector<TopicPartition>& partitions, bool lost);
  void RecordWritten(const Batch& batch, const WriteStats& stats, int64_t write_start_ms);
  std::vector<PartitionOffset> AckedOffsets(bool step_over_gaps = true);
  void CommitIfDue();

  MessageSource& source_;
  BitSink& sink_;
  Decoder& decoder_;
  Clock& clock_;
  IngestMetrics* metrics_;
  IngestOptions options_;
  RejectSink* rejects_;

  Event event_;
  std::vector<Message> messages_;
  size_t next_message_ = 0;  // messages_[next_message_..] are not decoded yet
  uint32_t k_ = 1;
  Batch batches_[2];
  int building_ = 0;  // index of the batch messages are decoded into
  Status failed_;     // the error that ended Step or Flush, if any
  std::map<TopicPartition, int64_t> acked_;
  std::map<TopicPartition, int64_t> acked_event_ms_;  // newest event time acknowledged
  int64_t last_commit_ms_ = 0;
  void MaybeTick();
  std::function<void()> tick_;
  int64_t tick_interval_ms_ = 1000;
  int64_t last_tick_ms_ = 0;
  int64_t write_sent_ms_ = 0;       // steady clock: when the write in flight was sent
  int64_t stall_report_at_ms_ = 0;  // when it is reported as stalled (stall_warn_ms)
  bool sink_failing_ = false;
  std::string sink_error_;
  bool rejects_paused_ = false;     // see the invariants above
  int64_t rejects_full_since_ = 0;  // steady ms when rejects_paused_ was set
  LocalHistogram e2e_;
  LocalHistogram delay_;  // exposure_filter_ingest_delay_seconds
  IngestTotals totals_;
  ClusterSource* clusters_ = nullptr;  // null: near_duplicates off
  std::unique_ptr<ClusterCache> cluster_cache_;
  std::vector<std::string> token_scratch_;  // AddClusterTokens' tokens, one per item
  std::vector<Hash128> hash_scratch_;       // and the hashes of the event's items and tokens
  uint32_t seed_ = 0;                       // the layout's (HashItem)
};

}  // namespace ef
