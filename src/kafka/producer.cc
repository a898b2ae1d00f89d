#include "kafka/producer.h"

#include <spdlog/spdlog.h>

#include <cstdint>

#include "kafka/handles.h"
#include "kafka/log.h"

namespace ef {

struct KafkaProducer::Impl {
  kafka::HandlePtr rk;
};

struct ProducerCallbacks {
  static void Delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    auto* p = static_cast<KafkaProducer*>(opaque);
    if (msg->err) {
      p->failed_.fetch_add(1);
      kafka::LogThrottled(msg->err,
                          std::string("kafka: delivery failed: ") + rd_kafka_err2str(msg->err));
    } else {
      p->delivered_.fetch_add(1);
    }
    if (!p->handler_) return;
    const uint64_t token = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(msg->_private));
    Status st =
        msg->err ? kafka::FromKafkaError(
                       msg->err, "kafka: delivery to " + std::string(rd_kafka_topic_name(msg->rkt)))
                 : Status::Ok();
    p->handler_(token, st, IsRetriable(msg->err));
  }
  static bool IsRetriable(rd_kafka_resp_err_t err) {
    switch (err) {
      case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      case RD_KAFKA_RESP_ERR_INVALID_MSG:
      case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
      case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
      case RD_KAFKA_RESP_ERR_INVALID_RECORD:
      case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
      case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      case RD_KAFKA_RESP_ERR__INVALID_ARG:
      case RD_KAFKA_RESP_ERR__FATAL:
        return false;
      default:
        return true;
    }
  }
};

StatusOr<std::unique_ptr<KafkaProducer>> KafkaProducer::Create(const ProducerOptions& options) {
  std::unique_ptr<KafkaProducer> p(new KafkaProducer());
  kafka::ConfPtr conf(rd_kafka_conf_new());
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "bootstrap.servers", options.bootstrap_servers));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "client.id", "exposure-filter"));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "linger.ms", "5"));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "queue.buffering.max.messages", "1000000"));
  for (const auto& [k, v] : options.properties)
    EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), k, v));
  kafka::InstallLogging(conf.get());
  rd_kafka_conf_set_dr_msg_cb(conf.get(), ProducerCallbacks::Delivery);
  rd_kafka_conf_set_opaque(conf.get(), p.get());
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
  if (!rk) return InvalidArgument(std::string("kafka: cannot create producer: ") + err);
  conf.release();
  p->impl_ = std::make_unique<Impl>();
  p->impl_->rk.reset(rk);
  return p;
}

KafkaProducer::~KafkaProducer() {
  if (impl_ && impl_->rk) {
    rd_kafka_flush(impl_->rk.get(), 5000);
  }
}

Status KafkaProducer::Produce(const std::string& topic, int32_t partition, std::string_view key,
                              std::string_view payload, int64_t timestamp_ms,
                              const std::vector<Header>& headers, uint64_t token) {
  rd_kafka_headers_t* hdrs = nullptr;
  if (!headers.empty()) {
    hdrs = rd_kafka_headers_new(headers.size());
    for (const auto& h : headers)
      rd_kafka_header_add(hdrs, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                          static_cast<ssize_t>(h.value.size()));
  }
  for (;;) {
    rd_kafka_resp_err_t e = rd_kafka_producev(
        impl_->rk.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_VALUE(const_cast<char*>(payload.data()), payload.size()),
        RD_KAFKA_V_KEY(key.empty() ? nullptr : key.data(), key.size()),
        RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(token))), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(impl_->rk.get(), 50);
      continue;
    }
    if (hdrs) rd_kafka_headers_destroy(hdrs);
    Status st = kafka::FromKafkaError(e, "kafka: produce to " + topic);
    if (st.code() == StatusCode::kUnavailable && !ProducerCallbacks::IsRetriable(e))
      return InvalidArgument(st.message());
    return st;
  }
}

Status KafkaProducer::Flush(int timeout_ms) {
  rd_kafka_resp_err_t e = rd_kafka_flush(impl_->rk.get(), timeout_ms);
  if (e == RD_KAFKA_RESP_ERR__TIMED_OUT)
    return Unavailable("kafka: flush timed out with " +
                       std::to_string(rd_kafka_outq_len(impl_->rk.get())) +
                       " message(s) undelivered");
  return kafka::FromKafkaError(e, "kafka: flush");
}

void KafkaProducer::Poll() { rd_kafka_poll(impl_->rk.get(), 0); }

}  // namespace ef
