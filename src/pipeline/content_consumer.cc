#include "pipeline/content_consumer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "pipeline/revoke_commit.h"

namespace ef {
namespace {

// A progress line at most this often (and one at the end).
constexpr int64_t kProgressLogIntervalMs = 10000;
// Rejects are logged one by one up to this many per reason; later ones are only
// counted (progress lines, the metric).
constexpr uint64_t kLoggedRejectsPerReason = 10;

}  // namespace

ContentConsumer::ContentConsumer(MessageSource& source, ItemDecoder& decoder, AssignFn assign,
                                 ContentMetrics* metrics, ContentConsumerOptions options)
    : source_(source),
      decoder_(decoder),
      assign_(std::move(assign)),
      metrics_(metrics),
      options_(std::move(options)) {
  static_assert(contentdb::kMaxContentItemBytes == 1024,
                "event/item_decoder.cc's kMaxItemIdBytes must equal kMaxContentItemBytes");
  source_.SetRevokeHandler(
      [this](const std::vector<TopicPartition>& tps, bool lost) { OnRevoke(tps, lost); });
  last_commit_ms_ = last_progress_ms_ = SteadyNowMs();
}

void ContentConsumer::Take(const std::vector<Message>& messages) {
  for (const Message& m : messages) {
    ++totals_.messages;
    const TopicPartition tp{*m.topic, m.partition};
    int64_t& next = batch_.next[tp];
    next = std::max(next, m.offset + 1);
    DecodedItem item;
    const ItemRejectReason r = decoder_.Decode(m.payload, m.len, &item);
    if (r == ItemRejectReason::kNone) {
      batch_.items.push_back({std::string(item.item_id), item.simhash});
      continue;
    }
    ++totals_.rejected;
    const char* name = ItemRejectReasonName(r);
    const uint64_t n = ++totals_.rejected_by_reason[name];
    if (metrics_) metrics_->rejected_by_reason[static_cast<size_t>(r)]->Increment();
    if (n <= kLoggedRejectsPerReason) {
      spdlog::warn(
          "content: {}/{} offset {}: item rejected: {}{}{}", tp.topic, tp.partition, m.offset, name,
          r == ItemRejectReason::kBadUtf8
              ? " at byte " + std::to_string(item.bad_utf8_offset) + " of the payload"
              : std::string(),
          n == kLoggedRejectsPerReason ? " (further ones of this reason are only counted)" : "");
    }
  }
}

namespace {

// Of a batch's assignments: how many made a new cluster, joined one, or were known.
struct AssignCounts {
  uint64_t fresh = 0, joined = 0, known = 0;
};

AssignCounts CountAssignments(const std::vector<contentdb::Assignment>& assignments) {
  AssignCounts c;
  for (const auto& a : assignments) {
    if (a.known) {
      ++c.known;
    } else if (!a.nearest.empty()) {
      ++c.joined;
    }
  }
  c.fresh = assignments.size() - c.joined - c.known;
  return c;
}

// Errors that retrying cannot mend.
bool RetryCannotMend(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kPermissionDenied ||
         st.code() == StatusCode::kFailedPrecondition;
}

}  // namespace

Status ContentConsumer::AssignBatch(const std::atomic<bool>& stop) {
  if (batch_.empty()) return Status::Ok();
  AssignRetry retry;
  retry.backoff_ms = options_.backoff_min_ms;
  for (;;) {
    StatusOr<std::vector<contentdb::Assignment>> r = std::vector<contentdb::Assignment>{};
    if (!batch_.items.empty()) r = assign_(batch_.items);
    ++retry.attempts;
    if (r.ok()) {
      Assigned(*r, retry);
      return Status::Ok();
    }
    if (RetryCannotMend(r.status())) return r.status();
    EF_RETURN_IF_ERROR(AssignFailed(r.status(), stop, &retry));
    EF_RETURN_IF_ERROR(WaitOutBackoff(stop, &retry));
    retry.backoff_ms = std::min(retry.backoff_ms * 2, options_.backoff_max_ms);
  }
}

void ContentConsumer::Assigned(const std::vector<contentdb::Assignment>& assignments,
                               const AssignRetry& retry) {
  const AssignCounts c = CountAssignments(assignments);
  totals_.items_new += c.fresh;
  totals_.items_joined += c.joined;
  totals_.items_known += c.known;
  if (metrics_) {
    metrics_->items_new->Increment(static_cast<double>(c.fresh));
    metrics_->items_joined->Increment(static_cast<double>(c.joined));
    metrics_->items_known->Increment(static_cast<double>(c.known));
    metrics_->redis_up->Set(1);
  }
  if (!batch_.items.empty()) ++totals_.batches;
  if (options_.failing_since_ms) options_.failing_since_ms->store(0, std::memory_order_relaxed);
  if (retry.failing_since) {
    spdlog::info("content: assignments succeed again after {:.1f} s and {} retries; resuming",
                 static_cast<double>(SteadyNowMs() - retry.failing_since) / 1000.0,
                 retry.attempts - 1);
  }
  if (retry.paused) {
    if (Status rs = source_.ResumeAll(); !rs.ok()) spdlog::warn("{}", rs.message());
  }
  MarkDone();
}

Status ContentConsumer::AssignFailed(const Status& st, const std::atomic<bool>& stop,
                                     AssignRetry* retry) {
  ++totals_.assign_failures;
  if (metrics_) {
    metrics_->assign_retries->Increment();
    metrics_->redis_up->Set(0);
  }
  if (retry->failing_since) {
    spdlog::debug("content: retry {} failed: {}", retry->attempts - 1, st.message());
  } else {
    retry->failing_since = SteadyNowMs();
    if (options_.failing_since_ms)
      options_.failing_since_ms->store(retry->failing_since, std::memory_order_relaxed);
    spdlog::error(
        "content: {}; pausing consumption, retrying every {}..{} ms, nothing is committed "
        "past what was assigned",
        st.message(), options_.backoff_min_ms, options_.backoff_max_ms);
  }
  if (!retry->paused) {
    if (Status ps = source_.PauseAll(); !ps.ok()) spdlog::warn("{}", ps.message());
    retry->paused = true;
  }
  if (stop.load() && !retry->stop_seen_at) retry->stop_seen_at = SteadyNowMs();
  if (retry->stop_seen_at && SteadyNowMs() - retry->stop_seen_at >= options_.shutdown_grace_ms) {
    return Cancelled("stopping while Redis fails (" + st.message() +
                     "): " + std::to_string(batch_.items.size()) +
                     " item(s) not assigned; their offsets are not committed, so they will be "
                     "consumed again");
  }
  return Status::Ok();
}

Status ContentConsumer::WaitOutBackoff(const std::atomic<bool>& stop, AssignRetry* retry) {
  const int64_t until = SteadyNowMs() + retry->backoff_ms;
  while (SteadyNowMs() < until) {
    const int wait = static_cast<int>(
        std::max<int64_t>(0, std::min<int64_t>(until - SteadyNowMs(), options_.poll_timeout_ms)));
    messages_.clear();
    Status ps = source_.Poll(options_.batch_max_items, wait, 0, &messages_);
    if (!ps.ok() && ps.code() != StatusCode::kUnavailable) return ps;
    Take(messages_);
    CommitIfDue();  // earlier batches' offsets again: "alive, stuck"
    if (stop.load() && !retry->stop_seen_at) break;
  }
  return Status::Ok();
}

void ContentConsumer::MarkDone() {
  const std::vector<TopicPartition> assigned = source_.Assignment();
  for (const auto& [tp, next] : batch_.next) {
    // A partition revoked meanwhile: its items were assigned (harmless,
    // idempotent), its offsets are not ours to commit.
    if (std::find(assigned.begin(), assigned.end(), tp) == assigned.end()) continue;
    int64_t& d = done_[tp];
    d = std::max(d, next);
  }
  batch_.items.clear();
  batch_.next.clear();
}

std::vector<PartitionOffset> ContentConsumer::CommitOffsets(bool step_over_gaps) {
  std::vector<PartitionOffset> out;
  for (const TopicPartition& tp : source_.Assignment()) {
    auto d = done_.find(tp);
    if (d == done_.end()) continue;
    int64_t offset = d->second;
    if (step_over_gaps && !batch_.next.count(tp)) offset = std::max(offset, source_.Position(tp));
    out.push_back({tp, offset, {}});
  }
  return out;
}

Status ContentConsumer::Commit(bool sync) {
  last_commit_ms_ = SteadyNowMs();
  const std::vector<PartitionOffset> offsets = CommitOffsets(true);
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

void ContentConsumer::CommitIfDue() {
  if (SteadyNowMs() - last_commit_ms_ < options_.commit_interval_ms) return;
  if (Status st = Commit(false); !st.ok() && st.code() != StatusCode::kCancelled)
    spdlog::warn("content: {}", st.message());
}

void ContentConsumer::OnRevoke(const std::vector<TopicPartition>& tps, bool lost) {
  if (!lost) {
    CommitRevoked(source_, CommitOffsets(/*step_over_gaps=*/false), tps, "content: ",
                  {&totals_.commits, metrics_ ? metrics_->commits_ok : nullptr,
                   metrics_ ? metrics_->commits_failed : nullptr});
  }
  // The batch's items of these partitions are still assigned (idempotent), but
  // their offsets are no longer ours.
  for (const auto& tp : tps) {
    done_.erase(tp);
    batch_.next.erase(tp);
  }
}

bool ContentConsumer::AtEnd() {
  if (options_.end_offsets.empty()) return false;
  const std::vector<TopicPartition> assigned = source_.Assignment();
  for (const auto& [tp, end] : options_.end_offsets) {
    if (end <= 0) continue;
    int64_t at = -1;
    auto d = done_.find(tp);
    if (d != done_.end()) at = d->second;
    if (!batch_.next.count(tp) && std::find(assigned.begin(), assigned.end(), tp) != assigned.end())
      at = std::max(at, source_.Position(tp));
    if (at < end) return false;
  }
  return true;
}

void ContentConsumer::LogProgressIfDue(bool force) {
  const int64_t now = SteadyNowMs();
  if (!force && now - last_progress_ms_ < kProgressLogIntervalMs) return;
  last_progress_ms_ = now;
  std::string reasons;
  for (const auto& [name, n] : totals_.rejected_by_reason)
    reasons += (reasons.empty() ? " (" : ", ") + name + " " + std::to_string(n);
  if (!reasons.empty()) reasons += ")";
  spdlog::info(
      "content: {} messages, {} items assigned ({} started a cluster, {} joined one, {} "
      "known), {} rejected{}, {} batches, {} commits",
      totals_.messages, totals_.assigned(), totals_.items_new, totals_.items_joined,
      totals_.items_known, totals_.rejected, reasons, totals_.batches, totals_.commits);
}

Status ContentConsumer::Run(const std::atomic<bool>& stop) {
  Status st;
  while (!stop.load() && !AtEnd()) {
    messages_.clear();
    Status ps = source_.Poll(options_.batch_max_items, options_.poll_timeout_ms,
                             options_.batch_max_wait_ms, &messages_);
    if (!ps.ok() && ps.code() != StatusCode::kUnavailable) {
      st = ps;
      break;
    }
    Take(messages_);
    st = AssignBatch(stop);
    if (!st.ok()) break;
    CommitIfDue();
    LogProgressIfDue(false);
  }
  if (st.ok()) st = AssignBatch(stop);
  // What was assigned is committed also when giving up (fatal or cancelled).
  Status cs = Commit(true);
  LogProgressIfDue(true);
  if (!st.ok()) return st;
  if (cs.code() == StatusCode::kFailedPrecondition) {
    spdlog::warn("content: final commit: {}", cs.message());  // the next owner re-reads
    return Status::Ok();
  }
  if (!cs.ok()) return cs.Prefixed("final commit");
  return Status::Ok();
}

}  // namespace ef
