#include "kafka/producer.h"

#include <spdlog/spdlog.h>

#include "kafka/handles.h"
#include "kafka/log.h"

namespace ef {

struct KafkaProducer::Impl {
  kafka::HandlePtr rk;
};

namespace {

void DeliveryCb(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
  auto* counters = static_cast<std::atomic<uint64_t>*>(opaque);  // [0] delivered, [1] failed
  if (msg->err) {
    counters[1].fetch_add(1);
    kafka::LogThrottled(msg->err, std::string("kafka: delivery failed: ") + rd_kafka_err2str(msg->err));
  } else {
    counters[0].fetch_add(1);
  }
}

}  // namespace

StatusOr<std::unique_ptr<KafkaProducer>> KafkaProducer::Create(const ProducerOptions& options) {
  std::unique_ptr<KafkaProducer> p(new KafkaProducer());
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  kafka::ConfPtr conf(rd_kafka_conf_new());
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "bootstrap.servers", options.bootstrap_servers));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "client.id", "exposure-filter"));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "linger.ms", "5"));
  EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), "queue.buffering.max.messages", "1000000"));
  for (const auto& [k, v] : options.properties) EF_RETURN_IF_ERROR(kafka::SetConf(conf.get(), k, v));
  kafka::InstallLogging(conf.get());
  rd_kafka_conf_set_dr_msg_cb(conf.get(), DeliveryCb);
  // delivered_ and failed_ are adjacent members: the callback gets both.
  rd_kafka_conf_set_opaque(conf.get(), &p->delivered_);
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
                              const std::vector<Header>& headers) {
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
        RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(impl_->rk.get(), 50);
      continue;
    }
    if (hdrs) rd_kafka_headers_destroy(hdrs);
    return InvalidArgument("kafka: produce to " + topic + ": " + rd_kafka_err2str(e));
  }
}

Status KafkaProducer::Flush(int timeout_ms) {
  rd_kafka_resp_err_t e = rd_kafka_flush(impl_->rk.get(), timeout_ms);
  if (e == RD_KAFKA_RESP_ERR__TIMED_OUT)
    return Unavailable("kafka: flush timed out with " +
                       std::to_string(rd_kafka_outq_len(impl_->rk.get())) + " message(s) undelivered");
  return kafka::FromKafkaError(e, "kafka: flush");
}

void KafkaProducer::Poll() { rd_kafka_poll(impl_->rk.get(), 0); }

}  // namespace ef
