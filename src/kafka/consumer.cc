#include "kafka/consumer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "common/clock.h"
#include "common/log_fields.h"
#include "kafka/consumer_handle.h"
#include "kafka/handles.h"
#include "kafka/log.h"
#include "kafka/watermark_poller.h"

namespace ef {

using kafka::HandlePtr;
using kafka::MessagePtr;
using kafka::PartitionListPtr;

// The consumer's partition state, kept here and nowhere else.
// Invariants (all on the one thread that calls Poll/Commit/Close; librdkafka runs
// the rebalance callback inside rd_kafka_consumer_poll / close on that thread):
//  - `assigned` is exactly the set librdkafka has assigned to us: eager protocol:
//    replaced on assign, cleared on revoke; cooperative: grown by incremental
//    assign, shrunk by incremental revoke.
//  - every Message that Poll hands out belongs to a partition in `assigned` at
//    the moment Poll returns: a revoke served in the middle of a Poll removes the
//    revoked partitions' messages gathered so far (`polling`), so no caller ever
//    decodes, acknowledges or commits a partition it no longer owns.
//  - `paused` applies to every assigned partition, also to ones assigned later.
//  - `hold`: while the group rebalances, async commits are not sent (Commit
//    returns kCancelled). One sent then fails anyway, and one that reaches the
//    coordinator after the group's next generation was formed fails with
//    ILLEGAL_GENERATION, which librdkafka 2.0 treats as a lost assignment: it
//    drops all our partitions and rejoins, restarting the rebalance. The mock
//    cluster makes that certain (it reads no request from a member whose
//    JoinGroup is pending, so every commit queued meanwhile arrives late) and a
//    real broker makes it possible (a commit crossing the election). Held from a
//    commit refused for a rebalance, or a revoke, until the assignment that ends
//    the rebalance: for the cooperative protocol the assign after a revoke is
//    followed by a second join round (`rejoin_after_assign`), so the assign
//    after that. At most CommitHold::kLimitMs after the last of those events, so no
//    missed event can stop commits for long.
struct KafkaConsumer::Impl {
  HandlePtr rk;
  RevokeHandler revoke_handler;
  std::vector<MessagePtr> held;  // messages returned by the last Poll
  std::set<TopicPartition> assigned;
  std::vector<Message>* polling = nullptr;  // Poll's output while Poll runs
  kafka::TopicNames topic_names;            // stable storage for Message::topic
  bool paused = false;
  bool closed = false;
  bool cooperative = false;  // the group's protocol, known from the first rebalance
  // The assigned partitions' watermarks are asked by the poller, on a thread of
  // its own, about every second, paused or not: the ingest thread never waits for
  // a broker, and lag never goes stale. librdkafka's cached value (from fetch
  // responses) stops moving while a partition is paused, and also while its
  // fetch queue is full because a slow Redis write holds Poll (issue 48: lag read
  // 0 for 5.5 s while 50,000 events waited). high_cache: the highest high
  // watermark known per partition.
  std::unique_ptr<kafka::WatermarkPoller> poller;
  std::mutex lost_mu;
  KafkaConsumer::LostHandler lost_handler;  // guarded by lost_mu
  std::map<TopicPartition, int64_t> high_cache;
  void WantWatermarks() {
    if (poller) poller->Want(std::vector<TopicPartition>(assigned.begin(), assigned.end()));
  }
  // A subscribed topic reported missing: since when (0: none), which, and the
  // report. librdkafka reports it once, then again only at the next metadata
  // refresh (minutes), so each Poll checks the age itself. Cleared by a message, or an
  // assignment with a partition of that topic (it appeared).
  int64_t topic_missing_since_ms = 0;
  std::string topic_missing;
  std::string topic_missing_report;
  struct CommitHold {
    // The longest commits are held after the last rebalance event: twice the
    // mock's join round (session.timeout.ms 6 s in tests, less 1 s), and well
    // within a real group's rebalance timeout.
    static constexpr int64_t kLimitMs = 10000;
    bool active = false;
    bool rejoin_after_assign = false;
    int64_t until_ms = 0;  // steady clock
  } hold;
  void Hold(const char* why) {
    if (!hold.active) spdlog::info("kafka: commits wait while the group rebalances ({})", why);
    hold.active = true;
    hold.until_ms = SteadyNowMs() + CommitHold::kLimitMs;
  }
  void ReleaseHold(const char* why) {
    if (hold.active) spdlog::info("kafka: commits resume: {}", why);
    hold.active = false;
    hold.rejoin_after_assign = false;
  }

  static PartitionListPtr ToList(const std::vector<TopicPartition>& tps) {
    PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(tps.size())));
    for (const auto& tp : tps)
      rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
    return list;
  }
  static std::vector<TopicPartition> FromList(const rd_kafka_topic_partition_list_t* list) {
    std::vector<TopicPartition> out;
    if (!list) return out;
    for (int i = 0; i < list->cnt; ++i)
      out.push_back({list->elems[i].topic, list->elems[i].partition});
    return out;
  }

  void OnRebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions) {
    cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk.get()), "COOPERATIVE") == 0;
    auto tps = FromList(partitions);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      LogWith(spdlog::level::info, {{"partitions", Describe(tps)}},
              "kafka: assigned {} partition(s){}: {}", tps.size(),
              cooperative ? " (cooperative, added)" : "", Describe(tps));
      Status st =
          cooperative
              ? TakeError(rd_kafka_incremental_assign(rk.get(), partitions), "assign")
              : kafka::FromKafkaError(rd_kafka_assign(rk.get(), partitions), "kafka: assign");
      if (!st.ok()) spdlog::error("{}", st.message());
      if (!cooperative) assigned.clear();
      assigned.insert(tps.begin(), tps.end());
      for (const TopicPartition& tp : tps)
        if (tp.topic == topic_missing) topic_missing_since_ms = 0;
      if (paused && partitions->cnt > 0) rd_kafka_pause_partitions(rk.get(), partitions);
      WantWatermarks();
      if (hold.rejoin_after_assign) {
        hold.rejoin_after_assign = false;
        Hold("the cooperative protocol's second round follows");
      } else {
        ReleaseHold("the rebalance is complete");
      }
      return;
    }
    const bool lost = rd_kafka_assignment_lost(rk.get());
    Hold("partitions are being revoked");
    if (cooperative && !lost && err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
      hold.rejoin_after_assign = true;
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      LogWith(spdlog::level::info, {{"partitions", Describe(tps)}},
              "kafka: revoking {} partition(s){}: {}", tps.size(),
              lost ? " (assignment lost: no commit)" : "", Describe(tps));
    } else {
      spdlog::error("kafka: rebalance error: {}", rd_kafka_err2str(err));
      tps = {assigned.begin(), assigned.end()};
    }
    // Messages of these partitions gathered by the Poll under way are no longer
    // ours to hand out.
    if (polling) {
      std::erase_if(*polling, [&](const Message& m) {
        return std::find(tps.begin(), tps.end(), TopicPartition{*m.topic, m.partition}) !=
               tps.end();
      });
    }
    if (revoke_handler) revoke_handler(tps, lost);
    for (const auto& tp : tps) {
      assigned.erase(tp);
      high_cache.erase(tp);
    }
    Status st;
    if (cooperative && err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      st = TakeError(rd_kafka_incremental_unassign(rk.get(), partitions), "unassign");
    } else {
      st = kafka::FromKafkaError(rd_kafka_assign(rk.get(), nullptr), "kafka: unassign");
      assigned.clear();
    }
    if (!st.ok()) spdlog::error("{}", st.message());
    WantWatermarks();
  }

  static Status TakeError(rd_kafka_error_t* error, const char* what) {
    if (!error) return Status::Ok();
    Status st = Unavailable(std::string("kafka: incremental ") + what + ": " +
                            rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
    return st;
  }

  static std::string Describe(const std::vector<TopicPartition>& tps) {
    std::string s;
    for (const auto& tp : tps) {
      if (!s.empty()) s += ",";
      s += tp.topic + "/" + std::to_string(tp.partition);
    }
    return s;
  }
};

namespace {

// A commit refused because the group is rebalancing, or this member's
// generation is over.
bool RefusedForRebalance(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
         err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID;
}

constexpr int kSyncCommitTimeoutMs = 10000;
constexpr int kCloseTimeoutMs = 10000;

// A commit refused because the group moved on (a rebalance under way, or this
// member's generation is over): the partitions are no longer this member's to
// commit, and their next owner re-reads from their last commit.
Status CommitError(rd_kafka_resp_err_t err, const std::string& what) {
  if (RefusedForRebalance(err)) {
    return FailedPrecondition(what + ": " + rd_kafka_err2str(err) +
                              " (the group is rebalancing: the next owner re-reads from the "
                              "last commit)");
  }
  return kafka::FromKafkaError(err, what);
}
// A subscribed topic reported missing for this long is a fatal configuration
// error (a topic being created gets this long to appear).
constexpr int64_t kTopicMissingFatalMs = 10000;

void RebalanceCb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
                 void* opaque) {
  static_cast<KafkaConsumer::Impl*>(opaque)->OnRebalance(err, partitions);
}

void CommitCb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets,
              void* opaque) {
  if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;  // nothing to commit
  bool refused = RefusedForRebalance(err);
  for (int i = 0; offsets && i < offsets->cnt; ++i)
    refused = refused || RefusedForRebalance(offsets->elems[i].err);
  if (refused) static_cast<KafkaConsumer::Impl*>(opaque)->Hold("a commit was refused");
  if (err) {
    spdlog::warn("kafka: offset commit failed: {} (will be retried with the next commit)",
                 rd_kafka_err2str(err));
    return;
  }
  for (int i = 0; offsets && i < offsets->cnt; ++i) {
    if (offsets->elems[i].err)
      LogWith(spdlog::level::warn,
              {{"topic", offsets->elems[i].topic}, {"partition", offsets->elems[i].partition}},
              "kafka: offset commit failed for {}/{}: {}", offsets->elems[i].topic,
              offsets->elems[i].partition, rd_kafka_err2str(offsets->elems[i].err));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ConsumerDefaults(const KafkaConfig& config) {
  return {
      {"bootstrap.servers", config.bootstrap_servers},
      {"group.id", config.group_id},
      {"client.id", "exposure-filter"},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", config.auto_offset_reset},
      {"enable.partition.eof", "false"},
      // A fetch that finds nothing waits this long before answering: it bounds
      // the added latency when the stream is quiet (KAFKA-MOCK.md).
      {"fetch.wait.max.ms", "50"},
      // librdkafka backs off fetching for 1 s when one fetch overshoots this
      // (2.0.2); a large value keeps big batches flowing.
      {"queued.min.messages", "1000000"},
      // The prefetch queue is most of the daemon's memory while it catches up:
      // 32 MiB instead of librdkafka's 64 MiB took a 2M-event drain's peak RSS
      // from 635 MB to 474 MB at the same rate (docs/PERFORMANCE.md).
      // Both queue limits apply to the one consumer queue of all partitions
      // (librdkafka 2.0's high-level consumer), not to each partition: they are
      // checked before a fetch is sent, so the responses in flight come on top.
      {"queued.max.messages.kbytes", "32768"},
      // One fetch response per broker in flight: at most this many (compressed)
      // bytes. librdkafka's 50 MiB is reached once a broker leads 50 of our
      // partitions (1 MiB each), and 50 MiB of lz4 batches of small events is
      // over a million messages. Measured on the mock (2M lz4 events, consumer
      // alone): 32 partitions prefetched 0.62-0.65M messages; 256 partitions
      // 0.48-1.67M (+180..630 MiB RSS) at 50 MiB, 0.62-0.86M (+230..330 MiB) at
      // 8 MiB. 8 MiB is ~100k small events uncompressed, about a second of the
      // daemon's work per round trip; the drain rate did not change.
      {"fetch.max.bytes", "8388608"},
  };
}

KafkaConsumer::KafkaConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KafkaConsumer::~KafkaConsumer() { Close(); }

StatusOr<std::unique_ptr<KafkaConsumer>> KafkaConsumer::Create(const KafkaConfig& config) {
  auto impl = std::make_unique<Impl>();
  auto handle = kafka::NewConsumerHandle(config, {}, [&impl](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_opaque(conf, impl.get());
    rd_kafka_conf_set_rebalance_cb(conf, RebalanceCb);
    rd_kafka_conf_set_offset_commit_cb(conf, CommitCb);
  });
  if (!handle.ok()) return handle.status();
  impl->rk = std::move(handle.value());
  auto poller = kafka::WatermarkPoller::Create(config, {});
  if (!poller.ok()) return poller.status();
  impl->poller = std::move(poller.value());
  // Removed in Close, before the handle goes.
  kafka::SetOffsetResetListener(impl->rk.get(), [p = impl.get()](const kafka::OffsetReset& r) {
    std::lock_guard lock(p->lost_mu);
    if (p->lost_handler && r.to > r.from) p->lost_handler({r.topic, r.partition}, r.from, r.to);
  });
  rd_kafka_t* rk = impl->rk.get();
  rd_kafka_poll_set_consumer(rk);
  std::vector<TopicPartition> subs;
  for (const auto& t : config.topics) subs.push_back({t, RD_KAFKA_PARTITION_UA});
  auto list = Impl::ToList(subs);
  rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, list.get());
  if (e) return kafka::FromKafkaError(e, "kafka: subscribe");
  // Topics, not "topic/partition": a subscription names no partition (its -1 is
  // RD_KAFKA_PARTITION_UA); the assignment lines name them.
  std::string topics;
  for (const auto& t : config.topics) topics += (topics.empty() ? "" : ", ") + t;
  spdlog::info("kafka: subscribed to topic{} {} as group '{}' at {}",
               config.topics.size() == 1 ? "" : "s", topics, config.group_id,
               config.bootstrap_servers);
  return std::unique_ptr<KafkaConsumer>(new KafkaConsumer(std::move(impl)));
}

void KafkaConsumer::SetLostHandler(LostHandler handler) {
  std::lock_guard lock(impl_->lost_mu);
  impl_->lost_handler = std::move(handler);
}

void KafkaConsumer::SetRevokeHandler(RevokeHandler handler) {
  impl_->revoke_handler = std::move(handler);
}

Status KafkaConsumer::Poll(size_t max_messages, int timeout_ms, int max_wait_ms,
                           std::vector<Message>* out) {
  out->clear();
  impl_->held.clear();
  impl_->polling = out;
  struct Done {
    Impl* impl;
    ~Done() { impl->polling = nullptr; }
  } done{impl_.get()};
  using Clock = std::chrono::steady_clock;
  // Until the first message: up to timeout_ms. From the first message on: up to
  // max_wait_ms more for the batch to fill.
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int wait = timeout_ms;
  // Once per call (a batch), not per message: OnConsumerError checks it too.
  EF_RETURN_IF_ERROR(CheckTopicMissing());
  while (out->size() < max_messages) {
    rd_kafka_message_t* raw = rd_kafka_consumer_poll(impl_->rk.get(), wait);
    if (!raw) {
      if (out->empty() || Clock::now() >= deadline) break;
      // Something arrived already: wait only what is left of the batch window.
      wait = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (wait <= 0) break;
      continue;
    }
    MessagePtr msg(raw);
    if (msg->err) {
      if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
      EF_RETURN_IF_ERROR(OnConsumerError(*msg));
      continue;
    }
    impl_->topic_missing_since_ms = 0;
    if (out->empty()) deadline = Clock::now() + std::chrono::milliseconds(max_wait_ms);
    out->push_back(
        kafka::ToMessage(*msg, impl_->topic_names.Intern(rd_kafka_topic_name(msg->rkt))));
    impl_->held.push_back(std::move(msg));
    wait = 0;  // drain what is already queued without waiting
  }
  return Status::Ok();
}

Status KafkaConsumer::OnConsumerError(const rd_kafka_message_t& msg) {
  char fatal[512];
  if (rd_kafka_fatal_error(impl_->rk.get(), fatal, sizeof fatal))
    return Internal(std::string("kafka: fatal consumer error: ") + fatal);
  const std::string text = std::string("kafka: consumer: ") + rd_kafka_message_errstr(&msg);
  Status st = kafka::FromKafkaError(msg.err, text);
  if (st.code() == StatusCode::kPermissionDenied) return st;
  if (kafka::IsUnknownTopic(msg.err)) {
    if (impl_->topic_missing_since_ms == 0) impl_->topic_missing_since_ms = SteadyNowMs();
    impl_->topic_missing = msg.rkt ? rd_kafka_topic_name(msg.rkt) : "";
    impl_->topic_missing_report = text;
    EF_RETURN_IF_ERROR(CheckTopicMissing());
  }
  kafka::LogThrottled(msg.err, text);
  return Status::Ok();
}

Status KafkaConsumer::CheckTopicMissing() {
  if (impl_->topic_missing_since_ms == 0) return Status::Ok();
  const int64_t missing_ms = SteadyNowMs() - impl_->topic_missing_since_ms;
  if (missing_ms < kTopicMissingFatalMs) return Status::Ok();
  return PermissionDenied(impl_->topic_missing_report + " (for " +
                          std::to_string(missing_ms / 1000) +
                          " s: check kafka.topic and the broker's topics)");
}

Status KafkaConsumer::Commit(const std::vector<PartitionOffset>& offsets, bool sync) {
  if (offsets.empty()) return Status::Ok();
  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const auto& po : offsets) {
    rd_kafka_topic_partition_t* e =
        rd_kafka_topic_partition_list_add(list.get(), po.tp.topic.c_str(), po.tp.partition);
    e->offset = po.offset;
    if (!po.metadata.empty()) {
      // Owned by the list, which frees it with free().
      e->metadata = std::malloc(po.metadata.size());
      std::memcpy(e->metadata, po.metadata.data(), po.metadata.size());
      e->metadata_size = po.metadata.size();
    }
  }
  if (!sync) {
    Impl::CommitHold& hold = impl_->hold;
    if (hold.active && SteadyNowMs() < hold.until_ms) {
      return Cancelled("kafka: commit not sent: the group is rebalancing (it would be refused)");
    }
    if (hold.active) impl_->ReleaseHold("no rebalance event within the hold's limit");
    return kafka::FromKafkaError(rd_kafka_commit(impl_->rk.get(), list.get(), 1), "kafka: commit");
  }
  // A plain sync rd_kafka_commit waits for the group coordinator without limit:
  // with Kafka unreachable, shutdown would hang. Wait for the result on a queue
  // of our own, for a bounded time.
  kafka::QueuePtr queue(rd_kafka_queue_new(impl_->rk.get()));
  rd_kafka_resp_err_t e =
      rd_kafka_commit_queue(impl_->rk.get(), list.get(), queue.get(), nullptr, nullptr);
  if (e) return kafka::FromKafkaError(e, "kafka: commit");
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue.get(), kSyncCommitTimeoutMs);
  if (!ev) {
    return Unavailable("kafka: commit did not complete within " +
                       std::to_string(kSyncCommitTimeoutMs / 1000) +
                       " s (is Kafka reachable?); the partitions will be re-read from their last "
                       "commit");
  }
  Status st = CommitError(rd_kafka_event_error(ev), "kafka: commit");
  const rd_kafka_topic_partition_list_t* done = rd_kafka_event_topic_partition_list(ev);
  for (int i = 0; st.ok() && done && i < done->cnt; ++i) {
    if (done->elems[i].err)
      st = CommitError(done->elems[i].err, "kafka: commit " + std::string(done->elems[i].topic) +
                                               "/" + std::to_string(done->elems[i].partition));
  }
  rd_kafka_event_destroy(ev);
  return st;
}

Status KafkaConsumer::PauseAll() {
  impl_->paused = true;
  impl_->WantWatermarks();
  auto list = Impl::ToList({impl_->assigned.begin(), impl_->assigned.end()});
  if (list->cnt == 0) return Status::Ok();
  return kafka::FromKafkaError(rd_kafka_pause_partitions(impl_->rk.get(), list.get()),
                               "kafka: pause");
}

Status KafkaConsumer::ResumeAll() {
  impl_->paused = false;
  impl_->WantWatermarks();
  auto list = Impl::ToList({impl_->assigned.begin(), impl_->assigned.end()});
  if (list->cnt == 0) return Status::Ok();
  return kafka::FromKafkaError(rd_kafka_resume_partitions(impl_->rk.get(), list.get()),
                               "kafka: resume");
}

std::vector<TopicPartition> KafkaConsumer::Assignment() {
  return {impl_->assigned.begin(), impl_->assigned.end()};
}

int64_t KafkaConsumer::HighWatermark(const TopicPartition& tp) {
  // The highest of: what the last fetch response said (fresh while fetching),
  // the poller's last answer (at most about a second old, also while paused or
  // while the fetch queue is full) and the highest known before. Offsets only grow.
  int64_t low = -1, high = -1;
  int64_t& best = impl_->high_cache.try_emplace(tp, -1).first->second;
  if (rd_kafka_get_watermark_offsets(impl_->rk.get(), tp.topic.c_str(), tp.partition, &low,
                                     &high) == RD_KAFKA_RESP_ERR_NO_ERROR)
    best = std::max(best, high);
  if (impl_->poller && impl_->poller->Get(tp, &low, &high)) best = std::max(best, high);
  return best;
}

int64_t KafkaConsumer::Position(const TopicPartition& tp) {
  auto list = Impl::ToList({tp});
  if (rd_kafka_position(impl_->rk.get(), list.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return -1;
  const int64_t pos = list->elems[0].offset;
  return pos >= 0 ? pos : -1;
}

void KafkaConsumer::Close() {
  if (!impl_ || impl_->closed) return;
  impl_->closed = true;
  kafka::SetOffsetResetListener(impl_->rk.get(), {});
  impl_->poller.reset();  // at most its stop wait, even with the brokers gone
  impl_->held.clear();
  // rd_kafka_consumer_close waits for the group coordinator without limit: with
  // the brokers gone, shutdown would hang. Close through a queue of our own,
  // serving its rebalance events, for a bounded time.
  rd_kafka_t* rk = impl_->rk.get();
  kafka::QueuePtr queue(rd_kafka_queue_new(rk));
  if (rd_kafka_error_t* err = rd_kafka_consumer_close_queue(rk, queue.get())) {
    spdlog::warn("kafka: consumer close: {}", rd_kafka_error_string(err));
    rd_kafka_error_destroy(err);
  } else {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseTimeoutMs);
    while (!rd_kafka_consumer_closed(rk) && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_event_t* ev = rd_kafka_queue_poll(queue.get(), 100);
      if (!ev) continue;
      if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE) {
        impl_->OnRebalance(rd_kafka_event_error(ev), rd_kafka_event_topic_partition_list(ev));
      }
      rd_kafka_event_destroy(ev);
    }
    if (!rd_kafka_consumer_closed(rk)) {
      spdlog::warn(
          "kafka: consumer close did not finish within {} s (group coordinator "
          "unreachable); leaving without it: the group notices after "
          "session.timeout.ms",
          kCloseTimeoutMs / 1000);
    }
  }
  queue.reset();
  rd_kafka_destroy_flags(impl_->rk.release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

}  // namespace ef
