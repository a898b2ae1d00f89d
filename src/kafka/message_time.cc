#include "kafka/message_time.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"
#include "kafka/log.h"

namespace ef {
namespace {

// Collects the last client-level error (e.g. "all brokers down") that
// librdkafka reports through the error callback rather than as a message.
struct Probe {
  rd_kafka_resp_err_t last_err = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string last_reason;
};

void ProbeErrorCb(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* probe = static_cast<Probe*>(opaque);
  probe->last_err = static_cast<rd_kafka_resp_err_t>(err);
  probe->last_reason = reason;
  kafka::LogThrottled(probe->last_err, std::string("kafka: ") + reason);
}

Status CheckDistinctPartitions(const std::vector<PartitionOffset>& at) {
  for (size_t i = 0; i < at.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (at[i].tp == at[j].tp)
        return InvalidArgument("kafka: partition " + at[i].tp.topic + "/" +
                               std::to_string(at[i].tp.partition) + " named twice");
    }
  }
  return Status::Ok();
}

// A consumer that reports client-level errors to `probe`. The overrides come
// after the user's properties, so nothing can turn this probe into a committer or
// a bulk reader: one small fetch per partition is all it needs.
StatusOr<kafka::HandlePtr> OpenProbeConsumer(const KafkaConfig& config, Probe* probe) {
  auto handle = kafka::NewConsumerHandle(
      config,
      {
          {"enable.auto.commit", "false"},
          {"enable.auto.offset.store", "false"},
          {"enable.partition.eof", "true"},   // an offset at the end answers at once
          {"auto.offset.reset", "earliest"},  // an offset deleted meanwhile: the next one
          {"queued.min.messages", "1"},       // no prefetching of a large backlog
          {"queued.max.messages.kbytes", "1024"},
          {"max.partition.fetch.bytes", "65536"},
      },
      [probe](rd_kafka_conf_t* conf) {
        rd_kafka_conf_set_opaque(conf, probe);
        rd_kafka_conf_set_error_cb(conf, ProbeErrorCb);
      });
  if (!handle.ok()) return handle.status();
  kafka::HandlePtr rk = std::move(handle.value());
  rd_kafka_poll_set_consumer(rk.get());
  return rk;
}

// assign(), not subscribe(): no group membership, so the live group is untouched.
Status AssignOffsets(rd_kafka_t* rk, const std::vector<PartitionOffset>& at) {
  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(at.size())));
  for (const auto& po : at) {
    rd_kafka_topic_partition_list_add(list.get(), po.tp.topic.c_str(), po.tp.partition)->offset =
        po.offset;
  }
  rd_kafka_resp_err_t e = rd_kafka_assign(rk, list.get());
  if (e) return kafka::FromKafkaError(e, "kafka: assign for reading message timestamps");
  return Status::Ok();
}

// The entry of `at` a message belongs to, -1 if none.
int IndexOf(const std::vector<PartitionOffset>& at, const rd_kafka_message_t* m) {
  if (!m->rkt) return -1;
  const char* topic = rd_kafka_topic_name(m->rkt);
  for (size_t i = 0; i < at.size(); ++i)
    if (at[i].tp.partition == m->partition && at[i].tp.topic == topic) return static_cast<int>(i);
  return -1;
}

// What one polled message means for the entries of `at` not yet answered.
struct MessageVerdict {
  enum Kind {
    kIgnore,   // not an answer: another partition, an entry answered, an earlier offset
    kEmpty,    // the end of the entry's partition: nothing at or after the offset (yet)
    kAnswer,   // the entry's first message at or after its offset: `timestamp`
    kFailure,  // a client error worth reporting if no entry gets an answer: `status`
    kFatal,    // a fatal or authorization error: `status` ends the read
  } kind = kIgnore;
  int index = -1;
  int64_t timestamp = -1;  // -1 when the message carries none
  Status status;
};

MessageVerdict JudgeError(rd_kafka_t* rk, const rd_kafka_message_t* msg,
                          const std::vector<PartitionOffset>& at, int i,
                          const std::vector<bool>& done) {
  if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
    if (i >= 0 && !done[i]) return {MessageVerdict::kEmpty, i};
    return {};
  }
  char fatal[512];
  if (rd_kafka_fatal_error(rk, fatal, sizeof fatal))
    return {MessageVerdict::kFatal, i, -1,
            Internal(std::string("kafka: fatal consumer error: ") + fatal)};
  Status st = kafka::FromKafkaError(
      msg->err, "kafka: reading message timestamps" +
                    (i >= 0 ? " of " + at[i].tp.topic + "/" + std::to_string(at[i].tp.partition)
                            : std::string()));
  if (st.code() == StatusCode::kInternal || st.code() == StatusCode::kPermissionDenied)
    return {MessageVerdict::kFatal, i, -1, st};  // e.g. not authorized
  return {MessageVerdict::kFailure, i, -1, st};
}

MessageVerdict Judge(rd_kafka_t* rk, const rd_kafka_message_t* msg,
                     const std::vector<PartitionOffset>& at, const std::vector<bool>& done) {
  const int i = IndexOf(at, msg);
  if (msg->err) return JudgeError(rk, msg, at, i, done);
  if (i < 0 || done[i] || msg->offset < at[i].offset) return {};
  rd_kafka_timestamp_type_t type;
  const int64_t ts = rd_kafka_message_timestamp(msg, &type);
  return {MessageVerdict::kAnswer, i, ts > 0 ? ts : -1};
}

void PausePartition(rd_kafka_t* rk, const TopicPartition& tp) {
  kafka::PartitionListPtr one(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(one.get(), tp.topic.c_str(), tp.partition);
  rd_kafka_pause_partitions(rk, one.get());
}

// The answers gathered until every entry had one or the time ran out.
struct Gathered {
  std::vector<int64_t> timestamps;  // -1 where none
  size_t answered = 0;              // entries with a timestamp or at their end
  Status failure;                   // the last client error seen
};

StatusOr<Gathered> GatherTimestamps(rd_kafka_t* rk, const std::vector<PartitionOffset>& at,
                                    int timeout_ms) {
  Gathered g{std::vector<int64_t>(at.size(), -1)};
  std::vector<bool> done(at.size(), false);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  while (g.answered < at.size()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    kafka::MessagePtr msg(
        rd_kafka_consumer_poll(rk, static_cast<int>(std::min<int64_t>(left, 100))));
    if (!msg) continue;
    MessageVerdict v = Judge(rk, msg.get(), at, done);
    switch (v.kind) {
      case MessageVerdict::kIgnore:
        break;
      case MessageVerdict::kFatal:
        return v.status;
      case MessageVerdict::kFailure:
        g.failure = std::move(v.status);
        break;
      case MessageVerdict::kAnswer:
        g.timestamps[v.index] = v.timestamp;
        PausePartition(rk, at[v.index].tp);  // one message is all we wanted
        [[fallthrough]];
      case MessageVerdict::kEmpty:
        done[v.index] = true;
        ++g.answered;
        break;
    }
  }
  return g;
}

}  // namespace

StatusOr<std::vector<int64_t>> ReadMessageTimestamps(const KafkaConfig& config,
                                                     const std::vector<PartitionOffset>& at,
                                                     int timeout_ms) {
  if (at.empty()) return std::vector<int64_t>();
  if (Status st = CheckDistinctPartitions(at); !st.ok()) return st;
  Probe probe;
  auto rk = OpenProbeConsumer(config, &probe);
  if (!rk.ok()) return rk.status();
  if (Status st = AssignOffsets(rk->get(), at); !st.ok()) return st;
  auto gathered = GatherTimestamps(rk->get(), at, timeout_ms);
  if (!gathered.ok()) return gathered.status();
  if (gathered->answered == 0) {
    Status failure = gathered->failure;
    if (failure.ok() && probe.last_err != RD_KAFKA_RESP_ERR_NO_ERROR)
      failure = kafka::FromKafkaError(probe.last_err,
                                      "kafka " + config.bootstrap_servers +
                                          ": reading message timestamps: " + probe.last_reason);
    if (!failure.ok()) return failure;
  }
  rd_kafka_consumer_close(rk->get());
  return std::move(gathered->timestamps);
}

}  // namespace ef
