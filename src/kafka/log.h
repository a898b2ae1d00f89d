// Routes librdkafka's log and error callbacks to spdlog, throttled so that a
// broker that stays down is reported once per state change, not per retry.
#pragma once

#include <librdkafka/rdkafka.h>

#include <string>

namespace ef::kafka {

void InstallLogging(rd_kafka_conf_t* conf);
// Logs at warn level unless the same error code was logged in the last 10 s.
void LogThrottled(rd_kafka_resp_err_t err, const std::string& message);

}  // namespace ef::kafka
