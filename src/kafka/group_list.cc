#include "kafka/group_list.h"

#include <algorithm>

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"

namespace ef {
namespace {

struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
struct OptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* o) const { rd_kafka_AdminOptions_destroy(o); }
};

Status ListError(rd_kafka_resp_err_t err, const std::string& text, const std::string& servers) {
  const std::string what = "kafka " + servers + ": list consumer groups: " + text;
  if (err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE || err == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION)
    return PermissionDenied(what);
  if (err == RD_KAFKA_RESP_ERR__TIMED_OUT) return Unavailable(what);
  return kafka::FromKafkaError(err, what);
}

}  // namespace

StatusOr<std::vector<std::string>> ListConsumerGroups(const KafkaConfig& config, int timeout_ms) {
  auto handle = kafka::NewConsumerHandle(config);
  if (!handle.ok()) return handle.status();
  kafka::HandlePtr rk = std::move(handle.value());
  kafka::QueuePtr queue(rd_kafka_queue_new(rk.get()));
  std::unique_ptr<rd_kafka_AdminOptions_t, OptionsDeleter> options(
      rd_kafka_AdminOptions_new(rk.get(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS));
  char err[512];
  if (rd_kafka_AdminOptions_set_request_timeout(options.get(), timeout_ms, err, sizeof err))
    return InvalidArgument(std::string("kafka: list consumer groups: ") + err);
  rd_kafka_ListConsumerGroups(rk.get(), options.get(), queue.get());
  // The request timeout bounds the answer; a little more for the event itself.
  std::unique_ptr<rd_kafka_event_t, EventDeleter> event(
      rd_kafka_queue_poll(queue.get(), timeout_ms + 1000));
  if (!event)
    return Unavailable("kafka " + config.bootstrap_servers +
                       ": list consumer groups: no answer in time");
  if (rd_kafka_resp_err_t e = rd_kafka_event_error(event.get()))
    return ListError(e, rd_kafka_event_error_string(event.get()), config.bootstrap_servers);
  const rd_kafka_ListConsumerGroups_result_t* result =
      rd_kafka_event_ListConsumerGroups_result(event.get());
  size_t n_errors = 0;
  const rd_kafka_error_t** errors = rd_kafka_ListConsumerGroups_result_errors(result, &n_errors);
  if (n_errors > 0)
    return ListError(rd_kafka_error_code(errors[0]), rd_kafka_error_string(errors[0]),
                     config.bootstrap_servers);
  size_t n = 0;
  const rd_kafka_ConsumerGroupListing_t** valid =
      rd_kafka_ListConsumerGroups_result_valid(result, &n);
  std::vector<std::string> groups;
  for (size_t i = 0; i < n; ++i)
    groups.emplace_back(rd_kafka_ConsumerGroupListing_group_id(valid[i]));
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  return groups;
}

}  // namespace ef
