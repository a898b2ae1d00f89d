// JSON exposure events → Event, with simdjson (on-demand). Forms:
//   {"user_id": "u1", "item_id": "i9", "ts": 1763800000123}
//   {"user_id": "u1", "items": ["i9", "i10"], "ts": ...}
// Field names from EventsConfig. IDs may be strings or integers (integers are
// used as their decimal text exactly as written in the JSON, e.g. 42 -> "42";
// negative integers allowed; floats/bools/objects are wrong type). ts is a number
// in events.time_unit (ms or s; a float in "s" keeps its millisecond part); when
// absent or null the Kafka message timestamp (ms) is used if > 0.
// If items_field is present it is used (item_field is then ignored), else item_field.
// Time checks happen in Decode with the `now_ms` given (clock at the edge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "event/event.h"

namespace ef {

class Decoder {
 public:
  // window/bucket come from FilterConfig: an event whose bucket expired
  // (bucket start + bucket + window <= now) is kTooOld.
  Decoder(const EventsConfig& events, const FilterConfig& filter);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes one message payload. Returns kNone and fills *out on success. The
  // payload need not be padded or NUL-terminated (the decoder copies into its own
  // padded buffer when needed). kafka_ts_ms <= 0 means "no message timestamp".
  // Not thread-safe: one Decoder per thread.
  RejectReason Decode(const char* data, size_t len, int64_t kafka_ts_ms, int64_t now_ms,
                      Event* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef
