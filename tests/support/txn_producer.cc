#include "support/txn_producer.h"

#include <librdkafka/rdkafka.h>

#include <memory>

namespace ef::test {
namespace {

Status TakeError(rd_kafka_error_t* error, const std::string& what) {
  if (!error) return Status::Ok();
  Status st = Unavailable("kafka transaction: " + what + ": " + rd_kafka_error_string(error));
  rd_kafka_error_destroy(error);
  return st;
}

}  // namespace

Status ProduceTransaction(const std::string& bootstrap_servers, const std::string& topic,
                          const std::vector<TestEvent>& events) {
  static int counter = 0;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::string txn_id = "ef-test-txn-" + std::to_string(++counter);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", bootstrap_servers}, {"transactional.id", txn_id}}) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return InvalidArgument(std::string("kafka transaction: ") + err);
    }
  }
  rd_kafka_t* raw = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!raw) {
    rd_kafka_conf_destroy(conf);
    return InvalidArgument(std::string("kafka transaction: ") + err);
  }
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> rk(raw, rd_kafka_destroy);
  constexpr int kTimeoutMs = 30000;
  EF_RETURN_IF_ERROR(TakeError(rd_kafka_init_transactions(rk.get(), kTimeoutMs), "init"));
  EF_RETURN_IF_ERROR(TakeError(rd_kafka_begin_transaction(rk.get()), "begin"));
  for (const auto& e : events) {
    const std::string value = e.Json();
    rd_kafka_resp_err_t r =
        rd_kafka_producev(rk.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                          RD_KAFKA_V_KEY(const_cast<char*>(e.user.data()), e.user.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (r) return Unavailable(std::string("kafka transaction: produce: ") + rd_kafka_err2str(r));
  }
  return TakeError(rd_kafka_commit_transaction(rk.get(), kTimeoutMs), "commit");
}

}  // namespace ef::test
