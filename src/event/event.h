// A decoded exposure event. Views point into the decoder's buffers and stay
// valid until the next Decode call on the same Decoder.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ef {

struct Event {
  std::string_view user;
  std::vector<std::string_view> items;  // one for the single form, many for the list form
  // Write time, epoch milliseconds: the event time, or the clock (the decoder's
  // now_ms) if the event is stamped later than that. Its bucket is the event's key
  // (docs/FORMAT.md rule 4, revision 2), so readers at the processing time see it.
  int64_t ts_ms = 0;
  // filter.near_duplicates only (docs/CONTENT.md rule 5), single-item events:
  // the item's content cluster (events.cluster_field; "" when absent) and its
  // Simhash fingerprint (events.simhash_field).
  std::string_view cluster;
  bool has_simhash = false;
  uint64_t simhash = 0;
};

// Why an event was rejected. Stable names (RejectReasonName) are metric labels.
enum class RejectReason {
  kNone = 0,
  kNotJson,           // not valid JSON / not an object
  kMissingUser,       // user field absent, null or wrong type
  kEmptyUser,         // user ID is ""
  kUserLeadingBrace,  // user ID starts with '}' (no valid Redis Cluster hash tag)
  kMissingItem,       // neither item field nor items list present (or wrong type)
  kEmptyItem,         // an item ID is "" (or the items list is empty)
  kIdTooLong,         // user or item ID longer than events.max_id_bytes
  kTooManyItems,      // items list longer than events.max_items_per_event
  kBadTimestamp,      // ts present but not a number, negative, or absurd (not representable)
  kMissingTimestamp,  // no ts field and no Kafka message timestamp
  kFutureTimestamp,   // ts later than now + events.max_future
  kTooOld,            // event's bucket has already expired (older than the window)
  kBadCluster,        // near_duplicates: cluster field of the wrong type, empty or too long
  kBadSimhash,        // near_duplicates: simhash field not a 64-bit unsigned integer or 16 hex digits
  kCount_,
};

// "not_json", "missing_user", ... (docs/EVENTS.md); "none" for kNone and "unknown"
// for anything out of range.
const char* RejectReasonName(RejectReason r);

}  // namespace ef
