#include "kafka/handles.h"

namespace ef::kafka {

Status SetConf(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    return InvalidArgument("kafka property '" + name + "': " + err);
  }
  return Status::Ok();
}

Status FromKafkaError(rd_kafka_resp_err_t err, const std::string& what) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
  std::string msg = what + ": " + rd_kafka_err2str(err);
  switch (err) {
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
      return PermissionDenied(msg);
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return Internal(msg);
    default:
      return Unavailable(msg);
  }
}

}  // namespace ef::kafka
