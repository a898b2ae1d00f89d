#include "support/fakes.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace ef::testing {

// ---------------------------------------------------------------- FakeSource

FakeSource::FakeSource(std::string topic, int32_t partitions) : topic_(std::move(topic)) {
  for (int32_t p = 0; p < partitions; ++p) LogOf(Tp(p)).assigned = true;
}

FakeSource::Log& FakeSource::LogOf(const TopicPartition& tp) { return logs_[tp]; }

int64_t FakeSource::Append(int32_t partition, std::string payload, int64_t timestamp_ms) {
  const TopicPartition tp = Tp(partition);
  const bool known = logs_.count(tp) != 0;
  Log& log = LogOf(tp);
  if (!known) log.assigned = true;
  const int64_t offset = log.records.empty() ? 0 : log.records.back().offset + 1;
  log.records.push_back(Record{offset, std::move(payload), timestamp_ms});
  return offset;
}

void FakeSource::AppendAt(const TopicPartition& tp, int64_t offset, std::string payload,
                          int64_t timestamp_ms) {
  const bool known = logs_.count(tp) != 0;
  Log& log = LogOf(tp);
  if (!known) log.assigned = true;
  if (!log.records.empty() && offset <= log.records.back().offset) {
    offset = log.records.back().offset + 1;  // keep the log ordered whatever the test asks
  }
  log.records.push_back(Record{offset, std::move(payload), timestamp_ms});
}

size_t FakeSource::Unconsumed() const {
  size_t n = 0;
  for (const auto& [tp, log] : logs_) {
    if (log.assigned) n += log.records.size() - log.position;
  }
  return n;
}

int64_t FakeSource::EndOffset(int32_t partition) const {
  auto it = logs_.find(Tp(partition));
  if (it == logs_.end() || it->second.records.empty()) return 0;
  return it->second.records.back().offset + 1;
}

int64_t FakeSource::AppendMarker(int32_t partition) {
  Log& log = LogOf(Tp(partition));
  const int64_t offset = log.records.empty() ? 0 : log.records.back().offset + 1;
  log.records.push_back(Record{offset, "", 0, true});
  return offset;
}

int64_t FakeSource::Position(const TopicPartition& tp) {
  auto it = logs_.find(tp);
  if (it == logs_.end() || !it->second.assigned || !it->second.polled) return -1;
  const Log& log = it->second;
  if (log.position < log.records.size()) return log.records[log.position].offset;
  return log.records.empty() ? 0 : log.records.back().offset + 1;
}

void FakeSource::Revoke(std::vector<TopicPartition>* tps, bool lost) {
  std::vector<TopicPartition> revoked;
  revoked.swap(*tps);
  if (revoke_handler_) revoke_handler_(revoked, lost);
  for (const auto& tp : revoked) {
    auto it = logs_.find(tp);
    if (it != logs_.end()) it->second.assigned = false;
  }
}

void FakeSource::Assign(const TopicPartition& tp) {
  Log& log = LogOf(tp);
  log.assigned = true;
  log.polled = false;
  auto c = committed_.find(tp);
  const int64_t from = c == committed_.end() ? 0 : c->second;
  log.position = 0;
  while (log.position < log.records.size() && log.records[log.position].offset < from) {
    ++log.position;
  }
}

Status FakeSource::Poll(size_t max_messages, int /*timeout_ms*/, int /*max_wait_ms*/,
                        std::vector<Message>* out) {
  out->clear();
  ++polls_;
  if (on_poll) on_poll(*this);
  if (!revoke_next_.empty()) Revoke(&revoke_next_, revoke_lost_);
  if (unavailable_next_) {
    unavailable_next_ = false;
    return Unavailable("fake source: broker transport failure (simulated)");
  }
  if (paused_) ++polls_while_paused_;
  size_t budget = max_messages;
  if (paused_) budget = std::min(budget, deliver_while_paused_);
  for (auto& [tp, log] : logs_) {
    if (!log.assigned) continue;
    log.polled = true;
    auto skip_markers = [&log] {
      while (log.position < log.records.size() && log.records[log.position].control) ++log.position;
    };
    skip_markers();
    while (budget > 0 && log.position < log.records.size()) {
      const Record& r = log.records[log.position++];
      Message m;
      m.topic = &tp.topic;
      m.partition = tp.partition;
      m.offset = r.offset;
      m.payload = r.payload.data();
      m.len = r.payload.size();
      m.timestamp_ms = r.timestamp_ms;
      out->push_back(m);
      --budget;
      skip_markers();
    }
  }
  if (paused_) deliver_while_paused_ -= out->size();
  if (!leaky_revoke_next_.empty()) Revoke(&leaky_revoke_next_, false);
  if (!erasing_revoke_next_.empty()) {
    // KafkaConsumer since issue 9: the revoke is served by a later
    // rd_kafka_consumer_poll call of the same Poll; the messages of the revoked
    // partitions gathered so far are dropped from the output, but the consumer's
    // position has already moved past them.
    // As in KafkaConsumer's rebalance callback: dropped first, then the handler.
    const std::vector<TopicPartition>& tps = erasing_revoke_next_;
    std::erase_if(*out, [&](const Message& m) {
      return std::find(tps.begin(), tps.end(), TopicPartition{*m.topic, m.partition}) != tps.end();
    });
    Revoke(&erasing_revoke_next_, false);
  }
  return Status::Ok();
}

Status FakeSource::Commit(const std::vector<PartitionOffset>& offsets, bool sync) {
  if (!sync && hold_async_commits_ > 0) {
    --hold_async_commits_;
    ++held_commits_;
    return Cancelled("fake source: commit held back (simulated rebalance)");
  }
  CommitCall call{offsets, sync, true};
  if (fail_commits_ > 0) {
    --fail_commits_;
    call.ok = false;
    commits_.push_back(std::move(call));
    return Unavailable("fake source: commit failed (simulated)");
  }
  for (const auto& po : offsets) committed_[po.tp] = po.offset;
  commits_.push_back(std::move(call));
  return Status::Ok();
}

Status FakeSource::PauseAll() {
  ++pause_calls_;
  paused_ = true;
  return Status::Ok();
}

Status FakeSource::ResumeAll() {
  ++resume_calls_;
  paused_ = false;
  return Status::Ok();
}

std::vector<TopicPartition> FakeSource::Assignment() {
  std::vector<TopicPartition> tps;
  for (const auto& [tp, log] : logs_) {
    if (log.assigned) tps.push_back(tp);
  }
  return tps;
}

// ---------------------------------------------------------------- FakeRejectSink

void FakeRejectSink::Send(const Message& m, RejectReason reason) {
  Sent s{TopicPartition{*m.topic, m.partition}, m.offset, reason};
  sent_.push_back(s);
  outstanding_.push_back(s);
  peak_outstanding_ = std::max(peak_outstanding_, outstanding_.size());
}

Status FakeRejectSink::Flush(int /*timeout_ms*/) {
  ++flushes_;
  if (deliver_on_flush) DeliverAll();
  if (outstanding_.empty()) return Status::Ok();
  return Unavailable("fake dead letter: " + std::to_string(outstanding_.size()) +
                     " copies outstanding");
}

int64_t FakeRejectSink::CommitLimit(const TopicPartition& tp) {
  int64_t limit = INT64_MAX;
  for (const auto& s : outstanding_) {
    if (s.tp == tp) limit = std::min(limit, s.offset);
  }
  return limit;
}

void FakeRejectSink::Forget(const std::vector<TopicPartition>& tps) {
  forgotten_.push_back(tps);
  std::erase_if(outstanding_, [&](const Sent& s) {
    return std::find(tps.begin(), tps.end(), s.tp) != tps.end();
  });
}

void FakeRejectSink::Deliver(size_t n) {
  while (n-- > 0 && !outstanding_.empty()) outstanding_.pop_front();
}

// ---------------------------------------------------------------- FakeSink

std::set<uint32_t> FakeSink::bits(const std::string& key) const {
  auto it = bits_.find(key);
  return it == bits_.end() ? std::set<uint32_t>{} : it->second;
}

int64_t FakeSink::expire_at(const std::string& key) const {
  auto it = expire_at_.find(key);
  return it == expire_at_.end() ? -1 : it->second;
}

std::vector<std::string> FakeSink::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, bits] : bits_) out.push_back(key);
  return out;
}

std::string FakeSink::RedisValue(const std::string& key) const {
  auto it = bits_.find(key);
  if (it == bits_.end() || it->second.empty()) return "";
  const uint32_t max_bit = *it->second.rbegin();
  std::string value(static_cast<size_t>(max_bit) / 8 + 1, '\0');
  for (uint32_t p : it->second) {
    value[p / 8] = static_cast<char>(static_cast<unsigned char>(value[p / 8]) | (0x80u >> (p % 8)));
  }
  return value;
}

Status FakeSink::Write(const BitBatch& batch, WriteStats* stats) {
  const uint64_t attempt = ++write_calls_;
  if (on_write) on_write(attempt);
  if (fail_always_ || fail_next_ > 0) {
    if (fail_next_ > 0) --fail_next_;
    ++write_failures_;
    return Status(fail_code_, fail_message_);
  }
  WriteStats local;
  std::vector<KeyBits> copy;
  for (size_t i = 0; i < batch.size; ++i) {
    const KeyBits& kb = batch.keys[i];
    bits_[kb.key].insert(kb.positions.begin(), kb.positions.end());
    expire_at_[kb.key] = kb.expire_at;
    local.bits += kb.positions.size();
    local.commands += 2;
    copy.push_back(kb);
  }
  local.keys = batch.size;
  acked_batches_.push_back(std::move(copy));
  ++writes_ok_;
  if (stats) *stats = local;
  return Status::Ok();
}

}  // namespace ef::testing
