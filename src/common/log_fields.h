// Structured fields on a log line: with log.format json each field is a member
// of the line's object ({"partition":"3","key":"ef:u:1:20261201",...}); the text
// format prints the message alone, which names them already.
//
//   LogWith(spdlog::level::warn, {{"topic", topic}, {"partition", p}},
//           "kafka: partition {}/{} lost", topic, p);
//
// Contract: the fields are read by the formatter of app/logging.h on the calling
// thread while the line is written (the loggers are synchronous), so they live
// only for the call. Values are text; numbers are formatted with std::to_string.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ef {

struct LogField {
  LogField(std::string_view n, std::string_view v) : name(n), value(v) {}
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  LogField(std::string_view n, T v) : name(n), value(std::to_string(v)) {}

  std::string_view name;
  std::string value;
};

// The fields of the line being written on this thread; empty outside LogWith.
std::initializer_list<LogField> CurrentLogFields();

namespace log_internal {
void SetFields(const std::initializer_list<LogField>* fields);
}  // namespace log_internal

template <typename... Args>
void LogWith(spdlog::level::level_enum level, std::initializer_list<LogField> fields,
             spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (!spdlog::should_log(level)) return;
  log_internal::SetFields(&fields);
  spdlog::log(level, fmt, std::forward<Args>(args)...);
  log_internal::SetFields(nullptr);
}

}  // namespace ef
