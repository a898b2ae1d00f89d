// JSON exposure events -> Event, with simdjson (on-demand). Forms:
//   {"user_id": "u1", "item_id": "i9", "ts": 1763800000123}
//   {"user_id": "u1", "items": ["i9", "i10"], "ts": ...}
// Field names from EventsConfig (user_field, item_field, items_field, time_field);
// field order is free; other fields are ignored (but must be valid JSON). The full
// rules, with the reject reasons, are in docs/EVENTS.md. In short:
// - The payload must be exactly one JSON object (RFC 8259, UTF-8, at most 1023 levels
//   of nesting counting the object itself), else kNotJson. Malformed JSON anywhere,
//   even in an ignored field, is kNotJson and outranks every other reason.
// - Duplicate keys: the first occurrence wins (later ones are only validated). Keys
//   are compared after unescaping ("user\u005fid" is user_id); names are case-sensitive.
// - IDs: a string (unescaped; views may point into the decoder's buffers) or an
//   integer, used as its decimal text exactly as written (42 -> "42", -7 -> "-7",
//   any number of digits). Floats, booleans, null, objects and arrays are the wrong
//   type: kMissingUser / kMissingItem. "" is kEmptyUser / kEmptyItem. Longer than
//   max_id_bytes (unescaped bytes; for integers, digits and sign) is kIdTooLong. A
//   user ID whose first unescaped byte is '}' is kUserLeadingBrace (its keys would
//   have an empty Redis Cluster hash tag: docs/FORMAT.md rule 4).
// - Items: if items_field is present and not null it is used (item_field is then
//   ignored) and must be a non-empty array of IDs (empty: kEmptyItem; not an
//   array: kMissingItem; more than max_items_per_event: kTooManyItems; a bad element
//   rejects the event with that element's reason, the first problem in array order
//   winning). Else item_field is used; neither present is kMissingItem.
// - ts: a number in events.time_unit ("s" or else milliseconds), converted exactly
//   from its decimal text, fraction of a millisecond truncated (1763800000.1239 s ->
//   1763800000123 ms). Negative, later than 9999-12-31T23:59:59.999Z, a string,
//   boolean, object, array, or NaN/Infinity/-Infinity: kBadTimestamp. Absent or
//   null: the Kafka message timestamp if > 0, else kMissingTimestamp. Then
//   ts > now_ms + max_future_ms is kFutureTimestamp, and an event whose bucket has
//   expired (ExpireAt(BucketStart(ts_s, bucket), bucket, window) <= now_s) kTooOld.
//   An accepted event's ts_ms is min(ts, now_ms): one stamped ahead of the clock
//   (by at most max_future) is written into the bucket of now (docs/FORMAT.md rule
//   4, revision 2), so that readers at the processing time see it.
// - With filter.near_duplicates (else both fields are only validated as JSON,
//   like any other field), single-item events only: events.cluster_field is the
//   item's content cluster, an ID by the rules above (wrong type or "":
//   kBadCluster; too long: kIdTooLong), null or absent = none; events.simhash_field
//   is its fingerprint, an integer 0..2^64-1 or a string of exactly 16 hex digits
//   (else kBadSimhash), null or absent = none. In list events both are validated
//   and ignored (docs/CONTENT.md rule 5).
// - Ranking when several fields are bad: not_json, then user, then items, then
//   time reasons, then cluster and simhash.
// Time checks happen in Decode with the `now_ms` given (clock at the edge).
// Preconditions (checked by the config loader): filter.bucket_seconds > 0.
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

  // Decodes one message payload. Returns kNone and fills *out on success; on a
  // reject *out holds no items and its other fields are unspecified. The payload
  // need not be padded or NUL-terminated and may be freed right after the call (the
  // decoder copies it into its own padded buffer). The views in *out stay valid
  // until the next Decode call on this Decoder. *out's items vector is cleared and
  // refilled, so reusing one Event keeps its capacity: in the steady state Decode
  // allocates nothing (buffers grow to the largest payload seen and stay).
  // kafka_ts_ms <= 0 means "no message timestamp".
  // Not thread-safe: one Decoder per thread.
  RejectReason Decode(const char* data, size_t len, int64_t kafka_ts_ms, int64_t now_ms,
                      Event* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef
