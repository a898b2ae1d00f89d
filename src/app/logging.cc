#include "app/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "common/log_fields.h"
#include "serve/request.h"  // AppendJsonString: the one JSON string writer

namespace ef::app {
namespace {

constexpr const char* kLoggerName = "exposure-filter";

std::string& CurrentFormat() {
  static std::string format = "text";
  return format;
}

std::string LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

// One JSON object per line; the fields of common/log_fields.h as members.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const std::string line = JsonLogLine(ms, LevelName(msg.level),
                                         std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::string JsonLogLine(int64_t unix_ms, const std::string& level, std::string_view message) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char time[80];  // 24 bytes in practice; room for any int the compiler imagines
  std::snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  std::string out = "{\"time\":\"";
  out += time;
  out += "\",\"level\":";
  serve::AppendJsonString(level, &out);
  out += ",\"message\":";
  serve::AppendJsonString(message, &out);
  for (const LogField& f : CurrentLogFields()) {
    out.push_back(',');
    serve::AppendJsonString(f.name, &out);
    out.push_back(':');
    serve::AppendJsonString(f.value, &out);
  }
  out.push_back('}');
  return out;
}

void SetUpLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::get(kLoggerName);
  if (!logger) {
    logger = spdlog::stderr_color_mt(kLoggerName);
    spdlog::set_default_logger(logger);
  }
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_formatter(
        std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v"));
  }
  logger->set_level(spdlog::level::from_str(level));
  CurrentFormat() = format;
}

const std::string& LogFormat() { return CurrentFormat(); }

}  // namespace ef::app
