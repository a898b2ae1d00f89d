#include "pipeline/dead_letter.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <climits>

#include "common/clock.h"

namespace ef {

StatusOr<std::unique_ptr<DeadLetterSink>> DeadLetterSink::Create(const KafkaConfig& config,
                                                                 DeadLetterOptions options,
                                                                 IngestMetrics* metrics) {
  ProducerOptions o;
  o.bootstrap_servers = config.bootstrap_servers;
  o.properties = config.properties;
  // Consumer-only properties would make the producer refuse to start.
  for (const char* k :
       {"group.id", "auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store",
        "fetch.wait.max.ms", "queued.min.messages", "session.timeout.ms", "max.poll.interval.ms",
        "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes",
        "queued.max.messages.kbytes", "heartbeat.interval.ms", "partition.assignment.strategy",
        "isolation.level", "group.instance.id"})
    o.properties.erase(k);
  auto p = KafkaProducer::Create(o);
  if (!p.ok()) return p.status().Prefixed("kafka.dead_letter_topic");
  return std::unique_ptr<DeadLetterSink>(
      new DeadLetterSink(std::move(p.value()), config.dead_letter_topic, options, metrics));
}

DeadLetterSink::DeadLetterSink(std::unique_ptr<KafkaProducer> producer, std::string topic,
                               DeadLetterOptions options, IngestMetrics* metrics)
    : producer_(std::move(producer)),
      topic_(std::move(topic)),
      options_(options),
      metrics_(metrics) {
  producer_->SetDeliveryHandler([this](uint64_t token, const Status& result, bool retriable) {
    OnDelivery(token, result, retriable);
  });
}

DeadLetterSink::~DeadLetterSink() {
  // The producer's destructor still serves delivery reports: not to us.
  producer_->SetDeliveryHandler(nullptr);
}

void DeadLetterSink::Send(const Message& m, RejectReason reason) {
  const uint64_t token = next_token_++;
  Copy& c = copies_[token];
  c.tp = TopicPartition{*m.topic, m.partition};
  c.offset = m.offset;
  c.payload.assign(m.payload, m.len);
  c.timestamp_ms = m.timestamp_ms > 0 ? m.timestamp_ms : 0;
  c.headers = {{"exposure-filter-reason", RejectReasonName(reason)},
               {"exposure-filter-source",
                *m.topic + "/" + std::to_string(m.partition) + "/" + std::to_string(m.offset)}};
  c.backoff_ms = options_.retry_backoff_min_ms;
  undelivered_[c.tp].insert(c.offset);
  pending_bytes_ += CopyBytes(c);
  Produce(token, c);
  producer_->Poll();
  UpdateGauge();
}

void DeadLetterSink::Produce(uint64_t token, Copy& c) {
  ++c.attempts;
  Status st = producer_->Produce(topic_, -1, {}, c.payload, c.timestamp_ms, c.headers, token);
  if (st.ok()) {
    c.in_flight = true;
    return;
  }
  // Not even queued: the same as a failed delivery.
  OnDelivery(token, st, st.code() == StatusCode::kUnavailable);
}

void DeadLetterSink::OnDelivery(uint64_t token, const Status& result, bool retriable) {
  auto it = copies_.find(token);
  if (it == copies_.end()) return;  // forgotten meanwhile
  Copy& c = it->second;
  c.in_flight = false;
  if (result.ok()) {
    if (metrics_) metrics_->dead_letter_delivered->Increment();
    Erase(it);
    return;
  }
  if (metrics_) metrics_->dead_letter_failed->Increment();
  const std::string where =
      c.tp.topic + "/" + std::to_string(c.tp.partition) + "/" + std::to_string(c.offset);
  if (!retriable && options_.drop_on_permanent_failure) {
    spdlog::error(
        "dead letter: copy of {} dropped after {} attempt(s): {} "
        "(kafka.dead_letter_on_failure: drop)",
        where, c.attempts, result.message());
    if (metrics_) metrics_->dead_letter_dropped->Increment();
    Erase(it);
    return;
  }
  if (c.attempts == 1 || c.attempts % 10 == 0) {
    spdlog::error(
        "dead letter: copy of {} not delivered ({} attempt(s)): {}; retrying, and {} is not "
        "committed until it is{}",
        where, c.attempts, result.message(), where,
        retriable ? "" : " (a permanent error: set kafka.dead_letter_on_failure: drop to skip it)");
  }
  c.retry_at_ms = SteadyNowMs() + c.backoff_ms;
  c.backoff_ms = std::min(c.backoff_ms * 2, options_.retry_backoff_max_ms);
}

bool DeadLetterSink::Full() {
  if (pending_bytes_ >= options_.max_pending_bytes) {
    full_ = true;
  } else if (pending_bytes_ <= options_.max_pending_bytes / 2) {
    full_ = false;
  }
  return full_;
}

size_t DeadLetterSink::CopyBytes(const Copy& c) {
  size_t bytes = sizeof(Copy) + c.payload.size() + c.tp.topic.size();
  for (const Header& h : c.headers) bytes += sizeof(Header) + h.name.size() + h.value.size();
  // Nodes of copies_ and of undelivered_'s multiset, and allocator slack.
  return bytes + 128;
}

void DeadLetterSink::Erase(std::map<uint64_t, Copy>::iterator it) {
  pending_bytes_ -= CopyBytes(it->second);
  auto u = undelivered_.find(it->second.tp);
  if (u != undelivered_.end()) {
    auto o = u->second.find(it->second.offset);
    if (o != u->second.end()) u->second.erase(o);
    if (u->second.empty()) undelivered_.erase(u);
  }
  copies_.erase(it);
}

void DeadLetterSink::RetryDue() {
  const int64_t now = SteadyNowMs();
  for (auto& [token, c] : copies_) {
    if (!c.in_flight && c.retry_at_ms <= now) Produce(token, c);
  }
}

Status DeadLetterSink::Flush(int timeout_ms) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  for (;;) {
    producer_->Poll();
    RetryDue();
    UpdateGauge();
    if (copies_.empty()) return Status::Ok();
    const int64_t left = deadline - SteadyNowMs();
    if (left <= 0) break;
    producer_->Flush(static_cast<int>(std::min<int64_t>(left, 50))).IgnoreError();
  }
  return Unavailable("dead letter topic " + topic_ + ": " + std::to_string(copies_.size()) +
                     " copy(ies) not delivered yet; their offsets are not committed");
}

int64_t DeadLetterSink::CommitLimit(const TopicPartition& tp) {
  auto u = undelivered_.find(tp);
  return u == undelivered_.end() ? INT64_MAX : *u->second.begin();
}

void DeadLetterSink::Forget(const std::vector<TopicPartition>& tps) {
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (std::find(tps.begin(), tps.end(), it->second.tp) != tps.end()) {
      pending_bytes_ -= CopyBytes(it->second);
      it = copies_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& tp : tps) undelivered_.erase(tp);
  UpdateGauge();
}

void DeadLetterSink::UpdateGauge() {
  if (!metrics_) return;
  metrics_->dead_letter_outstanding->Set(static_cast<double>(copies_.size()));
  metrics_->dead_letter_outstanding_bytes->Set(static_cast<double>(pending_bytes_));
}

}  // namespace ef
