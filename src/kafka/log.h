// Routes librdkafka's log and error callbacks to spdlog. A broker connection
// failure is reported once, through the error callback (LogThrottled: once per
// error code per 10 s, across handles), so that a broker that stays down is not
// reported per retry; librdkafka's own log line of it (facility FAIL) is debug.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ef::kafka {

void InstallLogging(rd_kafka_conf_t* conf);

// An offset reset librdkafka made because the fetch position was no longer on
// the broker ("Offset out of range": deleted by retention): fetching goes on at
// `to`, and the messages from `from` to `to` - 1 are never read. librdkafka 2.0
// reports it (with auto.offset.reset earliest or latest) only as a warning in
// its log, e.g. "exposures [0]: offset reset (at offset 500, broker 1) to cached
// BEGINNING offset 2498: fetch failed due to requested offset not available on
// the broker: Broker: Offset out of range".
struct OffsetReset {
  std::string topic;
  int32_t partition = -1;
  int64_t from = -1;  // the position that was gone
  int64_t to = -1;    // where fetching goes on
};
// Parses one librdkafka log line (facility and text); false unless it is such a
// reset from a known position (a reset for want of a committed offset is not).
bool ParseOffsetReset(std::string_view fac, std::string_view text, OffsetReset* out);
// `listener` is called, on a librdkafka thread, for every such reset of handle
// `rk` (a handle whose conf went through InstallLogging); an empty listener
// removes it. Thread-safe.
void SetOffsetResetListener(const rd_kafka_t* rk, std::function<void(const OffsetReset&)> listener);
// Logs at warn level unless the same error code was logged in the last 10 s.
void LogThrottled(rd_kafka_resp_err_t err, const std::string& message);

}  // namespace ef::kafka
