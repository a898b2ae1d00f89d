#include "kafka/log.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/log_fields.h"

namespace ef::kafka {
namespace {

std::mutex listeners_mu;
std::map<const rd_kafka_t*, std::function<void(const OffsetReset&)>>& Listeners() {
  static auto* listeners = new std::map<const rd_kafka_t*, std::function<void(const OffsetReset&)>>;
  return *listeners;
}

// Reads a decimal integer at the start of *s and steps over it.
bool TakeInt(std::string_view* s, int64_t* out) {
  const auto r = std::from_chars(s->data(), s->data() + s->size(), *out);
  if (r.ec != std::errc()) return false;
  s->remove_prefix(static_cast<size_t>(r.ptr - s->data()));
  return true;
}

void NoteOffsetReset(const rd_kafka_t* rk, const char* fac, const char* buf) {
  OffsetReset reset;
  if (!ParseOffsetReset(fac, buf, &reset)) return;
  std::function<void(const OffsetReset&)> listener;
  {
    std::lock_guard lock(listeners_mu);
    auto it = Listeners().find(rk);
    if (it == Listeners().end()) return;
    listener = it->second;
  }
  listener(reset);
}

void LogCb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  NoteOffsetReset(rk, fac, buf);
  // syslog levels: 0..3 error, 4 warning, 5..6 info, 7 debug. librdkafka is
  // chatty at info about its own retries: keep those at debug. A broker
  // connection failure (facility FAIL) also reaches ErrorCb with the same text,
  // which reports it throttled: here it is debug, else every failure showed
  // twice (and once more per retry and per handle).
  if (level > 4 || std::string_view(fac) == "FAIL") {
    spdlog::debug("librdkafka {}: {}", fac, buf);
  } else if (level <= 3) {
    LogWith(spdlog::level::err, {{"facility", fac}}, "librdkafka {}: {}", fac, buf);
  } else {
    LogWith(spdlog::level::warn, {{"facility", fac}}, "librdkafka {}: {}", fac, buf);
  }
}

void ErrorCb(rd_kafka_t*, int err, const char* reason, void*) {
  LogThrottled(static_cast<rd_kafka_resp_err_t>(err), std::string("kafka: ") + reason);
}

}  // namespace

bool ParseOffsetReset(std::string_view fac, std::string_view text, OffsetReset* out) {
  if (fac != "OFFSET" || text.find("Offset out of range") == std::string_view::npos) return false;
  // "[thrd:main]: " may come first.
  if (text.rfind("[thrd:", 0) == 0) {
    const size_t end = text.find("]: ");
    if (end == std::string_view::npos) return false;
    text.remove_prefix(end + 3);
  }
  const size_t open = text.find(" [");
  if (open == std::string_view::npos) return false;
  out->topic = std::string(text.substr(0, open));
  text.remove_prefix(open + 2);
  int64_t partition = -1;
  if (!TakeInt(&text, &partition) || partition < 0 || partition > INT32_MAX) return false;
  out->partition = static_cast<int32_t>(partition);
  constexpr std::string_view kAt = "]: offset reset (at offset ";
  if (text.rfind(kAt, 0) != 0) return false;
  text.remove_prefix(kAt.size());
  if (!TakeInt(&text, &out->from)) return false;  // INVALID, BEGINNING: no position
  const size_t to = text.find(") to ");
  if (to == std::string_view::npos) return false;
  text.remove_prefix(to + 5);
  const size_t colon = text.find(':');
  const size_t offset = text.find("offset ");
  if (offset == std::string_view::npos || offset > colon) return false;
  text.remove_prefix(offset + 7);
  return TakeInt(&text, &out->to) && out->from >= 0 && out->to >= 0;
}

void SetOffsetResetListener(const rd_kafka_t* rk,
                            std::function<void(const OffsetReset&)> listener) {
  std::lock_guard lock(listeners_mu);
  if (listener)
    Listeners()[rk] = std::move(listener);
  else
    Listeners().erase(rk);
}

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
