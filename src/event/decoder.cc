#include "event/decoder.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloom/keys.h"
#include "event/json_scan.h"

namespace ef {
namespace {

namespace od = simdjson::ondemand;
using json::ConsumePlainString;
using json::IsDigit;
using json::KeyHasEscape;
using json::NumberToken;
using json::SplitNumber;
using json::TrimRight;

// 9999-12-31T23:59:59.999Z: the last millisecond a four-digit year can name. Bucket
// names are YYYYMMDD[HH], so later times have no key; also keeps every later
// computation far from int64 overflow.
constexpr int64_t kMaxTsMs = 253402300799999;

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

inline int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

enum class TsParse { kOk, kBad, kNotJson };

// Converts a number token in the configured unit to whole milliseconds, truncating
// any fraction of a millisecond. Works on the decimal digits rather than a double
// so that 1763800000.123 s is exactly 1763800000123 ms (a double would give ...122.99).
TsParse ParseTimestamp(std::string_view token, int unit_shift, int64_t* ms) {
  // Fast path for the common plain integer: 1..15 digits, no sign, no leading zero,
  // so at most 999999999999999, and the year-9999 check below cannot overflow.
  if (token.size() <= 15 && token[0] >= '1' && token[0] <= '9') {
    int64_t v = 0;
    size_t i = 0;
    for (; i < token.size() && IsDigit(token[i]); ++i) v = v * 10 + (token[i] - '0');
    if (i == token.size()) {
      if (unit_shift == 3) {
        if (v > kMaxTsMs / 1000) return TsParse::kBad;
        v *= 1000;
      }
      if (v > kMaxTsMs) return TsParse::kBad;
      *ms = v;
      return TsParse::kOk;
    }
  }
  const NumberToken n = SplitNumber(token);
  if (!n.valid) return TsParse::kNotJson;
  const auto digit_at = [&n](int64_t k) -> int {
    const int64_t int_len = static_cast<int64_t>(n.int_digits.size());
    return k < int_len ? n.int_digits[k] - '0' : n.frac_digits[k - int_len] - '0';
  };
  const int64_t total =
      static_cast<int64_t>(n.int_digits.size()) + static_cast<int64_t>(n.frac_digits.size());
  bool nonzero = false;
  for (int64_t k = 0; k < total && !nonzero; ++k) nonzero = digit_at(k) != 0;
  if (!nonzero) {  // 0, -0, 0.000e5: zero whatever the sign
    *ms = 0;
    return TsParse::kOk;
  }
  if (n.negative) return TsParse::kBad;
  // The millisecond value's integer part is the first `whole` mantissa digits
  // (padded with zeros past the end): the decimal point moves by exponent + unit.
  const int64_t whole = static_cast<int64_t>(n.int_digits.size()) + n.exponent + unit_shift;
  uint64_t acc = 0;
  for (int64_t k = 0; k < whole; ++k) {
    acc = acc * 10 + (k < total ? digit_at(k) : 0);
    if (acc > static_cast<uint64_t>(kMaxTsMs)) return TsParse::kBad;
  }
  *ms = static_cast<int64_t>(acc);
  return TsParse::kOk;
}

// A configured field name and whether a raw (still escaped) key can be compared
// with it byte for byte: only when the name holds nothing JSON would escape.
struct FieldName {
  std::string name;
  bool raw_comparable = true;

  explicit FieldName(std::string n) : name(std::move(n)) {
    for (unsigned char c : name) {
      if (c == '"' || c == '\\' || c < 0x20) raw_comparable = false;
    }
  }
};

enum Slot : int {
  kSlotBadKey = -2,  // a key with an invalid escape
  kSlotNone = -1,
  kSlotUser = 0,
  kSlotItems,
  kSlotItem,
  kSlotTs,
  kSlotCluster,  // filter.near_duplicates only
  kSlotSimhash,  // filter.near_duplicates only
  kSlotCount
};

// Depths for json::Validate, the top-level object being depth 1.
constexpr int kFieldDepth = 2;  // a value of the top-level object (which is depth 1)
constexpr int kItemDepth = 3;   // an element of the items array

}  // namespace

struct Decoder::Impl {
  Impl(const EventsConfig& events, const FilterConfig& filter)
      : names{FieldName(events.user_field),    FieldName(events.items_field),
              FieldName(events.item_field),    FieldName(events.time_field),
              FieldName(events.cluster_field), FieldName(events.simhash_field)},
        slot_count(filter.near_duplicates ? kSlotCount : kSlotCluster),
        max_id_bytes(events.max_id_bytes < 0 ? 0 : static_cast<size_t>(events.max_id_bytes)),
        max_items(events.max_items_per_event < 0 ? 0
                                                 : static_cast<size_t>(events.max_items_per_event)),
        max_future_ms(events.max_future_ms),
        unit_shift(events.time_unit == "s" ? 3 : 0),
        bucket_seconds(filter.bucket_seconds),
        window_seconds(filter.window_seconds) {}

  RejectReason Decode(const char* data, size_t len, int64_t kafka_ts_ms, int64_t now_ms,
                      Event* out);

  // What one event's fields said (the first occurrence of each): a reason per
  // field, kNone when it was read well, ranked by Conclude.
  struct Fields {
    bool seen[kSlotCount] = {false, false, false, false, false, false};
    RejectReason user = RejectReason::kNone;
    RejectReason items = RejectReason::kNone;
    RejectReason item = RejectReason::kNone;
    RejectReason ts = RejectReason::kNone;
    RejectReason cluster = RejectReason::kNone;
    RejectReason simhash = RejectReason::kNone;
    std::string_view cluster_id;
    bool simhash_present = false;
    uint64_t simhash_value = 0;
    bool items_null = false;
    bool ts_null = false;
    std::string_view single_item;
    int64_t ts_ms = 0;
  };
  // Every field of the object into *f (user and items straight into *out);
  // kNotJson as soon as any value is malformed, else kNone.
  RejectReason ReadFields(od::object& object, Event* out, Fields* f);
  // The first occurrence of a configured field: its reason, also stored in *f.
  RejectReason ReadField(Slot slot, od::value& value, Event* out, Fields* f);
  // The items field: a list (ReadItems), null (*is_null), else kMissingItem or kNotJson.
  RejectReason ReadItemsField(od::value& value, bool* is_null,
                              std::vector<std::string_view>* items);
  // Ranks the fields' reasons (user, items, timestamp, cluster) and completes *out.
  RejectReason Conclude(const Fields& f, int64_t kafka_ts_ms, int64_t now_ms, Event* out);

  void CopyIn(const char* data, size_t len);
  Slot MatchKey(od::field& field);
  bool Validate(od::value& v, int depth);
  RejectReason ReadId(od::value& v, int depth, RejectReason missing, RejectReason empty,
                      std::string_view* id);
  RejectReason CheckId(std::string_view body, RejectReason empty, std::string_view* id) const;
  // ReadId's cases: a string token (in place when it has no escape), an integer.
  RejectReason ReadStringId(od::value& v, std::string_view token, RejectReason empty,
                            std::string_view* id);
  RejectReason ReadNumberId(std::string_view token, RejectReason missing,
                            std::string_view* id) const;
  RejectReason ReadItems(od::value& v, std::vector<std::string_view>* items);
  RejectReason ReadTimestamp(od::value& v, bool* is_null, int64_t* ms);
  RejectReason ReadSimhash(od::value& v, bool* present, uint64_t* simhash);

  const FieldName names[kSlotCount];
  const int slot_count;  // the slots matched: the cluster fields only with near_duplicates
  const size_t max_id_bytes;
  const size_t max_items;
  const int64_t max_future_ms;
  const int unit_shift;
  const int64_t bucket_seconds;
  const int64_t window_seconds;

  // Start of the oldest bucket not yet expired at now_s, cached per second.
  int64_t OldestLiveBucket(int64_t now_s);
  int64_t cached_now_s = std::numeric_limits<int64_t>::min();
  int64_t cached_oldest_live = 0;

  // The payload copy with SIMDJSON_PADDING readable bytes after it; grows, never
  // shrinks, so the steady state allocates nothing.
  std::unique_ptr<char[]> buf;
  size_t buf_capacity = 0;
  const char* buf_end = nullptr;  // one past the payload copy

  od::parser parser;
  // Unescaped strings live in the parser's string buffer, which the next iterate()
  // reuses: the document is kept here so that Event views stay valid until then.
  od::document doc;
};

void Decoder::Impl::CopyIn(const char* data, size_t len) {
  const size_t need = len + simdjson::SIMDJSON_PADDING;
  if (need > buf_capacity) {
    const size_t capacity = std::max(need, buf_capacity * 2);
    buf.reset(new char[capacity]);
    buf_capacity = capacity;
  }
  if (len > 0) std::memcpy(buf.get(), data, len);
  // Bytes past the payload are never part of a token, but zeroing them keeps
  // stale bytes of an earlier, longer payload out of simdjson's look-ahead.
  std::memset(buf.get() + len, 0, simdjson::SIMDJSON_PADDING);
  buf_end = buf.get() + len;
}

// ExpireAt(BucketStart(ts_s)) <= now_s, the contract's test, holds exactly when
// BucketStart(ts_s) < L, the first bucket start above now_s - bucket - window; as
// bucket starts are aligned, that is ts_s < L. One BucketStart per second instead of
// one per event.
int64_t Decoder::Impl::OldestLiveBucket(int64_t now_s) {
  if (now_s != cached_now_s) {
    cached_now_s = now_s;
    const int64_t expired_before =
        SaturatingAdd(now_s, -SaturatingAdd(bucket_seconds, window_seconds));
    cached_oldest_live = BucketStart(expired_before, bucket_seconds) + bucket_seconds;
  }
  return cached_oldest_live;
}

Slot Decoder::Impl::MatchKey(od::field& field) {
  const char* key = field.key().raw();  // just past the opening quote
  for (int s = 0; s < slot_count; ++s) {
    const FieldName& n = names[s];
    // A raw_comparable name cannot contain the closing quote, so a match of all its
    // bytes followed by '"' is exactly this key.
    // The last byte first: it is in bounds exactly when the whole comparison is, and
    // it rejects most other keys without a memcmp call.
    if (n.raw_comparable && static_cast<size_t>(buf_end - key) > n.name.size() &&
        key[n.name.size()] == '"' && std::memcmp(key, n.name.data(), n.name.size()) == 0) {
      return static_cast<Slot>(s);
    }
  }
  // Slow path, only for keys written with escapes (e.g. "user\u005fid").
  if (!KeyHasEscape(key, buf_end)) return kSlotNone;
  std::string_view unescaped;
  if (field.unescaped_key().get(unescaped) != simdjson::SUCCESS) return kSlotBadKey;
  for (int s = 0; s < slot_count; ++s) {
    if (unescaped == names[s].name) return static_cast<Slot>(s);
  }
  return kSlotNone;
}

// simdjson on-demand skips values it is not asked for without checking them
// (stage 1 only guarantees UTF-8, closed strings and no raw control characters), so
// "[1 2]" or "tru" would pass. Values the event does not use are walked here so
// that not_json means exactly "not one valid JSON object". Events made only of the
// configured fields never get here.
bool Decoder::Impl::Validate(od::value& v, int depth) { return json::Validate(v, depth, buf_end); }

inline RejectReason Decoder::Impl::CheckId(std::string_view body, RejectReason empty,
                                           std::string_view* id) const {
  if (body.empty()) return empty;
  if (body.size() > max_id_bytes) return RejectReason::kIdTooLong;
  *id = body;
  return RejectReason::kNone;
}

// Always inlined: ReadId runs it for every item of a list, and as a call it cost
// 2.5% more instructions per 20-item event (callgrind, BM_DecodeList20).
[[gnu::always_inline]] inline RejectReason Decoder::Impl::ReadStringId(od::value& v,
                                                                       std::string_view token,
                                                                       RejectReason empty,
                                                                       std::string_view* id) {
  if (token.size() < 2 || token.back() != '"') return RejectReason::kNotJson;
  const std::string_view raw = token.substr(1, token.size() - 2);
  if (std::memchr(raw.data(), '\\', raw.size()) == nullptr) {
    if (!ConsumePlainString(v)) return RejectReason::kNotJson;
    return CheckId(raw, empty, id);
  }
  // Unescaped into the parser's string buffer, valid until the next iterate().
  // A separate variable from `raw`: taking the address of one view for both
  // paths made the fast path reload it through memory (a store-forwarding stall).
  std::string_view unescaped;
  if (v.get_string().get(unescaped) != simdjson::SUCCESS) return RejectReason::kNotJson;
  return CheckId(unescaped, empty, id);
}

inline RejectReason Decoder::Impl::ReadNumberId(std::string_view token, RejectReason missing,
                                                std::string_view* id) const {
  const NumberToken n = SplitNumber(token);
  if (!n.valid) return RejectReason::kNotJson;
  if (!n.is_integer) return missing;
  // The decimal text as written (no leading zeros or '+' exist in JSON
  // integers), so 42 and "42" are the same ID.
  if (token.size() > max_id_bytes) return RejectReason::kIdTooLong;
  *id = token;
  return RejectReason::kNone;
}

RejectReason Decoder::Impl::ReadId(od::value& v, int depth, RejectReason missing,
                                   RejectReason empty, std::string_view* id) {
  // Dispatching on the token's first byte is cheaper than value::type() and lets
  // plain strings be used in place, without simdjson's copy into its string buffer.
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return RejectReason::kNotJson;
  switch (token[0]) {
    case '"':
      return ReadStringId(v, token, empty, id);
    case 't':
      return token == "true" ? missing : RejectReason::kNotJson;
    case 'f':
      return token == "false" ? missing : RejectReason::kNotJson;
    case 'n':
      return token == "null" ? missing : RejectReason::kNotJson;
    case '{':
    case '[':
      return Validate(v, depth) ? missing : RejectReason::kNotJson;
    default:  // a number ('-' or a digit), else not JSON
      if (token[0] == '-' || IsDigit(token[0])) return ReadNumberId(token, missing, id);
      return RejectReason::kNotJson;
  }
}

RejectReason Decoder::Impl::ReadItems(od::value& v, std::vector<std::string_view>* items) {
  od::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) return RejectReason::kNotJson;
  // The whole array is walked even after a problem, so that malformed JSON later in
  // it still wins as not_json; the first problem in array order is kept.
  RejectReason reason = RejectReason::kNone;
  size_t count = 0;
  for (auto element : array) {
    od::value value;
    if (std::move(element).get(value) != simdjson::SUCCESS) return RejectReason::kNotJson;
    if (reason == RejectReason::kNone && ++count > max_items) reason = RejectReason::kTooManyItems;
    if (reason != RejectReason::kNone) {
      if (!Validate(value, kItemDepth)) return RejectReason::kNotJson;
      continue;
    }
    std::string_view id;
    const RejectReason r =
        ReadId(value, kItemDepth, RejectReason::kMissingItem, RejectReason::kEmptyItem, &id);
    if (r == RejectReason::kNotJson) return r;
    if (r != RejectReason::kNone) {
      reason = r;
      continue;
    }
    items->push_back(id);
  }
  if (reason == RejectReason::kNone && count == 0) reason = RejectReason::kEmptyItem;
  return reason;
}

RejectReason Decoder::Impl::ReadTimestamp(od::value& v, bool* is_null, int64_t* ms) {
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return RejectReason::kNotJson;
  switch (token[0]) {
    case 'n':
      if (token != "null") return RejectReason::kNotJson;
      *is_null = true;
      return RejectReason::kNone;
    case 't':
      return token == "true" ? RejectReason::kBadTimestamp : RejectReason::kNotJson;
    case 'f':
      return token == "false" ? RejectReason::kBadTimestamp : RejectReason::kNotJson;
    case '"':
    case '{':
    case '[':
      return Validate(v, kFieldDepth) ? RejectReason::kBadTimestamp : RejectReason::kNotJson;
    default:
      break;
  }
  // Not JSON, but what JavaScript and Python's json module emit for non-finite
  // numbers: the producer meant a number, so report the timestamp, not the payload.
  if (token == "NaN" || token == "Infinity" || token == "-Infinity") {
    return RejectReason::kBadTimestamp;
  }
  switch (ParseTimestamp(token, unit_shift, ms)) {
    case TsParse::kOk:
      return RejectReason::kNone;
    case TsParse::kBad:
      return RejectReason::kBadTimestamp;
    case TsParse::kNotJson:
      break;
  }
  return RejectReason::kNotJson;
}

RejectReason Decoder::Impl::ReadSimhash(od::value& v, bool* present, uint64_t* simhash) {
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return RejectReason::kNotJson;
  if (token == "null") return RejectReason::kNone;
  if (token[0] == '"') {
    std::string_view text;
    if (v.get_string().get(text) != simdjson::SUCCESS) return RejectReason::kNotJson;
    if (!json::ParseHex64(text, simhash)) return RejectReason::kBadSimhash;
    *present = true;
    return RejectReason::kNone;
  }
  if (IsDigit(token[0])) {
    const NumberToken n = SplitNumber(token);
    if (!n.valid) return RejectReason::kNotJson;
    if (!n.is_integer || !json::ParseUint64(token, simhash)) return RejectReason::kBadSimhash;
    *present = true;
    return RejectReason::kNone;
  }
  if (token[0] == '-')
    return SplitNumber(token).valid ? RejectReason::kBadSimhash : RejectReason::kNotJson;
  return Validate(v, kFieldDepth) ? RejectReason::kBadSimhash : RejectReason::kNotJson;
}

RejectReason Decoder::Impl::Decode(const char* data, size_t len, int64_t kafka_ts_ms,
                                   int64_t now_ms, Event* out) {
  out->user = {};
  out->items.clear();
  out->ts_ms = 0;
  out->cluster = {};
  out->has_simhash = false;
  out->simhash = 0;
  if (data == nullptr) len = 0;
  CopyIn(data, len);

  if (parser.iterate(buf.get(), len, buf_capacity).get(doc) != simdjson::SUCCESS) {
    return RejectReason::kNotJson;
  }
  od::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return RejectReason::kNotJson;
  Fields f;
  if (ReadFields(object, out, &f) == RejectReason::kNotJson) return RejectReason::kNotJson;
  // Trailing content after the object ("{...}{...}", "{...}]"): the document has
  // no at_end() in simdjson 3.0, but its location is out of bounds exactly there.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return RejectReason::kNotJson;
  return Conclude(f, kafka_ts_ms, now_ms, out);
}

inline RejectReason Decoder::Impl::ReadFields(od::object& object, Event* out, Fields* f) {
  // Every field is visited (field order is free and a malformed value anywhere makes
  // the payload not_json); per-field outcomes are ranked only at the end (Conclude).
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field) != simdjson::SUCCESS) return RejectReason::kNotJson;
    const Slot slot = MatchKey(field);
    if (slot == kSlotBadKey) return RejectReason::kNotJson;
    od::value& value = field.value();
    // Duplicate keys: the first occurrence wins; later ones are only validated.
    if (slot == kSlotNone || f->seen[slot]) {
      if (!Validate(value, kFieldDepth)) return RejectReason::kNotJson;
      continue;
    }
    f->seen[slot] = true;
    if (ReadField(slot, value, out, f) == RejectReason::kNotJson) return RejectReason::kNotJson;
  }
  return RejectReason::kNone;
}

inline RejectReason Decoder::Impl::ReadField(Slot slot, od::value& value, Event* out, Fields* f) {
  switch (slot) {
    case kSlotUser:
      return f->user = ReadId(value, kFieldDepth, RejectReason::kMissingUser,
                              RejectReason::kEmptyUser, &out->user);
    case kSlotItems:
      return f->items = ReadItemsField(value, &f->items_null, &out->items);
    case kSlotItem:
      return f->item = ReadId(value, kFieldDepth, RejectReason::kMissingItem,
                              RejectReason::kEmptyItem, &f->single_item);
    case kSlotTs:
      return f->ts = ReadTimestamp(value, &f->ts_null, &f->ts_ms);
    case kSlotCluster:
      if (TrimRight(value.raw_json_token()) == "null") return RejectReason::kNone;
      return f->cluster = ReadId(value, kFieldDepth, RejectReason::kBadCluster,
                                 RejectReason::kBadCluster, &f->cluster_id);
    case kSlotSimhash:
      return f->simhash = ReadSimhash(value, &f->simhash_present, &f->simhash_value);
    default:
      return RejectReason::kNone;
  }
}

inline RejectReason Decoder::Impl::ReadItemsField(od::value& value, bool* is_null,
                                                  std::vector<std::string_view>* items) {
  const std::string_view token = TrimRight(value.raw_json_token());
  if (token == "null") {
    *is_null = true;
    return RejectReason::kNone;
  }
  if (!token.empty() && token[0] == '[') return ReadItems(value, items);
  // Wrong type, unless the token is not even JSON.
  std::string_view ignored;
  const RejectReason r =
      ReadId(value, kFieldDepth, RejectReason::kMissingItem, RejectReason::kMissingItem, &ignored);
  return r == RejectReason::kNotJson ? r : RejectReason::kMissingItem;
}

RejectReason Decoder::Impl::Conclude(const Fields& f, int64_t kafka_ts_ms, int64_t now_ms,
                                     Event* out) {
  if (!f.seen[kSlotUser]) return RejectReason::kMissingUser;
  if (f.user != RejectReason::kNone) return f.user;
  if (!IsValidUserId(out->user)) return RejectReason::kUserLeadingBrace;

  const bool item_list = f.seen[kSlotItems] && !f.items_null;
  if (item_list) {
    if (f.items != RejectReason::kNone) return f.items;
  } else if (f.seen[kSlotItem]) {
    if (f.item != RejectReason::kNone) return f.item;
    out->items.push_back(f.single_item);
  } else {
    return RejectReason::kMissingItem;
  }

  int64_t ts_ms = f.ts_ms;
  if (!f.seen[kSlotTs] || f.ts_null) {
    if (kafka_ts_ms <= 0) return RejectReason::kMissingTimestamp;
    ts_ms = kafka_ts_ms;
  } else if (f.ts != RejectReason::kNone) {
    return f.ts;
  }
  if (ts_ms > SaturatingAdd(now_ms, max_future_ms)) return RejectReason::kFutureTimestamp;
  if (FloorDiv(ts_ms, 1000) < OldestLiveBucket(FloorDiv(now_ms, 1000))) {
    return RejectReason::kTooOld;
  }
  // Rule 4, revision 2: an event stamped ahead of the clock is written into the
  // bucket of the clock, which every reader at that time reads.
  out->ts_ms = std::min(ts_ms, now_ms);
  // Content clusters: single-item events only (list events validated them above).
  if (out->items.size() == 1 && !item_list) {
    if (f.cluster != RejectReason::kNone) return f.cluster;
    if (f.simhash != RejectReason::kNone) return f.simhash;
    out->cluster = f.cluster_id;
    out->has_simhash = f.simhash_present;
    out->simhash = f.simhash_value;
  }
  return RejectReason::kNone;
}

Decoder::Decoder(const EventsConfig& events, const FilterConfig& filter)
    : impl_(std::make_unique<Impl>(events, filter)) {}

Decoder::~Decoder() = default;

RejectReason Decoder::Decode(const char* data, size_t len, int64_t kafka_ts_ms, int64_t now_ms,
                             Event* out) {
  const RejectReason r = impl_->Decode(data, len, kafka_ts_ms, now_ms, out);
  // Items are appended while the list is read, before the event is known to be good.
  if (r != RejectReason::kNone) out->items.clear();
  return r;
}

}  // namespace ef
