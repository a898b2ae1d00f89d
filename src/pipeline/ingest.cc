#include "pipeline/ingest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <unordered_map>

#include "bloom/cluster_token.h"
#include "common/clock.h"
#include "kafka/commit_metadata.h"
#include "pipeline/revoke_commit.h"

namespace ef {
namespace {

// While a batch is written, the next one is polled in waits this short, so its
// messages are decoded as they arrive and the write's end is noticed at once.
constexpr int kOverlapPollMs = 2;
// The longest a wait for a write in flight sleeps before looking at the clock again.
constexpr int64_t kMaxWriteWaitSliceMs = 1000;
// How long a commit waits for dead-letter copies to be delivered: none for the
// periodic commits (the copies' offsets are simply not committed yet), a little
// on revoke and at shutdown.
constexpr int kRevokeRejectFlushMs = 2000;
constexpr int kFinalRejectFlushMs = 5000;
// While a write keeps failing, a changed error is logged at most this often.
constexpr int64_t kErrorChangeLogIntervalMs = 10000;

}  // namespace

Ingest::Ingest(MessageSource& source, BitSink& sink, Decoder& decoder, const Layout& layout,
               Clock& clock, IngestMetrics* metrics, IngestOptions options, RejectSink* rejects)
    : source_(source),
      sink_(sink),
      decoder_(decoder),
      clock_(clock),
      metrics_(metrics),
      options_(options),
      rejects_(rejects),
      batches_{Batch(layout), Batch(layout)},
      e2e_(IngestMetrics::LatencyBuckets()),
      delay_(IngestMetrics::LatencyBuckets()) {
  source_.SetRevokeHandler(
      [this](const std::vector<TopicPartition>& tps, bool lost) { OnRevoke(tps, lost); });
  last_commit_ms_ = SteadyNowMs();
  k_ = std::max<uint32_t>(layout.k, 1);
  seed_ = layout.seed;
}

void Ingest::Batch::Clear() {
  coalescer.Clear();
  event_ts_ms.clear();
  append_ts_ms.clear();
  items = 0;
  positions = 0;
  messages = 0;
  partitions.clear();
  unresolved.clear();
}

size_t Ingest::Room() {
  const Batch& b = building();
  if (b.positions >= options_.batch_max_positions) return 0;
  if (rejects_ && rejects_->Full()) return 0;  // see HoldForRejects
  return options_.batch_max_events - std::min(b.messages, options_.batch_max_events);
}

Status Ingest::PollAndDecode(int timeout_ms, int max_wait_ms, size_t* got) {
  if (next_message_ < messages_.size()) {  // left over from a full batch: no Poll
    DecodeMessages();
    return Status::Ok();
  }
  const size_t room = Room();
  if (room == 0) return Status::Ok();
  // Every message the Poll returns is undecoded, also while a revoke served
  // inside it (OnRevoke) looks at messages_.
  messages_.clear();
  next_message_ = 0;
  Status st = source_.Poll(room, timeout_ms, max_wait_ms, &messages_);
  if (got) *got += messages_.size();
  if (!messages_.empty()) DecodeMessages();
  return st;
}

void Ingest::DecodeMessages(bool all) {
  Batch& batch = building();
  const int64_t now_ms = clock_.NowMs();
  // The cluster cache's clock (its misses are retried after 10 s), read once per
  // call rather than per event.
  const int64_t steady_ms = clusters_ ? SteadyNowMs() : 0;
  uint64_t rejected = 0;
  const std::string* last_topic = nullptr;
  int32_t last_partition = -1;
  PendingPartition* part = nullptr;
  for (; next_message_ < messages_.size(); ++next_message_) {
    if (!all && (batch.messages >= options_.batch_max_events ||
                 batch.positions >= options_.batch_max_positions))
      break;
    const Message& m = messages_[next_message_];
    ++batch.messages;
    ++totals_.messages;
    if (m.topic != last_topic || m.partition != last_partition) {
      part = &batch.partitions[TopicPartition{*m.topic, m.partition}];
      last_topic = m.topic;
      last_partition = m.partition;
    }
    if (part->first < 0) part->first = m.offset;
    part->next = std::max(part->next, m.offset + 1);
    RejectReason r = decoder_.Decode(m.payload, m.len, m.timestamp_ms, now_ms, &event_);
    if (r != RejectReason::kNone) {
      ++rejected;
      if (metrics_) metrics_->rejected_by_reason[static_cast<size_t>(r)]->Increment();
      if (rejects_) rejects_->Send(m, r);
      continue;
    }
    const size_t exposed_items = event_.items.size();
    if (clusters_) {
      AddClusterTokens(batch, steady_ms);
      batch.coalescer.Add(event_, hash_scratch_.data());
    } else {
      batch.coalescer.Add(event_);
    }
    batch.positions += (event_.items.size() - exposed_items) * k_;  // the tokens'
    event_.items.resize(exposed_items);
    batch.event_ts_ms.push_back(event_.ts_ms);
    if (m.timestamp_ms > 0) batch.append_ts_ms.push_back(m.timestamp_ms);
    part->newest_event_ms = std::max(part->newest_event_ms, event_.ts_ms);
    if (part->oldest_event_ms == 0 || event_.ts_ms < part->oldest_event_ms)
      part->oldest_event_ms = event_.ts_ms;
    batch.items += event_.items.size();
    batch.positions += event_.items.size() * k_;
  }
  totals_.events_rejected += rejected;
  if (metrics_ && rejected) metrics_->events_rejected->Increment(static_cast<double>(rejected));
}

void Ingest::AddClusterTokens(Batch& batch, int64_t now_ms) {
  const size_t n = event_.items.size();
  if (token_scratch_.size() < n) token_scratch_.resize(n);
  hash_scratch_.resize(n);
  size_t tokens = 0, hits = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string_view item = event_.items[i];
    const Hash128 h = HashItem(item, seed_);
    hash_scratch_[i] = h;
    std::string_view cluster;
    if (!event_.cluster.empty()) {  // single-item events only (the decoder)
      cluster = event_.cluster;
      cluster_cache_->Put(h, item, cluster, now_ms);
    } else {
      const ClusterCache::Hit hit = cluster_cache_->Find(h, now_ms, &cluster);
      hits += hit != ClusterCache::Hit::kNone ? 1 : 0;
      switch (hit) {
        case ClusterCache::Hit::kCluster:
          break;
        case ClusterCache::Hit::kSelf:  // its own cluster: no token
          continue;
        case ClusterCache::Hit::kMiss:
          ++totals_.items_unclustered;
          if (metrics_) metrics_->items_unclustered->Increment();
          continue;
        case ClusterCache::Hit::kNone:
          batch.unresolved.push_back({std::string(event_.user), std::string(item), event_.ts_ms,
                                      event_.has_simhash, event_.simhash});
          continue;
      }
    }
    if (!WritesClusterMark(item, cluster)) continue;
    // CONTENT.md rule 5, revision 2: the cluster's founder ID itself (copied: the
    // cache's arena may move as it fills).
    token_scratch_[tokens++].assign(cluster.data(), cluster.size());
  }
  // Appended after the loop: event_.items' views must not move while it reads them.
  for (size_t t = 0; t < tokens; ++t) {
    event_.items.push_back(token_scratch_[t]);
    hash_scratch_.push_back(HashItem(token_scratch_[t], seed_));
  }
  totals_.cluster_tokens += tokens;
  totals_.cluster_cache_hits += hits;
  if (metrics_) {
    if (tokens) metrics_->cluster_tokens->Increment(static_cast<double>(tokens));
    if (hits) metrics_->cluster_cache_hits->Increment(static_cast<double>(hits));
    // A Find of an item the older generation holds moves it: memory can change.
    metrics_->cluster_cache_bytes->Set(static_cast<double>(cluster_cache_->memory_bytes()));
  }
}

Status Ingest::ResolveClusters(Batch& batch) {
  if (batch.unresolved.empty()) return Status::Ok();
  // Distinct items, each asked once.
  std::unordered_map<std::string_view, size_t> index;
  std::vector<ClusterQuery> queries;
  for (const Batch::Unresolved& u : batch.unresolved) {
    auto [it, added] = index.try_emplace(u.item, queries.size());
    if (added) {
      queries.push_back({u.item, u.has_simhash, u.simhash});
    } else if (u.has_simhash && !queries[it->second].has_simhash) {
      queries[it->second].has_simhash = true;
      queries[it->second].simhash = u.simhash;
    }
  }
  std::vector<std::string> clusters;
  Status st = clusters_->Clusters(queries, &clusters);
  if (!st.ok()) return st.Prefixed("content map (filter.near_duplicates)");
  totals_.cluster_lookups += queries.size();
  if (metrics_) metrics_->cluster_lookups->Increment(static_cast<double>(queries.size()));
  const int64_t now_ms = SteadyNowMs();
  for (size_t i = 0; i < queries.size(); ++i)
    cluster_cache_->Put(HashItem(queries[i].item, seed_), queries[i].item, clusters[i], now_ms);
  if (metrics_)
    metrics_->cluster_cache_bytes->Set(static_cast<double>(cluster_cache_->memory_bytes()));
  Event token_event;
  std::string token;
  uint64_t tokens = 0, unclustered = 0;
  for (const Batch::Unresolved& u : batch.unresolved) {
    const std::string& cluster = clusters[index.at(u.item)];
    if (cluster.empty()) {
      ++unclustered;
      continue;
    }
    if (!WritesClusterMark(u.item, cluster)) continue;
    token = cluster;  // rule 5, revision 2: the founder's ID
    token_event.user = u.user;
    token_event.ts_ms = u.ts_ms;
    token_event.items.assign(1, token);
    batch.coalescer.Add(token_event);
    batch.positions += k_;
    ++tokens;
  }
  batch.unresolved.clear();
  totals_.cluster_tokens += tokens;
  totals_.items_unclustered += unclustered;
  if (metrics_) {
    if (tokens) metrics_->cluster_tokens->Increment(static_cast<double>(tokens));
    if (unclustered) metrics_->items_unclustered->Increment(static_cast<double>(unclustered));
  }
  return Status::Ok();
}

void Ingest::RecordWritten(const Batch& batch, const WriteStats& stats, int64_t write_start_ms) {
  const int64_t ack_ms = clock_.NowMs();
  totals_.events_written += batch.event_ts_ms.size();
  totals_.items_written += batch.items;
  ++totals_.batches;
  // Keys coalesced from now on get the stored layout's rules (docs/FORMAT.md rules 9, 11).
  if (const Layout* stored = sink_.effective_layout()) {
    for (Batch& b : batches_)
      b.coalescer.SetStoredRules(stored->v3, stored->v3_from, stored->v4, stored->v4_from);
  }
  sink_failing_ = false;
  sink_error_.clear();
  if (!metrics_) return;
  for (int64_t ts : batch.event_ts_ms) e2e_.Observe(static_cast<double>(ack_ms - ts) / 1000.0);
  e2e_.FlushTo(*metrics_->e2e_seconds);
  for (int64_t ts : batch.append_ts_ms) delay_.Observe(static_cast<double>(ack_ms - ts) / 1000.0);
  delay_.FlushTo(*metrics_->ingest_delay_seconds);
  metrics_->events_written->Increment(static_cast<double>(batch.event_ts_ms.size()));
  metrics_->items_written->Increment(static_cast<double>(batch.items));
  metrics_->bits_written->Increment(static_cast<double>(stats.bits));
  metrics_->keys_written->Increment(static_cast<double>(stats.keys));
  metrics_->keys_skipped->Increment(static_cast<double>(stats.skipped_keys));
  metrics_->keys_expired->Increment(static_cast<double>(stats.expired_keys));
  metrics_->redis_commands->Increment(static_cast<double>(stats.commands));
  metrics_->expires_skipped->Increment(static_cast<double>(stats.expires_skipped));
  if (stats.keys_read) metrics_->keys_read->Increment(static_cast<double>(stats.keys_read));
  if (stats.items_present)
    metrics_->items_present->Increment(static_cast<double>(stats.items_present));
  metrics_->AddStages(stats.stages);
  metrics_->batches->Increment();
  metrics_->batch_events->Observe(static_cast<double>(batch.event_ts_ms.size()));
  metrics_->write_seconds->Observe(static_cast<double>(ack_ms - write_start_ms) / 1000.0);
  metrics_->redis_up->Set(1);
}

void Ingest::ReportStallIfDue(const Batch& batch) {
  const int64_t now = SteadyNowMs();
  if (options_.stall_warn_ms <= 0 || now < stall_report_at_ms_) return;
  stall_report_at_ms_ = now + options_.stall_warn_ms;
  ++totals_.write_stalls;
  if (metrics_) metrics_->write_stalls->Increment();
  spdlog::error(
      "redis: a write of {} key(s) has had neither a reply nor an error for {:.1f} s; nothing is "
      "committed until it returns (a bug: please report it with this log; a restart loses "
      "nothing, the uncommitted events are read again)",
      batch.coalescer.batch().size, static_cast<double>(now - write_sent_ms_) / 1000.0);
}

void Ingest::SendWrite(const Batch& batch) {
  sink_.Send(batch.coalescer.batch());
  write_sent_ms_ = SteadyNowMs();
  stall_report_at_ms_ = write_sent_ms_ + options_.stall_warn_ms;
}

void Ingest::WaitForWrite(const Batch& batch) {
  for (;;) {
    // Wake for whichever is due first: the tick, the commit heartbeat, the
    // stall report.
    const int64_t now = SteadyNowMs();
    int64_t wait =
        std::min(last_tick_ms_ + tick_interval_ms_, last_commit_ms_ + options_.commit_interval_ms) -
        now;
    if (options_.stall_warn_ms > 0) wait = std::min(wait, stall_report_at_ms_ - now);
    if (sink_.WaitReady(std::clamp<int64_t>(wait, 1, kMaxWriteWaitSliceMs))) return;
    ReportStallIfDue(batch);
    CommitIfDue();  // the heartbeat commit (earlier batches' offsets) and the tick
  }
}

Status Ingest::AwaitWrite(Batch& batch, const std::atomic<bool>& stop) {
  const int64_t start_ms = clock_.NowMs();
  WaitForWrite(batch);
  WriteStats stats;
  Status st = sink_.Await(&stats);
  if (st.ok()) {
    RecordWritten(batch, stats, start_ms);
    return st;
  }
  return RetryWrite(batch, std::move(st), stop);
}

Status Ingest::RetryWrite(Batch& batch, Status st, const std::atomic<bool>& stop) {
  int64_t backoff = options_.backoff_min_ms;
  const int64_t failing_since = SteadyNowMs();
  int64_t stop_seen_at = 0;
  uint64_t attempts = 0;
  bool paused = false;
  std::string logged_error = sink_error_;  // the error the log shows now
  int64_t logged_change_ms = -1;           // when a changed error was last logged
  for (;;) {
    ++attempts;
    ++totals_.write_failures;
    if (metrics_) {
      metrics_->redis_up->Set(0);
      metrics_->write_retries->Increment();
    }
    if (st.code() != StatusCode::kUnavailable && st.code() != StatusCode::kInternal) {
      // kFailedPrecondition (the stored layout changed), kPermissionDenied
      // (credentials or ACL), kCancelled: retrying cannot help.
      return st;
    }
    sink_error_ = st.message();
    if (!sink_failing_) {
      spdlog::error(
          "{}; pausing consumption, retrying every {}..{} ms, nothing is committed "
          "until the batch is written",
          st.message(), options_.backoff_min_ms, options_.backoff_max_ms);
      sink_failing_ = true;
      logged_error = st.message();
    } else if (st.message() != logged_error &&
               (logged_change_ms < 0 ||
                SteadyNowMs() - logged_change_ms >= kErrorChangeLogIntervalMs)) {
      // The failure changed (a master died, then WAIT finds no replica): say so,
      // at most every kErrorChangeLogIntervalMs when it keeps changing.
      spdlog::warn("redis writes still failing after {:.1f} s and {} retries, now: {}",
                   static_cast<double>(SteadyNowMs() - failing_since) / 1000.0, attempts - 1,
                   st.message());
      logged_error = st.message();
      logged_change_ms = SteadyNowMs();
    }
    if (!paused) {
      Status ps = source_.PauseAll();
      if (!ps.ok()) spdlog::warn("{}", ps.message());
      paused = true;
    }
    if (stop.load() && !stop_seen_at) stop_seen_at = SteadyNowMs();
    if (stop_seen_at && SteadyNowMs() - stop_seen_at >= options_.shutdown_grace_ms) {
      return Cancelled("stopping while Redis writes fail (" + st.message() + "): " +
                       std::to_string(batch.event_ts_ms.size() + building().event_ts_ms.size()) +
                       " event(s) not written; their offsets are not committed, so they will be "
                       "consumed again");
    }
    // Wait out the backoff while serving the consumer (heartbeats, rebalances).
    // Anything that still arrives joins the next batch.
    // (Paused: only what librdkafka had fetched before still arrives; it is all
    // decoded, over the batch limits if need be, because Poll releases it.)
    const int64_t until = SteadyNowMs() + backoff;
    while (SteadyNowMs() < until) {
      int wait =
          static_cast<int>(std::min<int64_t>(until - SteadyNowMs(), options_.poll_timeout_ms));
      DecodeMessages(/*all=*/true);
      messages_.clear();
      next_message_ = 0;
      Status ps = source_.Poll(options_.batch_max_events, std::max(wait, 0), 0, &messages_);
      if (!ps.ok() && ps.code() != StatusCode::kUnavailable) return ps;
      DecodeMessages(/*all=*/true);
      if (SteadyNowMs() - last_commit_ms_ >= options_.commit_interval_ms) {
        // Earlier batches' offsets again: the heartbeat shows "alive, stuck".
        CommitAcked(false).IgnoreError();
      }
      MaybeTick();
      if (stop.load() && !stop_seen_at) break;
    }
    backoff = std::min(backoff * 2, options_.backoff_max_ms);

    const int64_t start_ms = clock_.NowMs();
    WriteStats stats;
    st = ResolveClusters(batch);
    if (st.ok()) {
      batch.coalescer.Seal();  // again: resolved tokens may have joined
      // Sent and awaited like a first write, so that the tick goes on while
      // Redis holds the write (e.g. CLIENT PAUSE: up to redis.command_timeout).
      SendWrite(batch);
      WaitForWrite(batch);
      st = sink_.Await(&stats);
    }
    if (st.ok()) {
      spdlog::info("redis: writes succeed again after {:.1f} s and {} retries; resuming",
                   static_cast<double>(SteadyNowMs() - failing_since) / 1000.0, attempts);
      RecordWritten(batch, stats, start_ms);
      if (paused) {
        Status rs = source_.ResumeAll();
        if (!rs.ok()) spdlog::warn("{}", rs.message());
      }
      return st;
    }
  }
}

void Ingest::Ack(Batch& batch) {
  const std::vector<TopicPartition> assigned = source_.Assignment();
  for (const auto& [tp, p] : batch.partitions) {
    // A message of a partition revoked meanwhile: its bits were written
    // (harmless), its offset is not ours to commit.
    if (std::find(assigned.begin(), assigned.end(), tp) == assigned.end()) continue;
    int64_t& a = acked_[tp];
    a = std::max(a, p.next);
    int64_t& e = acked_event_ms_[tp];
    e = std::max(e, p.newest_event_ms);
  }
  batch.Clear();
}

void Ingest::CommitIfDue() {
  if (SteadyNowMs() - last_commit_ms_ >= options_.commit_interval_ms) {
    Status cs = CommitAcked(false);
    if (!cs.ok() && cs.code() != StatusCode::kCancelled) spdlog::warn("{}", cs.message());
  }
  MaybeTick();
}

Status Ingest::Step(const std::atomic<bool>& stop, size_t* got) {
  if (!failed_.ok()) return failed_;
  bool held = false;
  if (Status hs = HoldForRejects(got, &held); !hs.ok() || held) {
    if (!hs.ok()) failed_ = hs;
    return hs;
  }
  // A batch decoded during the previous write is due now: only take what is
  // already fetched on top of it, without waiting.
  const bool due = !building().empty();
  if (got) *got = 0;
  Status st =
      PollAndDecode(due ? 0 : options_.poll_timeout_ms, due ? 0 : options_.batch_max_wait_ms, got);
  if (!st.ok() && st.code() != StatusCode::kUnavailable) {
    failed_ = st;
    return st;
  }
  if (building().empty()) {
    CommitIfDue();
    return Status::Ok();
  }
  st = WriteBuilding(stop, !stop.load(), got);
  if (!st.ok()) failed_ = st;
  return st;
}

Status Ingest::HoldForRejects(size_t* got, bool* held) {
  *held = false;
  if (!rejects_) return Status::Ok();
  if (!rejects_->Full()) {
    if (rejects_paused_) {
      rejects_paused_ = false;
      if (metrics_) metrics_->dead_letter_full->Set(0);
      spdlog::info("dead letter: copies delivered after {:.1f} s; resuming consumption",
                   static_cast<double>(SteadyNowMs() - rejects_full_since_) / 1000.0);
      Status rs = source_.ResumeAll();
      if (!rs.ok()) spdlog::warn("{}", rs.message());
    }
    return Status::Ok();
  }
  // What was taken is written first (Room() took nothing more meanwhile).
  if (!rejects_paused_ && (!building().empty() || next_message_ < messages_.size()))
    return Status::Ok();
  if (!rejects_paused_) {
    rejects_paused_ = true;
    rejects_full_since_ = SteadyNowMs();
    if (metrics_) metrics_->dead_letter_full->Set(1);
    spdlog::error(
        "dead letter: the copies not delivered yet fill kafka.dead_letter_max_pending_bytes; "
        "pausing consumption until they are delivered (nothing is dropped; their offsets are "
        "not committed)");
    Status ps = source_.PauseAll();
    if (!ps.ok()) spdlog::warn("{}", ps.message());
  }
  *held = true;
  if (got) *got = 0;
  // Serve the consumer (heartbeats, rebalances). What it still returns is decoded,
  // over the batch limits if need be, because Poll releases it.
  DecodeMessages(/*all=*/true);
  messages_.clear();
  next_message_ = 0;
  Status ps = source_.Poll(options_.batch_max_events, options_.poll_timeout_ms, 0, &messages_);
  if (got) *got += messages_.size();
  DecodeMessages(/*all=*/true);
  if (!ps.ok() && ps.code() != StatusCode::kUnavailable) return ps;
  rejects_->Flush(0).IgnoreError();  // delivery reports and retries
  CommitIfDue();
  return Status::Ok();
}

Status Ingest::Flush(const std::atomic<bool>& stop) {
  if (!failed_.ok()) return failed_;
  while (!building().empty() || next_message_ < messages_.size()) {
    if (building().empty()) DecodeMessages();
    Status st = WriteBuilding(stop, false, nullptr);
    if (!st.ok()) {
      failed_ = st;
      return st;
    }
  }
  return Status::Ok();
}

Status Ingest::WriteBuilding(const std::atomic<bool>& stop, bool overlap, size_t* got) {
  Batch& batch = building();
  building_ ^= 1;
  // A batch of bad events only has nothing to write: it must not wait for Redis.
  Status fetch;
  if (Status rs = ResolveClusters(batch); !rs.ok()) {
    // Not sent: retried (with the lookup) like a failed write.
    EF_RETURN_IF_ERROR(RetryWrite(batch, std::move(rs), stop));
    Ack(batch);
    CommitIfDue();
    return Status::Ok();
  }
  if (!batch.coalescer.empty()) {
    batch.coalescer.Seal();
    SendWrite(batch);
    // While Redis works: decode what the consumer has fetched, and what arrives
    // until the write is done, into the next batch (up to a full batch), which
    // the next Step writes.
    while (overlap) {
      if (Room() == 0) break;
      const bool ready = sink_.Ready();
      fetch = PollAndDecode(ready ? 0 : kOverlapPollMs, 0, got);
      if (!fetch.ok()) break;
      if (ready || stop.load()) break;
      ReportStallIfDue(batch);
    }
    EF_RETURN_IF_ERROR(AwaitWrite(batch, stop));
  }
  Ack(batch);
  if (!fetch.ok() && fetch.code() != StatusCode::kUnavailable) return fetch;
  CommitIfDue();
  return Status::Ok();
}

void Ingest::MaybeTick() {
  if (!tick_) return;
  const int64_t now = SteadyNowMs();
  if (now - last_tick_ms_ < tick_interval_ms_) return;
  last_tick_ms_ = now;
  tick_();
}

bool Ingest::Pending(const TopicPartition& tp) const {
  for (const Batch& b : batches_) {
    if (b.partitions.count(tp)) return true;
  }
  for (size_t i = next_message_; i < messages_.size(); ++i) {
    if (messages_[i].partition == tp.partition && *messages_[i].topic == tp.topic) return true;
  }
  return false;
}

int64_t Ingest::CommitOffset(const TopicPartition& tp, int64_t acked, bool step_over_gaps) {
  const int64_t limit = rejects_ ? rejects_->CommitLimit(tp) : INT64_MAX;
  if (limit < acked) return limit;  // a dead-letter copy is not delivered yet
  if (step_over_gaps && limit == INT64_MAX && !Pending(tp)) {
    // Everything Poll returned is acknowledged: step over what the log skips.
    return std::max(acked, source_.Position(tp));
  }
  return acked;
}

std::vector<PartitionSnapshot> Ingest::Snapshot() {
  std::vector<PartitionSnapshot> out;
  for (const auto& tp : source_.Assignment()) {
    PartitionSnapshot s;
    s.tp = tp;
    auto a = acked_.find(tp);
    if (a != acked_.end()) s.committed = a->second;
    if (s.committed >= 0) s.committed = CommitOffset(tp, s.committed);
    s.position = s.committed;
    int64_t first_pending = -1;
    for (const Batch& b : batches_) {
      auto p = b.partitions.find(tp);
      if (p == b.partitions.end()) continue;
      s.position = std::max(s.position, p->second.next);
      if (first_pending < 0 || p->second.first < first_pending) first_pending = p->second.first;
      const int64_t oldest = p->second.oldest_event_ms;
      if (oldest > 0 && (s.oldest_pending_ms == 0 || oldest < s.oldest_pending_ms))
        s.oldest_pending_ms = oldest;
    }
    // Nothing in flight: the consumer's position also covers partitions idle
    // since they were assigned, and what the log skips.
    if (!Pending(tp)) s.position = std::max(s.position, source_.Position(tp));
    // Nothing acknowledged yet: what is not written starts at the first offset
    // in hand, else (nothing in hand) at the consumer's position.
    s.unwritten_from = s.committed >= 0     ? s.committed
                       : first_pending >= 0 ? first_pending
                                            : s.position;
    auto e = acked_event_ms_.find(tp);
    if (e != acked_event_ms_.end()) s.newest_event_ms = e->second;
    s.high = source_.HighWatermark(tp);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PartitionOffset> Ingest::AckedOffsets(bool step_over_gaps) {
  const int64_t now_ms = clock_.NowMs();
  std::vector<PartitionOffset> offsets;
  const std::vector<TopicPartition> assigned = source_.Assignment();
  offsets.reserve(assigned.size());
  for (const TopicPartition& tp : assigned) {
    auto a = acked_.find(tp);
    if (a == acked_.end()) continue;
    const int64_t next = CommitOffset(tp, a->second, step_over_gaps);
    auto e = acked_event_ms_.find(tp);
    offsets.push_back(
        {tp, next, EncodeCommitMetadata({now_ms, e == acked_event_ms_.end() ? 0 : e->second})});
  }
  return offsets;
}

Status Ingest::CommitAcked(bool sync) {
  last_commit_ms_ = SteadyNowMs();
  if (rejects_) {
    // Delivery reports move CommitLimit; a final commit waits a little for them.
    rejects_->Flush(sync ? kFinalRejectFlushMs : 0).IgnoreError();
  }
  // Everything acknowledged, every time: unchanged offsets too (the heartbeat),
  // and an earlier async commit that failed after it was queued is repaired.
  // Only assigned partitions: a commit of another member's partition makes the
  // broker fence this member and restart the group's rebalance.
  std::vector<PartitionOffset> offsets = AckedOffsets();
  if (offsets.empty()) return Status::Ok();
  Status st = source_.Commit(offsets, sync);
  if (st.code() == StatusCode::kCancelled) return st;  // held back, not sent (source.h)
  if (!st.ok()) {
    if (metrics_) metrics_->commits_failed->Increment();
    return st;
  }
  ++totals_.commits;
  if (metrics_) metrics_->commits_ok->Increment();
  return Status::Ok();
}

void Ingest::OnRevoke(const std::vector<TopicPartition>& partitions, bool lost) {
  // Another daemon may write these partitions' users next, and later give them
  // back: what the sink remembers about their keys (layout v2 stage states) must
  // be read again then. (A partition newly assigned was revoked from us before, or
  // never ours: nothing of it is remembered.)
  sink_.ForgetKeyStates();
  auto revoked = [&](const TopicPartition& tp) {
    return std::find(partitions.begin(), partitions.end(), tp) != partitions.end();
  };
  if (!lost) {
    if (rejects_) rejects_->Flush(kRevokeRejectFlushMs).IgnoreError();
    // What was written, not the consumer's position: the revoke has dropped the
    // messages of these partitions gathered by the Poll under way (consumer.cc),
    // and the position is already past them. (robustness test "retriable errors
    // on Fetch, ..." lost 3-7 messages this way when a Heartbeat error made the
    // member rejoin.)
    CommitRevoked(source_, AckedOffsets(/*step_over_gaps=*/false), partitions, "",
                  {&totals_.commits, metrics_ ? metrics_->commits_ok : nullptr,
                   metrics_ ? metrics_->commits_failed : nullptr});
  }
  // Pending batches, if any, are still written (harmless: idempotent bits) but
  // their offsets for these partitions are no longer ours to commit; messages
  // not decoded yet are dropped (the new owner reads them again).
  for (const auto& tp : partitions) {
    acked_.erase(tp);
    acked_event_ms_.erase(tp);
    for (Batch& b : batches_) b.partitions.erase(tp);
  }
  if (next_message_ < messages_.size()) {
    auto first = messages_.begin() + static_cast<std::ptrdiff_t>(next_message_);
    messages_.erase(std::remove_if(first, messages_.end(),
                                   [&](const Message& m) {
                                     return revoked(TopicPartition{*m.topic, m.partition});
                                   }),
                    messages_.end());
  }
  if (rejects_) rejects_->Forget(partitions);
}

Status Ingest::Run(const std::atomic<bool>& stop) {
  Status st;
  while (!stop.load() && st.ok()) st = Step(stop);
  if (st.ok()) st = Flush(stop);
  if (!st.ok()) {
    // Fatal or cancelled: commit what Redis already acknowledged before giving up.
    CommitAcked(true).IgnoreError();
    return st;
  }
  st = CommitAcked(true);
  if (st.code() == StatusCode::kFailedPrecondition) {
    // Refused because the group is rebalancing (another member left or joined
    // as this one stops): nothing is lost, the next owner re-reads.
    spdlog::warn("final commit: {}", st.message());
    return Status::Ok();
  }
  if (!st.ok()) return st.Prefixed("final commit");
  return Status::Ok();
}

}  // namespace ef
