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

}  // namespace

StatusOr<std::vector<int64_t>> ReadMessageTimestamps(const KafkaConfig& config,
                                                     const std::vector<PartitionOffset>& at,
                                                     int timeout_ms) {
  std::vector<int64_t> out(at.size(), -1);
  if (at.empty()) return out;
  for (size_t i = 0; i < at.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (at[i].tp == at[j].tp)
        return InvalidArgument("kafka: partition " + at[i].tp.topic + "/" +
                               std::to_string(at[i].tp.partition) + " named twice");
    }
  }

  // After the user's properties, so nothing can turn this probe into a
  // committer or a bulk reader: one small fetch per partition is all it needs.
  Probe probe;
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
      [&probe](rd_kafka_conf_t* conf) {
        rd_kafka_conf_set_opaque(conf, &probe);
        rd_kafka_conf_set_error_cb(conf, ProbeErrorCb);
      });
  if (!handle.ok()) return handle.status();
  kafka::HandlePtr rk = std::move(handle.value());
  rd_kafka_poll_set_consumer(rk.get());

  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(at.size())));
  for (const auto& po : at) {
    rd_kafka_topic_partition_list_add(list.get(), po.tp.topic.c_str(), po.tp.partition)->offset =
        po.offset;
  }
  // assign(), not subscribe(): no group membership, so the live group is untouched.
  rd_kafka_resp_err_t e = rd_kafka_assign(rk.get(), list.get());
  if (e) return kafka::FromKafkaError(e, "kafka: assign for reading message timestamps");

  auto index_of = [&](const rd_kafka_message_t* m) -> int {
    const char* topic = rd_kafka_topic_name(m->rkt);
    for (size_t i = 0; i < at.size(); ++i)
      if (at[i].tp.partition == m->partition && at[i].tp.topic == topic) return static_cast<int>(i);
    return -1;
  };
  std::vector<bool> done(at.size(), false);
  size_t remaining = at.size();
  Status failure;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  while (remaining > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    kafka::MessagePtr msg(
        rd_kafka_consumer_poll(rk.get(), static_cast<int>(std::min<int64_t>(left, 100))));
    if (!msg) continue;
    const int i = msg->rkt ? index_of(msg.get()) : -1;
    if (msg->err) {
      if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (i >= 0 && !done[i]) {
          done[i] = true;  // nothing at or after the offset (yet): stays -1
          --remaining;
        }
        continue;
      }
      char fatal[512];
      if (rd_kafka_fatal_error(rk.get(), fatal, sizeof fatal))
        return Internal(std::string("kafka: fatal consumer error: ") + fatal);
      Status st = kafka::FromKafkaError(
          msg->err, "kafka: reading message timestamps" +
                        (i >= 0 ? " of " + at[i].tp.topic + "/" + std::to_string(at[i].tp.partition)
                                : std::string()));
      if (st.code() == StatusCode::kInternal || st.code() == StatusCode::kPermissionDenied)
        return st;  // e.g. not authorized
      failure = st;
      continue;
    }
    if (i < 0 || done[i] || msg->offset < at[i].offset) continue;
    rd_kafka_timestamp_type_t type;
    const int64_t ts = rd_kafka_message_timestamp(msg.get(), &type);
    out[i] = ts > 0 ? ts : -1;
    done[i] = true;
    --remaining;
    kafka::PartitionListPtr one(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(one.get(), at[i].tp.topic.c_str(), at[i].tp.partition);
    rd_kafka_pause_partitions(rk.get(), one.get());  // one message is all we wanted
  }
  if (remaining == at.size()) {
    if (failure.ok() && probe.last_err != RD_KAFKA_RESP_ERR_NO_ERROR)
      failure = kafka::FromKafkaError(probe.last_err,
                                      "kafka " + config.bootstrap_servers +
                                          ": reading message timestamps: " + probe.last_reason);
    if (!failure.ok()) return failure;
  }
  rd_kafka_consumer_close(rk.get());
  return out;
}

}  // namespace ef
