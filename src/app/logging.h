// The commands' log: spdlog to stderr, as text (the default) or JSON lines
// (log.format json: one object per line with "time", "level", "message" and the
// structured fields of common/log_fields.h, for Loki, ELK and the like).
#pragma once

#include <string>

namespace ef::app {

// Sets (or changes: a later call replaces level and format) the default logger.
// level: trace|debug|info|warn|error|off; format: text|json.
void SetUpLogging(const std::string& level, const std::string& format = "text");

// The format of the last SetUpLogging ("text" before any).
const std::string& LogFormat();

// One JSON line for a message, as the json format writes it (without the
// newline): {"time":"2026-12-02T04:30:00.123Z","level":"warn","message":"..."}
// and then the fields in their order. `unix_ms` is the time.
std::string JsonLogLine(int64_t unix_ms, const std::string& level, std::string_view message);

}  // namespace ef::app
