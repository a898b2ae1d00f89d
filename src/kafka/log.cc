#include "kafka/log.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <mutex>

namespace ef::kafka {
namespace {

void LogCb(const rd_kafka_t*, int level, const char* fac, const char* buf) {
  // syslog levels: 0..3 error, 4 warning, 5..6 info, 7 debug. librdkafka is
  // chatty at info about its own retries: keep those at debug.
  if (level <= 3) {
    spdlog::error("librdkafka {}: {}", fac, buf);
  } else if (level == 4) {
    spdlog::warn("librdkafka {}: {}", fac, buf);
  } else {
    spdlog::debug("librdkafka {}: {}", fac, buf);
  }
}

void ErrorCb(rd_kafka_t*, int err, const char* reason, void*) {
  LogThrottled(static_cast<rd_kafka_resp_err_t>(err), std::string("kafka: ") + reason);
}

}  // namespace

void LogThrottled(rd_kafka_resp_err_t err, const std::string& message) {
  static std::mutex mu;
  static std::map<int, std::chrono::steady_clock::time_point> last;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = last.find(err);
    if (it != last.end() && now - it->second < std::chrono::seconds(10)) return;
    last[err] = now;
  }
  spdlog::warn("{}", message);
}

void InstallLogging(rd_kafka_conf_t* conf) {
  rd_kafka_conf_set_log_cb(conf, LogCb);
  rd_kafka_conf_set_error_cb(conf, ErrorCb);
}

}  // namespace ef::kafka
