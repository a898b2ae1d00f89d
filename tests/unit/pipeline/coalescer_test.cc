// Coalescer (pipeline/coalescer.h): events → one BitBatch entry per key, against
// contract v1 (rules 2 and 4) recomputed here from the formulas.
#include "pipeline/coalescer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "config/config.h"
#include "event/event.h"
#include "pipeline/key_index.h"

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

// Contract rules 2 and 9, written out: x = (h1 + i*h2) mod 2^64; rule 2 (a
// bucket before v3_from, or not version 3): p_i = x mod m; rule 9: the high word
// of ((x ^ (x >> 32)) * 0xff51afd7ed558ccd mod 2^64) * m.
std::vector<uint32_t> ContractPositions(const Layout& layout, int64_t bucket,
                                        std::string_view item) {
  const Hash128 h = HashItem(item, layout.seed);
  const bool rule9 = layout.v3 && bucket >= layout.v3_from;
  std::vector<uint32_t> out;
  for (uint64_t i = 0; i < layout.k; ++i) {
    const uint64_t x = h.h1 + i * h.h2;  // uint64_t arithmetic is mod 2^64
    const uint64_t y = (x ^ (x >> 32)) * 0xff51afd7ed558ccdULL;
    out.push_back(rule9
                      ? static_cast<uint32_t>((static_cast<unsigned __int128>(y) * layout.m) >> 64)
                      : static_cast<uint32_t>(x % layout.m));
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
      for (uint32_t p : ContractPositions(layout, bucket, item)) x.positions.insert(p);
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

// A new batch of `events` (after a SetStoredRules: its rules apply to all of them).
void Recoalesce(Coalescer& c, const std::vector<Event>& events) {
  c.Clear();
  AddAll(c, events);
  c.Seal();
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

TEST_CASE("Coalescer: Clear starts a fresh batch, and reused storage keeps nothing old",
          "[pipeline]") {
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
  CHECK(ContractPositions(layout, 0, "hello") != [&] {
    Layout l0 = layout;
    l0.seed = 0;
    return ContractPositions(l0, 0, "hello");
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

// Owns the ID strings that random events' views point into.
struct EventSet {
  std::vector<std::string> ids;
  std::vector<Event> events;
};

// `n` events over `users` users and `items` items, 1..max_items items each
// (repeats within an event included), times spread over `days` days.
EventSet RandomEvents(std::mt19937_64& rng, size_t n, uint64_t users, uint64_t items,
                      size_t max_items, int64_t days) {
  EventSet set;
  std::uniform_int_distribution<uint64_t> user(1, users);
  std::uniform_int_distribution<uint64_t> item(1, items);
  std::uniform_int_distribution<size_t> count(1, max_items);
  std::uniform_int_distribution<int64_t> age_ms(0, days * kDay * 1000 - 1);
  std::vector<size_t> counts(n);
  std::vector<int64_t> ts(n);
  for (size_t e = 0; e < n; ++e) {
    set.ids.push_back("user-" + std::to_string(user(rng)));
    counts[e] = count(rng);
    for (size_t i = 0; i < counts[e]; ++i) set.ids.push_back("item-" + std::to_string(item(rng)));
    ts[e] = kTsMs - age_ms(rng);
  }
  size_t next = 0;  // set.ids no longer grows: views into it stay valid
  for (size_t e = 0; e < n; ++e) {
    Event ev;
    ev.user = set.ids[next++];
    for (size_t i = 0; i < counts[e]; ++i) ev.items.push_back(set.ids[next++]);
    ev.ts_ms = ts[e];
    set.events.push_back(std::move(ev));
  }
  return set;
}

TEST_CASE(
    "Coalescer: each key gets its bucket's position rule, also across v3_from, and "
    "SetStoredRules applies to keys added after it",
    "[coalescer][v3]") {
  Layout layout = DefaultLayout();
  REQUIRE(layout.v3);
  REQUIRE(layout.v3_from == 0);
  std::mt19937_64 rng(3);
  const EventSet set = RandomEvents(rng, 3000, 200, 100000, 4, 3);
  // The rollover: buckets from the one two days back on follow rule 9.
  const int64_t switch_bucket = BucketStart(kTsMs / 1000, kDay) - 2 * kDay;
  layout.v3_from = switch_bucket;
  Coalescer c(DefaultLayout());
  c.SetStoredRules(true, switch_bucket, false, 0);
  AddAll(c, set.events);
  c.Seal();
  const std::map<std::string, Expected> model = Model(layout, set.events);
  CheckBatch(c.batch(), model);
  size_t rule2 = 0, rule9 = 0;
  for (size_t i = 0; i < c.batch().size; ++i) {
    const KeyBits& kb = c.batch().keys[i];
    CHECK(kb.rule == layout.RuleFor(kb.bucket_start));
    (kb.rule == PositionRule::kRemix ? rule9 : rule2) += 1;
  }
  CHECK(rule2 > 0);  // both sides of v3_from are in the batch
  CHECK(rule9 > 0);
  // A version-2 stored layout: rule 2 for every key added from now on.
  c.SetStoredRules(false, 0, false, 0);
  Recoalesce(c, set.events);
  Layout v2 = layout.WithoutV3();
  CheckBatch(c.batch(), Model(v2, set.events));
  for (size_t i = 0; i < c.batch().size; ++i)
    CHECK(c.batch().keys[i].rule == PositionRule::kModulo);
}

TEST_CASE(
    "Coalescer: a key with a size class (layout v4, from v4_from on) gets its items and no "
    "stage-0 positions, and the keys before v4_from get both",
    "[coalescer][v4]") {
  const Layout layout = DefaultLayout();
  std::mt19937_64 rng(4);
  const EventSet set = RandomEvents(rng, 3000, 200, 100000, 4, 3);
  const int64_t v4_from = BucketStart(kTsMs / 1000, kDay) - 2 * kDay;
  Layout v4 = layout;
  v4.v4 = true;
  v4.v4_from = v4_from;
  Coalescer c(layout);
  c.SetStoredRules(true, 0, true, v4_from);
  AddAll(c, set.events);
  c.Seal();
  // The keys before v4_from: as a version-3 layout's; the others: the same
  // items, no positions.
  const std::map<std::string, Expected> model = Model(layout, set.events);
  std::map<std::string, size_t> items;  // per key, repeats included
  for (const Event& e : set.events) {
    const int64_t bucket = BucketStart(FloorSeconds(e.ts_ms), kDay);
    items[MakeKey(layout.prefix, e.user, bucket, kDay)] += e.items.size();
  }
  REQUIRE(c.batch().size == model.size());
  size_t classed = 0, unclassed = 0;
  for (size_t i = 0; i < c.batch().size; ++i) {
    const KeyBits& kb = c.batch().keys[i];
    INFO(kb.key);
    REQUIRE(model.count(kb.key) == 1);
    CHECK(kb.classed == v4.HasClass(kb.bucket_start));
    CHECK(kb.items.size() == items[kb.key]);
    if (kb.classed) {
      CHECK(kb.positions.empty());
      ++classed;
    } else {
      CHECK(std::set<uint32_t>(kb.positions.begin(), kb.positions.end()) ==
            model.at(kb.key).positions);
      ++unclassed;
    }
  }
  CHECK(classed > 0);  // both sides of v4_from are in the batch
  CHECK(unclassed > 0);
  // A version-3 stored layout again: every key gets its positions.
  c.SetStoredRules(true, 0, false, 0);
  Recoalesce(c, set.events);
  CheckBatch(c.batch(), model);
  for (size_t i = 0; i < c.batch().size; ++i) CHECK_FALSE(c.batch().keys[i].classed);
}

TEST_CASE("Coalescer: thousands of keys in one batch grow the key index", "[coalescer]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  std::mt19937_64 rng(1);
  // 20,000 events over 6,000 users and 3 days: well over the index's initial
  // 1,024 slots, with most keys seen more than once.
  const EventSet set = RandomEvents(rng, 20000, 6000, 1000000, 3, 3);
  AddAll(c, set.events);
  c.Seal();
  const std::map<std::string, Expected> model = Model(layout, set.events);
  CHECK(model.size() > 5000);
  CheckBatch(c.batch(), model);
}

TEST_CASE("Coalescer: batches after Clear, with the same, other and overlapping keys",
          "[coalescer]") {
  const Layout layout = DefaultLayout();
  Coalescer c(layout);
  std::mt19937_64 rng(2);
  const EventSet big = RandomEvents(rng, 5000, 3000, 100000, 4, 2);
  const EventSet small = RandomEvents(rng, 50, 20, 100000, 4, 2);  // users 1..20: overlap
  const EventSet other = RandomEvents(rng, 3000, 1000000, 100000, 2, 5);
  for (const EventSet* set : {&big, &big, &small, &other, &big, &small, &small}) {
    AddAll(c, set->events);
    c.Seal();
    CheckBatch(c.batch(), Model(layout, set->events));
    c.Clear();
    CHECK(c.empty());
  }
}

TEST_CASE("Coalescer: sealed positions equal a std::set over random inputs for many layouts",
          "[coalescer]") {
  // m covers the one-word bitmap summary (m <= 4096), larger summaries, the
  // sort path for few positions, the sort-only range above 2^18, and layouts
  // where one item's own k positions repeat (k > m, small m).
  struct Case {
    uint32_t m;
    uint32_t k;
  };
  const Case cases[] = {{1, 3},      {7, 12},     {64, 5},       {65, 20},         {3345, 12},
                        {4096, 12},  {4097, 12},  {16384, 7},    {16385, 12},      {100000, 12},
                        {262144, 9}, {262145, 9}, {1000003, 14}, {4294967291u, 12}};
  std::mt19937_64 rng(3);
  for (const Case& tc : cases) {
    Layout layout = DefaultLayout();
    layout.m = tc.m;
    layout.k = tc.k;
    INFO("m " << tc.m << " k " << tc.k);
    Coalescer c(layout);
    for (int round = 0; round < 3; ++round) {
      // Few users so keys collect many items; a small item space so items
      // repeat within and across events.
      const EventSet set = RandomEvents(rng, 400, 30, 300, 12, 2);
      AddAll(c, set.events);
      c.Seal();
      CheckBatch(c.batch(), Model(layout, set.events));
      // Single-item keys (exactly k positions) as well.
      const EventSet single = RandomEvents(rng, 200, 1000000, 1000000, 1, 1);
      AddAll(c, single.events);
      c.Seal();
      std::vector<Event> all = set.events;
      all.insert(all.end(), single.events.begin(), single.events.end());
      CheckBatch(c.batch(), Model(layout, all));
      c.Clear();
    }
  }
}

TEST_CASE("Coalescer: keys over many buckets, days and hours, are named as MakeKey names them",
          "[coalescer]") {
  // Buckets 8 apart share a slot of the bucket-name cache; 40 days of events in
  // random order keep replacing its entries.
  std::mt19937_64 rng(4);
  const EventSet set = RandomEvents(rng, 3000, 50, 1000, 2, 40);
  const Layout days = DefaultLayout();
  Coalescer c(days);
  AddAll(c, set.events);
  c.Seal();
  CheckBatch(c.batch(), Model(days, set.events));

  FilterConfig filter;
  filter.bucket_seconds = kHour;
  filter.window_seconds = 24 * kHour;
  filter.items_per_bucket = 20;
  StatusOr<Layout> hours = LayoutFromConfig(filter);
  REQUIRE(hours.ok());
  Coalescer h(*hours);
  AddAll(h, set.events);
  h.Seal();
  CheckBatch(h.batch(), Model(*hours, set.events));
}

TEST_CASE("KeyIndex: entries are numbered in order - equal hashes are told apart by is_key",
          "[coalescer]") {
  KeyIndex index;
  std::vector<std::string> keys;
  // Find-or-add `key` under a caller-chosen hash.
  auto find_or_add = [&](const std::string& key, uint64_t hash, bool* added) {
    const uint32_t e = index.FindOrAdd(
        hash, [&](uint32_t entry) { return keys.at(entry) == key; }, added);
    if (*added) {
      REQUIRE(e == keys.size());
      keys.push_back(key);
    }
    return e;
  };
  bool added = false;
  for (int round = 0; round < 3; ++round) {
    // Every key under one of four hashes, two of which share their low bits
    // (the same home slot in every table size used here), across growth.
    auto hash_of = [](int i) {
      const uint64_t hashes[] = {7, 7 + (uint64_t{1} << 40), 7 + (uint64_t{1} << 63), 12345};
      return hashes[i % 4];
    };
    const int n = round == 1 ? 10 : 3000;  // 3000 forces growth past 1024 slots
    for (int i = 0; i < n; ++i) {
      CHECK(find_or_add("k" + std::to_string(i), hash_of(i), &added) == static_cast<uint32_t>(i));
      CHECK(added);
    }
    CHECK(index.size() == static_cast<size_t>(n));
    CHECK(index.capacity() >= 2 * index.size());
    for (int i = n - 1; i >= 0; --i) {
      CHECK(find_or_add("k" + std::to_string(i), hash_of(i), &added) == static_cast<uint32_t>(i));
      CHECK_FALSE(added);
    }
    // A new key under an existing hash is a new entry.
    CHECK(find_or_add("new", hash_of(0), &added) == static_cast<uint32_t>(n));
    CHECK(added);
    const size_t capacity = index.capacity();
    index.Clear();
    keys.clear();
    CHECK(index.size() == 0);
    CHECK(index.capacity() == capacity);  // Clear keeps the table
  }
}

TEST_CASE("HashKeyBytes: equal bytes hash equal - every byte and the length count", "[coalescer]") {
  const std::string base = "ef:{user-123456789}:20251122-and-some-more-bytes";
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= base.size(); ++n) {
    const std::string s = base.substr(0, n);
    CHECK(HashKeyBytes(s) == HashKeyBytes(std::string(s)));
    CHECK(seen.insert(HashKeyBytes(s)).second);  // every prefix differs
    for (size_t i = 0; i < n; ++i) {
      std::string t = s;
      t[i] = static_cast<char>(t[i] ^ 1);
      CHECK(HashKeyBytes(t) != HashKeyBytes(s));
    }
  }
  CHECK(HashKeyBytes(std::string_view("\0", 1)) != HashKeyBytes(std::string_view("\0\0", 2)));
}

}  // namespace
}  // namespace ef
