// Coalescer (pipeline/coalescer.h): events → one BitBatch entry per key, against
// contract v1 (rules 2 and 4) recomputed here from the formulas.
#include "pipeline/coalescer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "config/config.h"
#include "event/event.h"

namespace ef {
namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kHour = 3600;
// 2025-11-22T08:26:40.123Z.
constexpr int64_t kTsMs = 1763800000123;

Layout DefaultLayout() {
  StatusOr<Layout> l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  return *l;
}

// Contract rule 2, written out: p_i = ((h1 + i*h2) mod 2^64) mod m.
std::vector<uint32_t> ContractPositions(const Layout& layout, std::string_view item) {
  const Hash128 h = HashItem(item, layout.seed);
  std::vector<uint32_t> out;
  for (uint64_t i = 0; i < layout.k; ++i) {
    const uint64_t x = h.h1 + i * h.h2;  // uint64_t arithmetic is mod 2^64
    out.push_back(static_cast<uint32_t>(x % layout.m));
  }
  return out;
}

// Floor division of epoch ms to seconds (negative times round down).
int64_t FloorSeconds(int64_t ms) { return ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000); }

struct Expected {
  std::set<uint32_t> positions;
  int64_t expire_at = 0;
};

// What the batch must hold for `events`: key → positions and expiry (rule 4).
std::map<std::string, Expected> Model(const Layout& layout, const std::vector<Event>& events) {
  std::map<std::string, Expected> model;
  for (const Event& e : events) {
    const int64_t bucket = BucketStart(FloorSeconds(e.ts_ms), layout.bucket_seconds);
    Expected& x = model[MakeKey(layout.prefix, e.user, bucket, layout.bucket_seconds)];
    x.expire_at = ExpireAt(bucket, layout.bucket_seconds, layout.window_seconds);
    for (std::string_view item : e.items) {
      for (uint32_t p : ContractPositions(layout, item)) x.positions.insert(p);
    }
  }
  return model;
}

Event Ev(std::string_view user, std::vector<std::string_view> items, int64_t ts_ms) {
  Event e;
  e.user = user;
  e.items = std::move(items);
  e.ts_ms = ts_ms;
  return e;
}

// Checks a sealed batch against the model: exactly its keys, once each, with
// positions sorted, unique and equal to the model's, and the model's expiry.
void CheckBatch(const BitBatch& batch, const std::map<std::string, Expected>& model) {
  REQUIRE(batch.size == model.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < batch.size; ++i) {
    const KeyBits& kb = batch.keys[i];
    INFO("key " << kb.key);
    CHECK(seen.insert(kb.key).second);  // one entry per key
    auto it = model.find(kb.key);
    REQUIRE(it != model.end());
    CHECK(std::is_sorted(kb.positions.begin(), kb.positions.end()));
    CHECK(std::adjacent_find(kb.positions.begin(), kb.positions.end()) == kb.positions.end());
    CHECK(std::set<uint32_t>(kb.positions.begin(), kb.positions.end()) == it->second.positions);
    CHECK(kb.positions.size() == it->second.positions.size());
    CHECK(kb.expire_at == it->second.expire_at);
  }
}

void AddAll(Coalescer& c, const std::vector<Event>& events) {
  for (const Event& e : events) c.Add(e);
}

TEST_CASE("Coalescer: one event sets its k contract positions in its user-day key", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  CHECK(c.empty());
  const std::vector<Event> events = {Ev("u1", {"i9"}, kTsMs)};
  AddAll(c, events);
  CHECK_FALSE(c.empty());
  c.Seal();
  CheckBatch(c.batch(), Model(layout, events));
  // The key named as rule 4 spells it, and the expiry as bucket end + window.
  const int64_t day_start = (kTsMs / 1000) / kDay * kDay;
  REQUIRE(c.batch().size == 1);
  CHECK(c.batch().keys[0].key == "ef:{u1}:20251122");
  CHECK(c.batch().keys[0].expire_at == day_start + kDay + layout.window_seconds);
  CHECK(c.batch().TotalBits() ==
        std::set<uint32_t>(c.batch().keys[0].positions.begin(), c.batch().keys[0].positions.end())
            .size());
}

TEST_CASE("Coalescer: events of one user and bucket share one key", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const int64_t day_start_ms = (kTsMs / 1000) / kDay * kDay * 1000;
  const std::vector<Event> events = {
      Ev("u1", {"i1"}, day_start_ms),                    // first ms of the day
      Ev("u1", {"i2"}, kTsMs),                           // same day
      Ev("u1", {"i3"}, day_start_ms + kDay * 1000 - 1),  // last ms of the day
  };
  AddAll(c, events);
  c.Seal();
  REQUIRE(c.batch().size == 1);
  CheckBatch(c.batch(), Model(layout, events));
}

TEST_CASE("Coalescer: different users and different buckets get different keys", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const int64_t day_start_ms = (kTsMs / 1000) / kDay * kDay * 1000;
  const std::vector<Event> events = {
      Ev("u1", {"i1"}, kTsMs),
      Ev("u2", {"i1"}, kTsMs),                    // other user, same item and day
      Ev("u1", {"i2"}, day_start_ms - 1),         // u1, the day before (last ms)
      Ev("u1", {"i3"}, kTsMs - 3 * kDay * 1000),  // u1, three days before
      Ev("u2", {"i4"}, kTsMs),                    // u2 again, same day as before
  };
  AddAll(c, events);
  c.Seal();
  CHECK(c.batch().size == 4);
  CheckBatch(c.batch(), Model(layout, events));
}

TEST_CASE("Coalescer: a list-form event sets every item's positions", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const std::vector<Event> events = {
      Ev("u1", {"a", "b", "c", "d", "e"}, kTsMs),
  };
  AddAll(c, events);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, events));
}

TEST_CASE("Coalescer: repeated items and repeated events are deduped per key", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const std::vector<Event> events = {
      Ev("u1", {"i1", "i1", "i2"}, kTsMs),
      Ev("u1", {"i2", "i1"}, kTsMs + 1000),
      Ev("u1", {"i1"}, kTsMs),
  };
  AddAll(c, events);
  c.Seal();
  REQUIRE(c.batch().size == 1);
  CheckBatch(c.batch(), Model(layout, events));
  // Two distinct items: at most 2k positions (fewer only when their positions
  // collide).
  CHECK(c.batch().keys[0].positions.size() <= 2 * layout.k);
}

TEST_CASE("Coalescer: adding after Seal and sealing again keeps keys sorted and unique",
          "[pipeline]") {
  // The retry path: events that arrive while a batch is being retried join it.
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  std::vector<Event> events = {Ev("u1", {"i1", "i2"}, kTsMs), Ev("u2", {"i1"}, kTsMs)};
  AddAll(c, events);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, events));
  const std::vector<Event> more = {Ev("u1", {"i3", "i1"}, kTsMs), Ev("u3", {"i1"}, kTsMs)};
  AddAll(c, more);
  c.Seal();
  events.insert(events.end(), more.begin(), more.end());
  CheckBatch(c.batch(), Model(layout, events));
}

TEST_CASE("Coalescer: Clear starts a fresh batch, and reused storage keeps nothing old", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const std::vector<Event> first = {
      Ev("u1", {"a", "b", "c", "d"}, kTsMs),
      Ev("u2", {"e", "f"}, kTsMs),
  };
  AddAll(c, first);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, first));
  c.Clear();
  CHECK(c.empty());
  CHECK(c.batch().size == 0);
  // u2 now lands in slot 0, which held u1's positions and key; u1 is not in it.
  const std::vector<Event> second = {Ev("u2", {"z"}, kTsMs), Ev("u1", {"y"}, kTsMs - kDay * 1000)};
  AddAll(c, second);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, second));
}

TEST_CASE("Coalescer: hour buckets name keys YYYYMMDDHH and expire at hour end + window",
          "[pipeline]") {
  FilterConfig filter;
  filter.bucket_seconds = kHour;
  filter.window_seconds = 24 * kHour;
  filter.items_per_bucket = 20;
  StatusOr<Layout> layout = LayoutFromConfig(filter);
  REQUIRE(layout.ok());
  Coalescer c(*layout);
  const std::vector<Event> events = {
      Ev("u1", {"i1"}, kTsMs), Ev("u1", {"i2"}, kTsMs + kHour * 1000),  // next hour: another key
  };
  AddAll(c, events);
  c.Seal();
  CHECK(c.batch().size == 2);
  CheckBatch(c.batch(), Model(*layout, events));
  const int64_t hour_start = (kTsMs / 1000) / kHour * kHour;
  bool found = false;
  for (size_t i = 0; i < c.batch().size; ++i) {
    if (c.batch().keys[i].key == "ef:{u1}:2025112208") {
      found = true;
      CHECK(c.batch().keys[i].expire_at == hour_start + kHour + 24 * kHour);
    }
  }
  CHECK(found);
}

TEST_CASE("Coalescer: prefix, seed and m come from the layout", "[pipeline]") {
  Layout layout = DefaultLayout();
  layout.prefix = "x:";
  layout.seed = 12345;
  layout.m = 4294967291u;  // the largest prime below 2^32: exercises the 64-bit mod
  layout.k = 5;
  Coalescer c(layout);
  const std::vector<Event> events = {Ev("42", {"hello", "7"}, kTsMs)};
  AddAll(c, events);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, events));
  REQUIRE(c.batch().size == 1);
  CHECK(c.batch().keys[0].key == "x:{42}:20251122");
  // The seed matters: seed 0 gives other positions for the same item.
  CHECK(ContractPositions(layout, "hello") != [&] {
    Layout l0 = layout;
    l0.seed = 0;
    return ContractPositions(l0, "hello");
  }());
}

TEST_CASE("Coalescer: times before the epoch round down to their bucket", "[pipeline]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  const std::vector<Event> events = {
      Ev("u1", {"i1"}, -1),     // 1969-12-31T23:59:59.999Z
      Ev("u2", {"i1"}, -1000),  // 1969-12-31T23:59:59Z
      Ev("u3", {"i1"}, 0),      // 1970-01-01
  };
  AddAll(c, events);
  c.Seal();
  CheckBatch(c.batch(), Model(layout, events));
  std::set<std::string> keys;
  for (size_t i = 0; i < c.batch().size; ++i) keys.insert(c.batch().keys[i].key);
  CHECK(keys == std::set<std::string>{"ef:{u1}:19691231", "ef:{u2}:19691231", "ef:{u3}:19700101"});
}

}  // namespace
}  // namespace ef
