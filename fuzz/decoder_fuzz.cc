// libFuzzer target: Decoder::Decode (event/decoder.h) over arbitrary bytes.
// Each input is decoded by three decoders: the default config (ms, 1-day buckets,
// 256-byte IDs, 10,000 items), a tight one (s, 1-hour buckets, 8-byte IDs, 3 items,
// no future) and one with other field names, each with and without a Kafka message
// timestamp. Properties checked (a violation aborts: a libFuzzer finding):
// - accepted: a non-empty user not starting with '}', 1..max_items_per_event
//   non-empty items, every ID at most max_id_bytes, 0 <= ts <= now + max_future,
//   and the event's bucket not expired (docs/EVENTS.md);
// - rejected: no items left in the event;
// - the same input decodes to the same result again (no state leaks between
//   calls), and the Kafka timestamp changes only time reasons;
// - every view of an accepted event is readable (ASan checks the bytes).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/keys.h"
#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"

namespace {

constexpr int64_t kNowMs = 1763800000123;  // 2025-11-22T08:26:40.123Z
constexpr int64_t kKafkaTsMs = kNowMs - 5000;

struct Setup {
  ef::EventsConfig events;
  ef::FilterConfig filter;
};

std::vector<Setup> Setups() {
  std::vector<Setup> s(3);
  // [0] defaults.
  // [1] tight limits, seconds, hour buckets, nothing in the future.
  s[1].events.time_unit = "s";
  s[1].events.max_id_bytes = 8;
  s[1].events.max_items_per_event = 3;
  s[1].events.max_future_ms = 0;
  s[1].filter.bucket_seconds = 3600;
  s[1].filter.window_seconds = 2 * 3600;
  // [2] other field names (the corpus uses the defaults; mutations find these).
  s[2].events.user_field = "u";
  s[2].events.item_field = "i";
  s[2].events.items_field = "is";
  s[2].events.time_field = "t";
  return s;
}

[[noreturn]] void Fail(const char* what, size_t setup, ef::RejectReason r) {
  std::fprintf(stderr, "decoder_fuzz: config %zu: %s (reason %s)\n", setup, what,
               ef::RejectReasonName(r));
  std::abort();
}

bool IsTimeReason(ef::RejectReason r) {
  return r == ef::RejectReason::kBadTimestamp || r == ef::RejectReason::kMissingTimestamp ||
         r == ef::RejectReason::kFutureTimestamp || r == ef::RejectReason::kTooOld ||
         r == ef::RejectReason::kNone;
}

// An owned copy of a decoded event (the views die at the next Decode).
struct Owned {
  ef::RejectReason reason;
  std::string user;
  std::vector<std::string> items;
  int64_t ts_ms;
  bool operator==(const Owned&) const = default;
};

Owned Copy(ef::RejectReason r, const ef::Event& e) {
  Owned o{r, {}, {}, 0};
  if (r != ef::RejectReason::kNone) return o;
  o.user.assign(e.user.data(), e.user.size());  // reads every byte of the view
  for (std::string_view item : e.items) o.items.emplace_back(item.data(), item.size());
  o.ts_ms = e.ts_ms;
  return o;
}

void CheckAccepted(size_t i, const Setup& s, const ef::Event& e) {
  const auto none = ef::RejectReason::kNone;
  const auto max_id = static_cast<size_t>(s.events.max_id_bytes);
  if (e.user.empty()) Fail("accepted with an empty user", i, none);
  if (e.user.size() > max_id) Fail("accepted user longer than max_id_bytes", i, none);
  if (e.user.front() == '}') Fail("accepted user starting with '}'", i, none);
  if (e.items.empty()) Fail("accepted with no items", i, none);
  if (e.items.size() > static_cast<size_t>(s.events.max_items_per_event))
    Fail("accepted more than max_items_per_event items", i, none);
  for (std::string_view item : e.items) {
    if (item.empty()) Fail("accepted an empty item", i, none);
    if (item.size() > max_id) Fail("accepted item longer than max_id_bytes", i, none);
  }
  if (e.ts_ms < 0) Fail("accepted a negative time", i, none);
  if (e.ts_ms > kNowMs + s.events.max_future_ms) Fail("accepted a time beyond max_future", i, none);
  const int64_t start = ef::BucketStart(e.ts_ms / 1000, s.filter.bucket_seconds);
  if (ef::ExpireAt(start, s.filter.bucket_seconds, s.filter.window_seconds) <= kNowMs / 1000)
    Fail("accepted an event whose bucket has expired", i, none);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Setup> setups = Setups();
  static ef::Decoder d0(setups[0].events, setups[0].filter);
  static ef::Decoder d1(setups[1].events, setups[1].filter);
  static ef::Decoder d2(setups[2].events, setups[2].filter);
  static ef::Decoder* const decoders[] = {&d0, &d1, &d2};
  const char* payload = reinterpret_cast<const char*>(data);
  ef::Event event;
  for (size_t i = 0; i < setups.size(); ++i) {
    ef::Decoder& decoder = *decoders[i];
    Owned with_ts, without_ts;
    for (int64_t kafka_ts : {kKafkaTsMs, int64_t{0}}) {
      const ef::RejectReason r = decoder.Decode(payload, size, kafka_ts, kNowMs, &event);
      if (r == ef::RejectReason::kNone) {
        CheckAccepted(i, setups[i], event);
      } else if (!event.items.empty()) {
        Fail("rejected event left items", i, r);
      }
      (kafka_ts ? with_ts : without_ts) = Copy(r, event);
    }
    // Decoding again gives the same answer (buffers are reused between calls).
    const ef::RejectReason again = decoder.Decode(payload, size, kKafkaTsMs, kNowMs, &event);
    if (!(Copy(again, event) == with_ts)) Fail("second decode differs", i, again);
    // The message timestamp only matters to the time checks.
    if (!IsTimeReason(with_ts.reason) || !IsTimeReason(without_ts.reason)) {
      if (with_ts.reason != without_ts.reason)
        Fail("Kafka timestamp changed a non-time reason", i, with_ts.reason);
    }
    if (with_ts.reason == ef::RejectReason::kNone && without_ts.reason == ef::RejectReason::kNone &&
        (with_ts.user != without_ts.user || with_ts.items != without_ts.items))
      Fail("Kafka timestamp changed the user or the items", i, with_ts.reason);
    if (with_ts.reason == ef::RejectReason::kMissingTimestamp)
      Fail("missing_timestamp although the message has one", i, with_ts.reason);
  }
  return 0;
}
