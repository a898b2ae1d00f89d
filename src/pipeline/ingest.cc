#include "pipeline/ingest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "kafka/commit_metadata.h"

namespace ef {
namespace {

// While a batch is written, the next one is polled in waits this short, so its
// messages are decoded as they arrive and the write's end is noticed at once.
constexpr int kOverlapPollMs = 2;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
      e2e_(IngestMetrics::LatencyBuckets()) {
  source_.SetRevokeHandler([this](const std::vector<TopicPartition>& tps) { OnRevoke(tps); });
  last_commit_ms_ = SteadyMs();
}

void Ingest::Batch::Clear() {
  coalescer.Clear();
  event_ts_ms.clear();
  items = 0;
  messages = 0;
  partitions.clear();
}

void Ingest::DecodeMessages(const std::vector<Message>& messages) {
  Batch& batch = building();
  const int64_t now_ms = clock_.NowMs();
  uint64_t rejected = 0;
  const std::string* last_topic = nullptr;
  int32_t last_partition = -1;
  PendingPartition* part = nullptr;
  batch.messages += messages.size();
  for (const Message& m : messages) {
    ++totals_.messages;
    if (m.topic != last_topic || m.partition != last_partition) {
      part = &batch.partitions[TopicPartition{*m.topic, m.partition}];
      last_topic = m.topic;
      last_partition = m.partition;
    }
    part->next = std::max(part->next, m.offset + 1);
    RejectReason r = decoder_.Decode(m.payload, m.len, m.timestamp_ms, now_ms, &event_);
    if (r != RejectReason::kNone) {
      ++rejected;
      if (metrics_) metrics_->rejected_by_reason[static_cast<size_t>(r)]->Increment();
      if (rejects_) rejects_->Send(m, r);
      continue;
    }
    batch.coalescer.Add(event_);
    batch.event_ts_ms.push_back(event_.ts_ms);
    part->newest_event_ms = std::max(part->newest_event_ms, event_.ts_ms);
    batch.items += event_.items.size();
  }
  totals_.events_rejected += rejected;
  if (metrics_ && rejected) metrics_->events_rejected->Increment(static_cast<double>(rejected));
}

void Ingest::RecordWritten(const Batch& batch, const WriteStats& stats, int64_t write_start_ms) {
  const int64_t ack_ms = clock_.NowMs();
  totals_.events_written += batch.event_ts_ms.size();
  totals_.items_written += batch.items;
  ++totals_.batches;
  sink_failing_ = false;
  if (!metrics_) return;
  for (int64_t ts : batch.event_ts_ms) e2e_.Observe(static_cast<double>(ack_ms - ts) / 1000.0);
  e2e_.FlushTo(*metrics_->e2e_seconds);
  metrics_->events_written->Increment(static_cast<double>(batch.event_ts_ms.size()));
  metrics_->items_written->Increment(static_cast<double>(batch.items));
  metrics_->bits_written->Increment(static_cast<double>(stats.bits));
  metrics_->keys_written->Increment(static_cast<double>(stats.keys));
  metrics_->keys_skipped->Increment(static_cast<double>(stats.skipped_keys));
  metrics_->redis_commands->Increment(static_cast<double>(stats.commands));
  metrics_->expires_skipped->Increment(static_cast<double>(stats.expires_skipped));
  metrics_->batches->Increment();
  metrics_->batch_events->Observe(static_cast<double>(batch.event_ts_ms.size()));
  metrics_->write_seconds->Observe(static_cast<double>(ack_ms - write_start_ms) / 1000.0);
  metrics_->redis_up->Set(1);
}

Status Ingest::AwaitWrite(Batch& batch, const std::atomic<bool>& stop) {
  const int64_t start_ms = clock_.NowMs();
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
  const int64_t failing_since = SteadyMs();
  int64_t stop_seen_at = 0;
  uint64_t attempts = 0;
  bool paused = false;
  for (;;) {
    ++attempts;
    ++totals_.write_failures;
    if (metrics_) {
      metrics_->redis_up->Set(0);
      metrics_->write_retries->Increment();
    }
    if (st.code() != StatusCode::kUnavailable && st.code() != StatusCode::kFailedPrecondition &&
        st.code() != StatusCode::kInternal) {
      return st;
    }
    if (!sink_failing_) {
      spdlog::error(
          "{}; pausing consumption, retrying every {}..{} ms, nothing is committed "
          "until the batch is written",
          st.message(), options_.backoff_min_ms, options_.backoff_max_ms);
      sink_failing_ = true;
    }
    if (!paused) {
      Status ps = source_.PauseAll();
      if (!ps.ok()) spdlog::warn("{}", ps.message());
      paused = true;
    }
    if (stop.load() && !stop_seen_at) stop_seen_at = SteadyMs();
    if (stop_seen_at && SteadyMs() - stop_seen_at >= options_.shutdown_grace_ms) {
      return Cancelled("stopping while Redis writes fail (" + st.message() + "): " +
                       std::to_string(batch.event_ts_ms.size() + building().event_ts_ms.size()) +
                       " event(s) not written; their offsets are not committed, so they will be "
                       "consumed again");
    }
    // Wait out the backoff while serving the consumer (heartbeats, rebalances).
    // Anything that still arrives joins the next batch.
    const int64_t until = SteadyMs() + backoff;
    while (SteadyMs() < until) {
      int wait = static_cast<int>(std::min<int64_t>(until - SteadyMs(), options_.poll_timeout_ms));
      Status ps = source_.Poll(options_.batch_max_events, std::max(wait, 0), 0, &messages_);
      if (!ps.ok() && ps.code() != StatusCode::kUnavailable) return ps;
      if (!messages_.empty()) DecodeMessages(messages_);
      if (SteadyMs() - last_commit_ms_ >= options_.commit_interval_ms) {
        // Earlier batches' offsets again: the heartbeat shows "alive, stuck".
        CommitAcked(false).IgnoreError();
      }
      MaybeTick();
      if (stop.load() && !stop_seen_at) break;
    }
    backoff = std::min(backoff * 2, options_.backoff_max_ms);

    const int64_t start_ms = clock_.NowMs();
    WriteStats stats;
    st = sink_.Write(batch.coalescer.batch(), &stats);
    if (st.ok()) {
      spdlog::info("redis: writes succeed again after {:.1f} s and {} retries; resuming",
                   static_cast<double>(SteadyMs() - failing_since) / 1000.0, attempts);
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
  for (const auto& [tp, p] : batch.partitions) {
    int64_t& a = acked_[tp];
    a = std::max(a, p.next);
    int64_t& e = acked_event_ms_[tp];
    e = std::max(e, p.newest_event_ms);
  }
  batch.Clear();
}

void Ingest::CommitIfDue() {
  if (SteadyMs() - last_commit_ms_ >= options_.commit_interval_ms) {
    Status cs = CommitAcked(false);
    if (!cs.ok()) spdlog::warn("{}", cs.message());
  }
  MaybeTick();
}

Status Ingest::Step(const std::atomic<bool>& stop, size_t* got) {
  if (!failed_.ok()) return failed_;
  // A batch decoded during the previous write is due now: only take what is
  // already fetched on top of it, without waiting.
  const bool due = !building().empty();
  const size_t room =
      options_.batch_max_events - std::min(building().messages, options_.batch_max_events);
  if (got) *got = 0;
  if (room > 0) {
    Status st = source_.Poll(room, due ? 0 : options_.poll_timeout_ms,
                             due ? 0 : options_.batch_max_wait_ms, &messages_);
    if (got) *got = messages_.size();
    if (!st.ok() && st.code() != StatusCode::kUnavailable) return st;
    if (!messages_.empty()) DecodeMessages(messages_);
  }
  if (building().empty()) {
    CommitIfDue();
    return Status::Ok();
  }
  Status st = WriteBuilding(stop, !stop.load(), got);
  if (!st.ok()) failed_ = st;
  return st;
}

Status Ingest::Flush(const std::atomic<bool>& stop) {
  if (!failed_.ok()) return failed_;
  while (!building().empty()) {
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
  if (!batch.coalescer.empty()) {
    batch.coalescer.Seal();
    sink_.Send(batch.coalescer.batch());
    // While Redis works: decode what the consumer has fetched, and what arrives
    // until the write is done, into the next batch (up to a full batch), which
    // the next Step writes.
    while (overlap) {
      const size_t room =
          options_.batch_max_events - std::min(building().messages, options_.batch_max_events);
      if (room == 0) break;
      const bool ready = sink_.Ready();
      fetch = source_.Poll(room, ready ? 0 : kOverlapPollMs, 0, &messages_);
      if (got) *got += messages_.size();
      if (!fetch.ok()) break;
      if (!messages_.empty()) DecodeMessages(messages_);
      if (ready || stop.load()) break;
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
  const int64_t now = SteadyMs();
  if (now - last_tick_ms_ < tick_interval_ms_) return;
  last_tick_ms_ = now;
  tick_();
}

std::vector<PartitionSnapshot> Ingest::Snapshot() {
  std::vector<PartitionSnapshot> out;
  for (const auto& tp : source_.Assignment()) {
    PartitionSnapshot s;
    s.tp = tp;
    auto a = acked_.find(tp);
    if (a != acked_.end()) s.committed = a->second;
    s.position = s.committed;
    for (const Batch& b : batches_) {
      auto p = b.partitions.find(tp);
      if (p != b.partitions.end()) s.position = std::max(s.position, p->second.next);
    }
    auto e = acked_event_ms_.find(tp);
    if (e != acked_event_ms_.end()) s.newest_event_ms = e->second;
    s.high = source_.HighWatermark(tp);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PartitionOffset> Ingest::AckedOffsets() {
  const int64_t now_ms = clock_.NowMs();
  std::vector<PartitionOffset> offsets;
  offsets.reserve(acked_.size());
  for (const auto& [tp, next] : acked_) {
    auto e = acked_event_ms_.find(tp);
    offsets.push_back(
        {tp, next, EncodeCommitMetadata({now_ms, e == acked_event_ms_.end() ? 0 : e->second})});
  }
  return offsets;
}

Status Ingest::CommitAcked(bool sync) {
  last_commit_ms_ = SteadyMs();
  // Everything acknowledged, every time: unchanged offsets too (the heartbeat),
  // and an earlier async commit that failed after it was queued is repaired.
  std::vector<PartitionOffset> offsets = AckedOffsets();
  if (offsets.empty()) return Status::Ok();
  if (rejects_) {
    Status fs = rejects_->Flush();
    if (!fs.ok()) return fs.Prefixed("dead-letter flush before commit");
  }
  Status st = source_.Commit(offsets, sync);
  if (!st.ok()) {
    if (metrics_) metrics_->commits_failed->Increment();
    return st;
  }
  ++totals_.commits;
  if (metrics_) metrics_->commits_ok->Increment();
  return Status::Ok();
}

void Ingest::OnRevoke(const std::vector<TopicPartition>& partitions) {
  std::vector<PartitionOffset> offsets;
  for (auto& po : AckedOffsets()) {
    if (std::find(partitions.begin(), partitions.end(), po.tp) != partitions.end())
      offsets.push_back(std::move(po));
  }
  if (!offsets.empty()) {
    if (rejects_) rejects_->Flush().IgnoreError();
    Status st = source_.Commit(offsets, true);
    if (st.ok()) {
      ++totals_.commits;
      if (metrics_) metrics_->commits_ok->Increment();
    } else {
      spdlog::warn("commit on revoke: {} (the new owner re-reads from the last commit)",
                   st.message());
      if (metrics_) metrics_->commits_failed->Increment();
    }
  }
  // Pending batches, if any, are still written (harmless: idempotent bits) but
  // their offsets for these partitions are no longer ours to commit.
  for (const auto& tp : partitions) {
    acked_.erase(tp);
    acked_event_ms_.erase(tp);
    for (Batch& b : batches_) b.partitions.erase(tp);
  }
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
  if (!st.ok()) return st.Prefixed("final commit");
  return Status::Ok();
}

}  // namespace ef
