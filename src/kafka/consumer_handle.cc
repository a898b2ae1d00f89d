#include "kafka/consumer_handle.h"

#include "kafka/consumer.h"
#include "kafka/log.h"

namespace ef::kafka {

StatusOr<HandlePtr> NewConsumerHandle(
    const KafkaConfig& config, const std::vector<std::pair<std::string, std::string>>& forced,
    const std::function<void(rd_kafka_conf_t*)>& customize) {
  ConfPtr conf(rd_kafka_conf_new());
  for (const auto& [k, v] : ConsumerDefaults(config)) EF_RETURN_IF_ERROR(SetConf(conf.get(), k, v));
  for (const auto& [k, v] : config.properties)
    EF_RETURN_IF_ERROR(SetConf(conf.get(), k, v).Prefixed("kafka.properties"));
  for (const auto& [k, v] : forced) EF_RETURN_IF_ERROR(SetConf(conf.get(), k, v));
  InstallLogging(conf.get());
  if (customize) customize(conf.get());
  char err[512];
  HandlePtr rk(rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof err));
  if (!rk) return InvalidArgument(std::string("kafka: cannot create consumer: ") + err);
  conf.release();  // owned by rk now
  return rk;
}

Status CheckConsumerConfig(const KafkaConfig& config) {
  // Silent: a check prints its verdict, not what the broker threads said in
  // the moment the handle lived (an unresolvable host, logged to stdout by the
  // default logger, once broke config check's YAML).
  auto rk = NewConsumerHandle(config, {}, [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    rd_kafka_conf_set_error_cb(conf, [](rd_kafka_t*, int, const char*, void*) {});
  });
  if (!rk.ok()) return rk.status();
  // Never subscribed: nothing to leave, no coordinator to wait for.
  rd_kafka_destroy_flags(rk->release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  return Status::Ok();
}

const std::string* TopicNames::Intern(const char* name) {
  for (const auto& t : names_)
    if (*t == name) return t.get();
  names_.push_back(std::make_unique<std::string>(name));
  return names_.back().get();
}

Message ToMessage(const rd_kafka_message_t& msg, const std::string* topic) {
  Message m;
  m.topic = topic;
  m.partition = msg.partition;
  m.offset = msg.offset;
  m.payload = static_cast<const char*>(msg.payload);
  m.len = msg.len;
  rd_kafka_timestamp_type_t tstype;
  m.timestamp_ms = rd_kafka_message_timestamp(&msg, &tstype);
  return m;
}

}  // namespace ef::kafka
