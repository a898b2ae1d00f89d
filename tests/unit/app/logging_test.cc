// app/logging.h: the JSON line format of log.format json, and common/log_fields.h.
#include "app/logging.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/log_fields.h"

namespace ef::app {
namespace {

// 2026-12-02T04:30:00.123Z
constexpr int64_t kWhen = 1796185800123;

TEST_CASE("json log lines: time level and message as members", "[logging]") {
  const std::string line = JsonLogLine(kWhen, "warn", "redis: key 'a' lost");
  const auto j = nlohmann::json::parse(line);
  CHECK(j.size() == 3);
  CHECK(j["time"] == "2026-12-02T04:30:00.123Z");
  CHECK(j["level"] == "warn");
  CHECK(j["message"] == "redis: key 'a' lost");
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("json log lines: quotes backslashes and control bytes are escaped", "[logging]") {
  const std::string message = "a \"b\" \\ c\nd\te\x01";
  const std::string line = JsonLogLine(0, "info", message);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(nlohmann::json::parse(line)["message"] == message);
  CHECK(nlohmann::json::parse(line)["time"] == "1970-01-01T00:00:00.000Z");
}

TEST_CASE("json log lines: the fields of the line being logged are members", "[logging]") {
  // LogWith sets the fields for the duration of one call; CurrentLogFields is
  // what the formatter reads. Outside a call there are none.
  CHECK(CurrentLogFields().size() == 0);
  CHECK(nlohmann::json::parse(JsonLogLine(kWhen, "info", "x")).size() == 3);
  std::string seen;
  {
    const std::initializer_list<LogField> fields = {{"topic", "exposures"}, {"partition", 7}};
    log_internal::SetFields(&fields);
    seen = JsonLogLine(kWhen, "warn", "kafka: offset commit failed for exposures/7");
    log_internal::SetFields(nullptr);
  }
  const auto j = nlohmann::json::parse(seen);
  CHECK(j["topic"] == "exposures");
  CHECK(j["partition"] == "7");
  CHECK(CurrentLogFields().size() == 0);
}

}  // namespace
}  // namespace ef::app
