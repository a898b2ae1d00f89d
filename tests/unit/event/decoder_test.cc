// Decoder: event forms, ID and timestamp rules, every reject reason, robustness.
#include "event/decoder.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/keys.h"
#include "config/config.h"
#include "event/event.h"

namespace ef {
namespace {

// 2025-11-23T00:00:00Z, a day boundary, so bucket edges are easy to place.
constexpr int64_t kNowS = 1763856000;
constexpr int64_t kNowMs = kNowS * 1000 + 500;
constexpr int64_t kDayS = 86400;
constexpr int64_t kTsMs = 1763800000123;  // 2025-11-22T08:26:40.123Z
const std::string kTs = std::to_string(kTsMs);

struct Harness {
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder;
  Event event;

  Harness() : decoder(events, filter) {}
  explicit Harness(const EventsConfig& e, const FilterConfig& f = FilterConfig())
      : events(e), filter(f), decoder(events, filter) {}

  RejectReason Decode(std::string_view payload, int64_t kafka_ts_ms = 0, int64_t now_ms = kNowMs) {
    return decoder.Decode(payload.data(), payload.size(), kafka_ts_ms, now_ms, &event);
  }
  std::vector<std::string> Items() const {
    return std::vector<std::string>(event.items.begin(), event.items.end());
  }
};

std::string Single(std::string_view user, std::string_view item, std::string_view ts = kTs) {
  return std::string("{\"user_id\":") + std::string(user) + ",\"item_id\":" + std::string(item) +
         ",\"ts\":" + std::string(ts) + "}";
}

std::string List(std::string_view user, std::string_view items, std::string_view ts = kTs) {
  return std::string("{\"user_id\":") + std::string(user) + ",\"items\":" + std::string(items) +
         ",\"ts\":" + std::string(ts) + "}";
}

using Items = std::vector<std::string>;

TEST_CASE("RejectReasonName gives stable snake_case labels", "[event]") {
  CHECK(std::string(RejectReasonName(RejectReason::kNotJson)) == "not_json");
  CHECK(std::string(RejectReasonName(RejectReason::kMissingUser)) == "missing_user");
  CHECK(std::string(RejectReasonName(RejectReason::kEmptyUser)) == "empty_user");
  CHECK(std::string(RejectReasonName(RejectReason::kUserLeadingBrace)) == "user_leading_brace");
  CHECK(std::string(RejectReasonName(RejectReason::kMissingItem)) == "missing_item");
  CHECK(std::string(RejectReasonName(RejectReason::kEmptyItem)) == "empty_item");
  CHECK(std::string(RejectReasonName(RejectReason::kIdTooLong)) == "id_too_long");
  CHECK(std::string(RejectReasonName(RejectReason::kTooManyItems)) == "too_many_items");
  CHECK(std::string(RejectReasonName(RejectReason::kBadTimestamp)) == "bad_timestamp");
  CHECK(std::string(RejectReasonName(RejectReason::kMissingTimestamp)) == "missing_timestamp");
  CHECK(std::string(RejectReasonName(RejectReason::kBadCluster)) == "bad_cluster");
  CHECK(std::string(RejectReasonName(RejectReason::kBadSimhash)) == "bad_simhash");
  CHECK(std::string(RejectReasonName(RejectReason::kFutureTimestamp)) == "future_timestamp");
  CHECK(std::string(RejectReasonName(RejectReason::kTooOld)) == "too_old");
  CHECK(std::string(RejectReasonName(RejectReason::kNone)) == "none");
  CHECK(std::string(RejectReasonName(RejectReason::kCount_)) == "unknown");
  std::set<std::string> names;
  for (int r = 0; r < static_cast<int>(RejectReason::kCount_); ++r) {
    names.insert(RejectReasonName(static_cast<RejectReason>(r)));
  }
  CHECK(names.size() == static_cast<size_t>(RejectReason::kCount_));
}

TEST_CASE("decodes the single form", "[event]") {
  Harness h;
  REQUIRE(h.Decode(R"({"user_id": "u1", "item_id": "i9", "ts": 1763800000123})") ==
          RejectReason::kNone);
  CHECK(h.event.user == "u1");
  CHECK(h.Items() == Items{"i9"});
  CHECK(h.event.ts_ms == kTsMs);
}

TEST_CASE("decodes the list form", "[event]") {
  Harness h;
  REQUIRE(h.Decode(R"({"user_id": "u1", "items": ["i9", "i10", 11], "ts": 1763800000123})") ==
          RejectReason::kNone);
  CHECK(h.event.user == "u1");
  CHECK(h.Items() == Items{"i9", "i10", "11"});
  CHECK(h.event.ts_ms == kTsMs);
}

TEST_CASE("whitespace everywhere is accepted", "[event]") {
  Harness h;
  REQUIRE(h.Decode(" \r\n\t{ \"user_id\" :\n\"u1\" ,\t\"items\" : [ \"a\" ,\n 7 ] , \"ts\" : "
                   "1763800000123 \n}\n ") == RejectReason::kNone);
  CHECK(h.event.user == "u1");
  CHECK(h.Items() == Items{"a", "7"});
  CHECK(h.event.ts_ms == kTsMs);
}

TEST_CASE("items_field wins over item_field, and null items falls back", "[event]") {
  Harness h;
  REQUIRE(h.Decode(R"({"item_id":"single","user_id":"u","items":["a","b"],"ts":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.Items() == Items{"a", "b"});
  // A bad item_field does not matter when items is used.
  REQUIRE(h.Decode(R"({"user_id":"u","items":["a"],"item_id":"","ts":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.Items() == Items{"a"});
  // items present but not an array: rejected, no fallback to item_id.
  CHECK(h.Decode(R"({"user_id":"u","items":"a","item_id":"b","ts":)" + kTs + "}") ==
        RejectReason::kMissingItem);
  // items: null is treated as absent.
  REQUIRE(h.Decode(R"({"user_id":"u","items":null,"item_id":"b","ts":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.Items() == Items{"b"});
  CHECK(h.Decode(R"({"user_id":"u","items":null,"ts":)" + kTs + "}") == RejectReason::kMissingItem);
}

TEST_CASE("custom field names and seconds", "[event]") {
  EventsConfig e;
  e.user_field = "uid";
  e.item_field = "iid";
  e.items_field = "feed";
  e.time_field = "t";
  e.time_unit = "s";
  Harness h(e);
  REQUIRE(h.Decode(R"({"uid":"u","iid":"x","t":1763800000})") == RejectReason::kNone);
  CHECK(h.event.user == "u");
  CHECK(h.Items() == Items{"x"});
  CHECK(h.event.ts_ms == 1763800000000);
  REQUIRE(h.Decode(R"({"uid":"u","feed":["x","y"],"t":1763800000.5})") == RejectReason::kNone);
  CHECK(h.Items() == Items{"x", "y"});
  CHECK(h.event.ts_ms == 1763800000500);
  // The default names are now just unknown fields.
  CHECK(h.Decode(Single("\"u\"", "\"i\"")) == RejectReason::kMissingUser);
  CHECK(h.Decode(R"({"uid":"u","item_id":"x","items":["y"],"t":1763800000})") ==
        RejectReason::kMissingItem);
  // A name that JSON must escape is matched through the unescaped key.
  EventsConfig q;
  q.user_field = "user\"id";
  q.item_field = "a\\b";
  Harness hq(q);
  REQUIRE(hq.Decode(R"({"user\"id":"u","a\\b":"i","ts":)" + kTs + "}") == RejectReason::kNone);
  CHECK(hq.event.user == "u");
  CHECK(hq.Items() == Items{"i"});
  // "a\b" in JSON is 'a', backspace: not the name a\b.
  CHECK(hq.Decode(R"({"user\"id":"u","a\b":"i","ts":)" + kTs + "}") == RejectReason::kMissingItem);
}

TEST_CASE("integer IDs keep their decimal text", "[event]") {
  Harness h;
  REQUIRE(h.Decode(Single("42", "-7")) == RejectReason::kNone);
  CHECK(h.event.user == "42");
  CHECK(h.Items() == Items{"-7"});
  REQUIRE(h.Decode(Single("0", "123456789012345678901234567890")) == RejectReason::kNone);
  CHECK(h.event.user == "0");
  CHECK(h.Items() == Items{"123456789012345678901234567890"});
  REQUIRE(h.Decode(List("18446744073709551616", "[ 1 , -0 , 9223372036854775807 ]")) ==
          RejectReason::kNone);
  CHECK(h.event.user == "18446744073709551616");
  CHECK(h.Items() == Items{"1", "-0", "9223372036854775807"});
}

TEST_CASE("IDs of the wrong type are missing", "[event]") {
  Harness h;
  for (const char* bad : {"1.5", "1e3", "-2E-1", "0.0", "true", "false", "null", "{}", "{\"a\":1}",
                          "[]", "[\"u\"]"}) {
    INFO(bad);
    CHECK(h.Decode(Single(bad, "\"i\"")) == RejectReason::kMissingUser);
    CHECK(h.Decode(Single("\"u\"", bad)) == RejectReason::kMissingItem);
    CHECK(h.Decode(List("\"u\"", std::string("[\"ok\",") + bad + "]")) ==
          RejectReason::kMissingItem);
  }
  // The items field itself of the wrong type.
  for (const char* bad : {"1", "\"a\"", "true", "{}", "1.5"}) {
    INFO(bad);
    CHECK(h.Decode(List("\"u\"", bad)) == RejectReason::kMissingItem);
  }
}

TEST_CASE("escaped strings are unescaped", "[event]") {
  Harness h;
  REQUIRE(h.Decode(Single(R"("caf\u00e9")", R"("a\"b\\c\/d\n")")) == RejectReason::kNone);
  CHECK(h.event.user == "caf\xc3\xa9");
  CHECK(h.Items() == Items{"a\"b\\c/d\n"});
  REQUIRE(h.Decode(List(R"("\ud83d\ude00")", R"(["plain", "t\tab", "\u0041"])")) ==
          RejectReason::kNone);
  CHECK(h.event.user == "\xf0\x9f\x98\x80");
  CHECK(h.Items() == Items{"plain", "t\tab", "A"});
  // Raw UTF-8 passes through untouched.
  REQUIRE(h.Decode(Single("\"\xe7\x94\xa8\xe6\x88\xb7\"", "\"i\"")) == RejectReason::kNone);
  CHECK(h.event.user == "\xe7\x94\xa8\xe6\x88\xb7");
  // Escaped keys match the configured names.
  REQUIRE(h.Decode(R"({"user\u005fid":"u","\u0069tem_id":"i","t\u0073":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.event.user == "u");
  CHECK(h.Items() == Items{"i"});
  // Bad escapes are not JSON.
  CHECK(h.Decode(Single(R"("a\x")", "\"i\"")) == RejectReason::kNotJson);
  CHECK(h.Decode(Single(R"("\u12")", "\"i\"")) == RejectReason::kNotJson);
  CHECK(h.Decode(Single("\"u\"", R"("\ud800")")) == RejectReason::kNotJson);
}

TEST_CASE("empty IDs", "[event]") {
  Harness h;
  CHECK(h.Decode(Single("\"\"", "\"i\"")) == RejectReason::kEmptyUser);
  CHECK(h.Decode(Single("\"u\"", "\"\"")) == RejectReason::kEmptyItem);
  CHECK(h.Decode(List("\"u\"", "[]")) == RejectReason::kEmptyItem);
  CHECK(h.Decode(List("\"u\"", "[ ]")) == RejectReason::kEmptyItem);
  CHECK(h.Decode(List("\"u\"", R"(["a",""])")) == RejectReason::kEmptyItem);
}

TEST_CASE("missing fields", "[event]") {
  Harness h;
  CHECK(h.Decode(R"({"item_id":"i","ts":)" + kTs + "}") == RejectReason::kMissingUser);
  CHECK(h.Decode(R"({"user_id":"u","ts":)" + kTs + "}") == RejectReason::kMissingItem);
  CHECK(h.Decode("{}") == RejectReason::kMissingUser);
  // Case matters in names.
  CHECK(h.Decode(R"({"User_id":"u","item_id":"i","ts":)" + kTs + "}") ==
        RejectReason::kMissingUser);
  // Ranking: user problems before item problems before time problems.
  CHECK(h.Decode(R"({"ts":"x","item_id":""})") == RejectReason::kMissingUser);
  CHECK(h.Decode(R"({"ts":"x","item_id":"","user_id":""})") == RejectReason::kEmptyUser);
  CHECK(h.Decode(R"({"ts":"x","item_id":"","user_id":"u"})") == RejectReason::kEmptyItem);
  CHECK(h.Decode(R"({"ts":"x","item_id":"i","user_id":"u"})") == RejectReason::kBadTimestamp);
}

TEST_CASE("length limits", "[event]") {
  Harness h;  // max_id_bytes 256
  const std::string ok(256, 'a');
  const std::string too_long(257, 'a');
  CHECK(h.Decode(Single("\"" + ok + "\"", "\"" + ok + "\"")) == RejectReason::kNone);
  CHECK(h.event.user.size() == 256);
  CHECK(h.Decode(Single("\"" + too_long + "\"", "\"i\"")) == RejectReason::kIdTooLong);
  CHECK(h.Decode(Single("\"u\"", "\"" + too_long + "\"")) == RejectReason::kIdTooLong);
  CHECK(h.Decode(List("\"u\"", "[\"a\",\"" + too_long + "\"]")) == RejectReason::kIdTooLong);
  CHECK(h.Decode(Single(std::string(257, '7'), "\"i\"")) == RejectReason::kIdTooLong);
  // The limit is on the unescaped bytes: 200 x "\/" is 400 bytes raw, 200 decoded;
  // 129 x "\u00e9" is 774 bytes raw, 258 decoded.
  std::string slashes;
  for (int i = 0; i < 200; ++i) slashes += "\\/";
  CHECK(h.Decode(Single("\"" + slashes + "\"", "\"i\"")) == RejectReason::kNone);
  CHECK(h.event.user == std::string(200, '/'));
  std::string accents;
  for (int i = 0; i < 129; ++i) accents += "\\u00e9";
  CHECK(h.Decode(Single("\"u\"", "\"" + accents + "\"")) == RejectReason::kIdTooLong);

  EventsConfig e;
  e.max_items_per_event = 3;
  e.max_id_bytes = 4;
  Harness small(e);
  CHECK(small.Decode(List("\"u\"", R"(["a","b","c"])")) == RejectReason::kNone);
  CHECK(small.Decode(List("\"u\"", R"(["a","b","c","d"])")) == RejectReason::kTooManyItems);
  // The first problem in array order wins.
  CHECK(small.Decode(List("\"u\"", R"(["a","",1.5,"d"])")) == RejectReason::kEmptyItem);
  CHECK(small.Decode(List("\"u\"", R"(["a","b","c",""])")) == RejectReason::kTooManyItems);
  CHECK(small.Decode(Single("12345", "\"i\"")) == RejectReason::kIdTooLong);
  CHECK(small.Decode(Single("1234", "\"abcd\"")) == RejectReason::kNone);
  CHECK(small.Decode(Single("-123", "\"i\"")) == RejectReason::kNone);
}

TEST_CASE("timestamps in milliseconds", "[event]") {
  Harness h;
  auto ts_of = [&h](const std::string& ts) {
    const RejectReason r = h.Decode(Single("\"u\"", "\"i\"", ts));
    return r == RejectReason::kNone ? h.event.ts_ms : -static_cast<int64_t>(r);
  };
  CHECK(ts_of("1763800000123") == kTsMs);
  CHECK(ts_of("1763800000123.9") == kTsMs);  // fraction of a millisecond truncated
  CHECK(ts_of("1.763800000123e12") == kTsMs);
  CHECK(ts_of("1763800000123E0") == kTsMs);
  CHECK(ts_of("17638000001230e-1") == kTsMs);
  CHECK(ts_of("1763800000123.000e+0") == kTsMs);
  for (const char* bad :
       {"-1", "-0.5", "-1763800000123", "\"1763800000123\"", "\"\"", "true", "false", "{}", "[]",
        "[1763800000123]", "NaN", "Infinity", "-Infinity", "1e300", "9223372036854775807",
        "9223372036854775808", "99999999999999999999999999", "1e999999999999999999"}) {
    INFO(bad);
    CHECK(h.Decode(Single("\"u\"", "\"i\"", bad)) == RejectReason::kBadTimestamp);
  }
}

TEST_CASE("timestamps in seconds", "[event]") {
  EventsConfig e;
  e.time_unit = "s";
  Harness h(e);
  auto ts_of = [&h](const std::string& ts) {
    const RejectReason r = h.Decode(Single("\"u\"", "\"i\"", ts));
    return r == RejectReason::kNone ? h.event.ts_ms : -static_cast<int64_t>(r);
  };
  CHECK(ts_of("1763800000") == 1763800000000);
  CHECK(ts_of("1763800000.123") == kTsMs);  // exact: no binary floating point rounding
  CHECK(ts_of("1763800000.1239") == kTsMs);
  CHECK(ts_of("1763800000.1") == 1763800000100);
  CHECK(ts_of("1.763800000123e9") == kTsMs);
  CHECK(ts_of("17638000001.23e-1") == kTsMs);
  CHECK(ts_of("-1763800000") == -static_cast<int64_t>(RejectReason::kBadTimestamp));
  CHECK(ts_of("1763800000123") == -static_cast<int64_t>(RejectReason::kBadTimestamp));  // year 57k
  CHECK(ts_of("\"1763800000\"") == -static_cast<int64_t>(RejectReason::kBadTimestamp));
}

TEST_CASE("timestamp range ends at year 9999", "[event]") {
  EventsConfig e;
  e.max_future_ms = std::numeric_limits<int64_t>::max();
  // A clock at the last millisecond, so that the write time (min(ts, now)) is ts.
  constexpr int64_t kLastMs = 253402300799999;
  Harness ms(e);
  CHECK(ms.Decode(Single("\"u\"", "\"i\"", "253402300799999"), 0, kLastMs) == RejectReason::kNone);
  CHECK(ms.event.ts_ms == kLastMs);
  CHECK(ms.Decode(Single("\"u\"", "\"i\"", "253402300799999.99")) == RejectReason::kNone);
  CHECK(ms.Decode(Single("\"u\"", "\"i\"", "253402300800000")) == RejectReason::kBadTimestamp);
  e.time_unit = "s";
  Harness s(e);
  CHECK(s.Decode(Single("\"u\"", "\"i\"", "253402300799.999"), 0, kLastMs) == RejectReason::kNone);
  CHECK(s.event.ts_ms == kLastMs);
  CHECK(s.Decode(Single("\"u\"", "\"i\"", "253402300800")) == RejectReason::kBadTimestamp);
  CHECK(s.Decode(Single("\"u\"", "\"i\"", "9223372036854775")) == RejectReason::kBadTimestamp);
}

TEST_CASE("Kafka timestamp fallback", "[event]") {
  Harness h;
  const int64_t kafka = kTsMs + 77;
  REQUIRE(h.Decode(R"({"user_id":"u","item_id":"i"})", kafka) == RejectReason::kNone);
  CHECK(h.event.ts_ms == kafka);
  REQUIRE(h.Decode(R"({"user_id":"u","item_id":"i","ts":null})", kafka) == RejectReason::kNone);
  CHECK(h.event.ts_ms == kafka);
  // A ts in the payload wins over the message timestamp.
  REQUIRE(h.Decode(Single("\"u\"", "\"i\""), kafka) == RejectReason::kNone);
  CHECK(h.event.ts_ms == kTsMs);
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i"})", 0) == RejectReason::kMissingTimestamp);
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i","ts":null})", -1) ==
        RejectReason::kMissingTimestamp);
  // A bad ts is not replaced by the message timestamp.
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i","ts":"x"})", kafka) ==
        RejectReason::kBadTimestamp);
  // The fallback goes through the same time checks.
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i"})", kNowMs + 2 * 3600 * 1000) ==
        RejectReason::kFutureTimestamp);
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i"})", 1000) == RejectReason::kTooOld);
  CHECK(h.Decode(R"({"user_id":"u","item_id":"i"})", std::numeric_limits<int64_t>::max()) ==
        RejectReason::kFutureTimestamp);
}

TEST_CASE("an event stamped ahead of the clock gets the clock's time (FORMAT.md rule 4)",
          "[event]") {
  Harness h;  // max_future 1 h
  for (const int64_t ahead : {int64_t{1}, int64_t{60 * 1000}, int64_t{3600 * 1000}}) {
    INFO("ahead by " << ahead << " ms");
    REQUIRE(h.Decode(Single("\"u\"", "\"i\"", std::to_string(kNowMs + ahead))) ==
            RejectReason::kNone);
    CHECK(h.event.ts_ms == kNowMs);
    // Also when the time comes from the Kafka message timestamp.
    REQUIRE(h.Decode(R"({"user_id":"u","item_id":"i"})", kNowMs + ahead) == RejectReason::kNone);
    CHECK(h.event.ts_ms == kNowMs);
  }
  // At or before the clock, the event time is kept to the millisecond.
  REQUIRE(h.Decode(Single("\"u\"", "\"i\"", std::to_string(kNowMs))) == RejectReason::kNone);
  CHECK(h.event.ts_ms == kNowMs);
  REQUIRE(h.Decode(Single("\"u\"", "\"i\"", std::to_string(kNowMs - 1))) == RejectReason::kNone);
  CHECK(h.event.ts_ms == kNowMs - 1);
  // Beyond max_future it is still rejected, not clamped.
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(kNowMs + 3600 * 1000 + 1))) ==
        RejectReason::kFutureTimestamp);
}

TEST_CASE("future and too-old boundaries", "[event]") {
  Harness h;  // max_future 1 h, bucket 1 d, window 30 d
  const int64_t limit = kNowMs + 3600 * 1000;
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(limit))) == RejectReason::kNone);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(limit + 1))) ==
        RejectReason::kFutureTimestamp);
  // kNowS is a day start: the bucket that began 31 days ago expires exactly now.
  const int64_t expired_bucket_ms = (kNowS - 31 * kDayS) * 1000;
  REQUIRE(ExpireAt(BucketStart(kNowS - 31 * kDayS, kDayS), kDayS, 30 * kDayS) == kNowS);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(expired_bucket_ms))) ==
        RejectReason::kTooOld);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(expired_bucket_ms + kDayS * 1000 - 1))) ==
        RejectReason::kTooOld);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(expired_bucket_ms + kDayS * 1000))) ==
        RejectReason::kNone);
  // One second before the expiry the old bucket is still live.
  CHECK(h.Decode(Single("\"u\"", "\"i\"", std::to_string(expired_bucket_ms)), 0,
                 (kNowS - 1) * 1000 + 999) == RejectReason::kNone);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", "0")) == RejectReason::kTooOld);
  CHECK(h.Decode(Single("\"u\"", "\"i\"", "-0")) == RejectReason::kTooOld);

  FilterConfig hourly;
  hourly.bucket_seconds = 3600;
  hourly.window_seconds = 2 * 3600;
  Harness hh(EventsConfig(), hourly);
  const int64_t three_hours_ago = (kNowS - 3 * 3600) * 1000;
  CHECK(hh.Decode(Single("\"u\"", "\"i\"", std::to_string(three_hours_ago))) ==
        RejectReason::kTooOld);
  CHECK(hh.Decode(Single("\"u\"", "\"i\"", std::to_string(three_hours_ago + 3600 * 1000))) ==
        RejectReason::kNone);
}

TEST_CASE("too_old is exactly ExpireAt(BucketStart(ts)) <= now", "[event]") {
  std::mt19937_64 rng(99);
  const std::vector<std::pair<int64_t, int64_t>> layouts = {
      {86400, 30 * 86400}, {3600, 7 * 86400}, {2 * 86400, 9 * 86400}, {3 * 3600, 3600}};
  for (const auto& [bucket, window] : layouts) {
    FilterConfig f;
    f.bucket_seconds = bucket;
    f.window_seconds = window;
    EventsConfig e;
    e.max_future_ms = std::numeric_limits<int64_t>::max();
    Harness h(e, f);
    const std::string payload = R"({"user_id":"u","item_id":"i"})";
    for (int i = 0; i < 20000; ++i) {
      const int64_t now_ms = kNowMs + static_cast<int64_t>(rng() % (400LL * 86400 * 1000));
      // Mostly near the expiry edge, where an off-by-one would show.
      const int64_t edge_ms = (now_ms / 1000 - bucket - window) * 1000;
      const int64_t ts_ms =
          edge_ms + static_cast<int64_t>(rng() % (4 * bucket * 1000)) - 2 * bucket * 1000;
      const bool want_old =
          ExpireAt(BucketStart(ts_ms / 1000, bucket), bucket, window) <= now_ms / 1000;
      const RejectReason r = h.Decode(payload, ts_ms, now_ms);
      INFO("bucket " << bucket << " window " << window << " ts " << ts_ms << " now " << now_ms);
      REQUIRE(r == (want_old ? RejectReason::kTooOld : RejectReason::kNone));
    }
  }
}

TEST_CASE("field order does not matter", "[event]") {
  std::vector<std::string> fields = {R"("user_id":"u1")", R"("item_id":"i9")",
                                     R"("ts":1763800000123)", R"("extra":{"a":[1,{"b":null}]})"};
  std::sort(fields.begin(), fields.end());
  Harness h;
  int permutations = 0;
  do {
    std::string payload = "{" + fields[0];
    for (size_t i = 1; i < fields.size(); ++i) payload += "," + fields[i];
    payload += "}";
    INFO(payload);
    REQUIRE(h.Decode(payload) == RejectReason::kNone);
    CHECK(h.event.user == "u1");
    CHECK(h.Items() == Items{"i9"});
    CHECK(h.event.ts_ms == kTsMs);
    ++permutations;
  } while (std::next_permutation(fields.begin(), fields.end()));
  CHECK(permutations == 24);
}

TEST_CASE("duplicate keys: the first one wins", "[event]") {
  Harness h;
  REQUIRE(h.Decode(R"({"user_id":"a","item_id":"x","user_id":"b","ts":1,"ts":)" + kTs +
                   R"(,"item_id":"y"})") == RejectReason::kTooOld);
  REQUIRE(h.Decode(R"({"user_id":"a","item_id":"x","user_id":"b","ts":)" + kTs +
                   R"(,"ts":1,"item_id":"y"})") == RejectReason::kNone);
  CHECK(h.event.user == "a");
  CHECK(h.Items() == Items{"x"});
  CHECK(h.event.ts_ms == kTsMs);
  CHECK(h.Decode(R"({"user_id":"","user_id":"b","item_id":"x","ts":)" + kTs + "}") ==
        RejectReason::kEmptyUser);
  REQUIRE(h.Decode(R"({"user_id":"u","items":["a"],"items":["b","c"],"ts":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.Items() == Items{"a"});
  // An escaped spelling of the same key is the same key.
  REQUIRE(h.Decode(R"({"user\u005fid":"first","user_id":"second","item_id":"x","ts":)" + kTs +
                   "}") == RejectReason::kNone);
  CHECK(h.event.user == "first");
  // A first null ts is still the ts: the later one is ignored, the Kafka time used.
  REQUIRE(h.Decode(R"({"user_id":"u","item_id":"x","ts":null,"ts":1})", kTsMs + 5) ==
          RejectReason::kNone);
  CHECK(h.event.ts_ms == kTsMs + 5);
}

TEST_CASE("not JSON", "[event]") {
  Harness h;
  const std::string kFields = R"("user_id":"u","item_id":"i","ts":)" + kTs;
  const std::string good = Single("\"u\"", "\"i\"");
  REQUIRE(h.Decode(good) == RejectReason::kNone);
  const std::vector<std::string> bad = {
      "",
      " ",
      "\n\t ",
      "[]",
      "[" + good + "]",
      "42",
      "\"str\"",
      "null",
      "true",
      "{",
      "}",
      "{\"user_id\":\"u\"",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":1763800000123",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":17638",
      "{\"user_id\":\"u\",\"item_id\":\"i",
      "{\"user_id\":\"u\",\"items\":[\"a\",\"b\"",
      "{\"user_id\":\"u\",\"items\":[\"a\",\"b\",",
      "{\"user_id\":\"u\",\"items\":[\"a\" \"b\"],\"ts\":1}",
      "{\"user_id\":\"u\",\"items\":[\"a\",,\"b\"],\"ts\":1}",
      "{\"user_id\":\"u\",\"items\":[\"a\",],\"ts\":1}",
      good + " x",
      good + good,
      good + ",",
      good + "}",
      good + "]",
      good + std::string(1, '\0'),
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":" + kTs + ",}",
      "{\"user_id\" \"u\",\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":\"u\" \"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":" + kTs + ",\"x\":}",
      "{'user_id':'u','item_id':'i','ts':" + kTs + "}",
      "{user_id:\"u\",item_id:\"i\",ts:" + kTs + "}",
      "{\"user_id\":u,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":tru,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":nul,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":01,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":-,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":1.,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":12ab,\"item_id\":\"i\",\"ts\":" + kTs + "}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":" + kTs + "x}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":+1}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":.5}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":1e}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":0x10}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":nan}",
      // Malformed values in fields the event does not use, or in later duplicates.
      "{\"x\":\"a\":[1]," + kFields + "}",
      "{\"x\":\"a\":\"b\"," + kFields + "}",
      "{\"x\":[\"a\":1]," + kFields + "}",
      "{\"x\":1:2," + kFields + "}",
      "{\"user_id\":\"a\":[1],\"item_id\":\"i\",\"ts\":1}",
      "{\"user_id\":\"u\",\"items\":[\"a\":1],\"ts\":1}",
      "{\"user_id\":\"u\",\"item_id\":\"i\":\"j\",\"ts\":1}",
      "{\"x\":[1,2}," + kFields + "}",
      "{\"x\":{\"a\"]," + kFields + "}",
      "{\"x\":[1 2]," + kFields + "}",
      "{\"x\":{\"a\" 1}," + kFields + "}",
      "{\"x\":{\"a\":1,}," + kFields + "}",
      "{\"x\":{1:2}," + kFields + "}",
      "{\"x\":[,]," + kFields + "}",
      "{\"x\":tru," + kFields + "}",
      "{\"x\":[tru]," + kFields + "}",
      "{\"x\":[\"\\q\"]," + kFields + "}",
      "{\"x\":{\"\\q\":1}," + kFields + "}",
      "{\"\\q\":1," + kFields + "}",
      "{\"x\":01," + kFields + "}",
      "{\"x\":NaN," + kFields + "}",
      "{" + kFields + ",\"user_id\":tru}",
      "{" + kFields + ",\"items\":[1,]}",
      "{\"user_id\":{\"a\":tru},\"item_id\":\"i\",\"ts\":1}",
      "{\"user_id\":\"u\",\"items\":[\"\",[1 2]],\"ts\":1}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":[1,,2]}",
      "{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":\"\\q\"}",
      // Invalid UTF-8 and raw control characters inside strings.
      Single("\"\xff\"", "\"i\""),
      Single("\"\xc3\"", "\"i\""),
      Single("\"a\x01\"", "\"i\""),
      Single("\"a\nb\"", "\"i\""),
      Single(std::string("\"a\0b\"", 5), "\"i\""),
      std::string("\0", 1),
      std::string("{\0}", 3),
  };
  for (const std::string& payload : bad) {
    INFO("payload: " << payload);
    CHECK(h.Decode(payload) == RejectReason::kNotJson);
  }
  // Null data pointer with zero length.
  CHECK(h.decoder.Decode(nullptr, 0, kTsMs, kNowMs, &h.event) == RejectReason::kNotJson);
  // The decoder recovers after every one of them.
  REQUIRE(h.Decode(good) == RejectReason::kNone);
  CHECK(h.event.user == "u");
}

TEST_CASE("every reject reason is reachable", "[event]") {
  EventsConfig e;
  e.max_items_per_event = 2;
  FilterConfig f;
  f.near_duplicates = true;  // reads the cluster fields too
  Harness h(e, f);
  const std::string long_id(300, 'x');
  const std::vector<std::pair<std::string, RejectReason>> cases = {
      {"nope", RejectReason::kNotJson},
      {R"({"item_id":"i","ts":)" + kTs + "}", RejectReason::kMissingUser},
      {Single("\"\"", "\"i\""), RejectReason::kEmptyUser},
      {Single("\"}u\"", "\"i\""), RejectReason::kUserLeadingBrace},
      {R"({"user_id":"u","ts":)" + kTs + "}", RejectReason::kMissingItem},
      {Single("\"u\"", "\"\""), RejectReason::kEmptyItem},
      {Single("\"" + long_id + "\"", "\"i\""), RejectReason::kIdTooLong},
      {List("\"u\"", R"(["a","b","c"])"), RejectReason::kTooManyItems},
      {Single("\"u\"", "\"i\"", "-5"), RejectReason::kBadTimestamp},
      {R"({"user_id":"u","item_id":"i"})", RejectReason::kMissingTimestamp},
      {Single("\"u\"", "\"i\"", std::to_string(kNowMs + 7200 * 1000)),
       RejectReason::kFutureTimestamp},
      {Single("\"u\"", "\"i\"", std::to_string(kNowMs - 40 * kDayS * 1000)), RejectReason::kTooOld},
      {R"({"user_id":"u","item_id":"i","cluster_id":"","ts":)" + kTs + "}",
       RejectReason::kBadCluster},
      {R"({"user_id":"u","item_id":"i","simhash":-1,"ts":)" + kTs + "}", RejectReason::kBadSimhash},
      {Single("\"u\"", "\"i\""), RejectReason::kNone},
  };
  std::set<RejectReason> covered;
  for (const auto& [payload, want] : cases) {
    INFO(payload);
    CHECK(h.Decode(payload) == want);
    covered.insert(want);
  }
  CHECK(covered.size() == static_cast<size_t>(RejectReason::kCount_));
}

TEST_CASE("views stay valid until the next Decode and are then replaced", "[event]") {
  Harness h;
  Event first;
  {
    std::string payload = List(R"("\u00fcser")", R"(["esc\u0061ped", "plain", 5])");
    REQUIRE(h.decoder.Decode(payload.data(), payload.size(), 0, kNowMs, &first) ==
            RejectReason::kNone);
    // The caller's payload may go away: the decoder works on its own copy.
    std::fill(payload.begin(), payload.end(), 'X');
  }
  std::vector<std::string> churn(1000, std::string(100, 'z'));  // heap traffic in between
  CHECK(first.user == "\xc3\xbcser");
  CHECK(std::vector<std::string>(first.items.begin(), first.items.end()) ==
        Items{"escaped", "plain", "5"});

  // The next Decode into the same Event replaces the views and reuses the vector.
  const std::string_view* items_storage = first.items.data();
  const std::string second = List(R"("v2")", R"(["n\u0065w", "b"])");
  REQUIRE(h.decoder.Decode(second.data(), second.size(), 0, kNowMs, &first) == RejectReason::kNone);
  CHECK(first.user == "v2");
  CHECK(std::vector<std::string>(first.items.begin(), first.items.end()) == Items{"new", "b"});
  CHECK(first.items.data() == items_storage);
  // A rejected event leaves no items behind, even when the list was partly read.
  REQUIRE(h.decoder.Decode("{}", 2, 0, kNowMs, &first) == RejectReason::kMissingUser);
  CHECK(first.items.empty());
  const std::string partly = List(R"("u")", R"(["a", "b", ""])");
  REQUIRE(h.decoder.Decode(partly.data(), partly.size(), 0, kNowMs, &first) ==
          RejectReason::kEmptyItem);
  CHECK(first.items.empty());
  const std::string late_ts = List(R"("u")", R"(["a", "b"])", "-1");
  REQUIRE(h.decoder.Decode(late_ts.data(), late_ts.size(), 0, kNowMs, &first) ==
          RejectReason::kBadTimestamp);
  CHECK(first.items.empty());
}

TEST_CASE("huge payloads", "[event]") {
  EventsConfig big;
  big.max_items_per_event = 10000;
  Harness h(big);
  // A 4 MiB unknown field around a valid event.
  const std::string blob(4 << 20, 'b');
  REQUIRE(h.Decode(R"({"pad":")" + blob + R"(","user_id":"u","item_id":"i","ts":)" + kTs + "}") ==
          RejectReason::kNone);
  CHECK(h.event.user == "u");
  CHECK(h.Items() == Items{"i"});

  // The largest list allowed, and one more.
  std::string items = "[";
  for (int i = 0; i < 10000; ++i) items += (i ? ",\"item-" : "\"item-") + std::to_string(i) + "\"";
  REQUIRE(h.Decode(List("\"u\"", items + "]")) == RejectReason::kNone);
  REQUIRE(h.event.items.size() == 10000);
  CHECK(h.event.items.front() == "item-0");
  CHECK(h.event.items.back() == "item-9999");
  CHECK(h.Decode(List("\"u\"", items + ",\"one-more\"]")) == RejectReason::kTooManyItems);

  // Nesting: 1023 levels in all, the top-level object included, are accepted in
  // unknown fields and as the wrong type of ID; deeper documents are not_json, and
  // nothing recurses without bound.
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  CHECK(h.Decode(R"({"x":)" + nested(1022) + R"(,"user_id":"u","item_id":"i","ts":)" + kTs + "}") ==
        RejectReason::kNone);
  CHECK(h.Decode(R"({"x":)" + nested(1023) + R"(,"user_id":"u","item_id":"i","ts":)" + kTs + "}") ==
        RejectReason::kNotJson);
  CHECK(h.Decode(R"({"x":)" + nested(1021) + R"(,"user_id":"u","items":[)" + nested(1021) +
                 R"(],"ts":)" + kTs + "}") == RejectReason::kMissingItem);
  CHECK(h.Decode(R"({"user_id":"u","items":[)" + nested(1022) + R"(],"ts":)" + kTs + "}") ==
        RejectReason::kNotJson);
  CHECK(h.Decode(Single(nested(1000), "\"i\"")) == RejectReason::kMissingUser);
  CHECK(h.Decode(List("\"u\"", "[" + nested(1000) + "]")) == RejectReason::kMissingItem);
  const std::string deep = nested(100000);
  CHECK(h.Decode(R"({"x":)" + deep + R"(,"user_id":"u","item_id":"i","ts":)" + kTs + "}") ==
        RejectReason::kNotJson);
  CHECK(h.Decode(Single(deep, "\"i\"")) == RejectReason::kNotJson);
  CHECK(h.Decode(R"({"x":)" + deep.substr(1) + R"(,"user_id":"u","item_id":"i","ts":)" + kTs +
                 "}") == RejectReason::kNotJson);

  // Small events still decode after the buffers grew.
  REQUIRE(h.Decode(Single("\"small\"", "\"s\"")) == RejectReason::kNone);
  CHECK(h.event.user == "small");
  CHECK(h.Items() == Items{"s"});
}

// A kNone result must always be a usable event.
void CheckSane(const Harness& h, RejectReason r) {
  REQUIRE(static_cast<int>(r) >= 0);
  REQUIRE(static_cast<int>(r) < static_cast<int>(RejectReason::kCount_));
  if (r != RejectReason::kNone) return;
  REQUIRE(!h.event.user.empty());
  REQUIRE(h.event.user.front() != '}');
  REQUIRE(h.event.user.size() <= static_cast<size_t>(h.events.max_id_bytes));
  REQUIRE(!h.event.items.empty());
  REQUIRE(h.event.items.size() <= static_cast<size_t>(h.events.max_items_per_event));
  for (std::string_view item : h.event.items) {
    REQUIRE(!item.empty());
    REQUIRE(item.size() <= static_cast<size_t>(h.events.max_id_bytes));
  }
  REQUIRE(h.event.ts_ms <= kNowMs);
  REQUIRE(h.event.ts_ms > (kNowS - h.filter.window_seconds - h.filter.bucket_seconds) * 1000);
}

TEST_CASE("fuzz: random mutations of valid events never crash", "[event]") {
  Harness h;
  const std::vector<std::string> seeds = {
      R"({"user_id": "u1", "item_id": "i9", "ts": 1763800000123})",
      R"({"user_id": 42, "items": ["i9", "i\u00e9", 10, "x"], "ts": 1763800000123.5})",
      R"({"ts":1763800000123,"extra":{"a":[true,false,null,1e5]},"user_id":"\ud83d\ude00","item_id":-3})",
  };
  const std::string alphabet = "{}[]\",:\\ \n0123456789-+.eEtrufalsn\x00\xff\xc3\xa9uU_id";
  std::mt19937_64 rng(20251122);
  int accepted = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    std::string s = seeds[iter % seeds.size()];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !s.empty(); ++m) {
      const size_t pos = rng() % s.size();
      const char c = (rng() % 2) ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
      switch (rng() % 6) {
        case 0:
          s[pos] = c;
          break;
        case 1:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c);
          break;
        case 2:
          s.erase(pos, 1 + rng() % 3);
          break;
        case 3:
          s.resize(pos);
          break;
        case 4:
          s.insert(pos, s.substr(rng() % s.size(), rng() % 16));
          break;
        default:
          s[pos] ^= static_cast<char>(1 << (rng() % 8));
          break;
      }
    }
    const RejectReason r = h.Decode(s, (iter % 3) ? kTsMs : 0);
    CheckSane(h, r);
    if (r == RejectReason::kNone) ++accepted;
  }
  // Many mutations hit whitespace or ID bytes and stay valid: the loop is not
  // just exercising the not_json path.
  CHECK(accepted > 1000);
}

TEST_CASE("fuzz: binary garbage with NUL bytes", "[event]") {
  Harness h;
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(rng() % 300, '\0');
    for (char& c : s) c = (rng() % 4 == 0) ? '\0' : static_cast<char>(rng());
    if (iter % 2) s = "{\"user_id\":\"" + s + "\",\"item_id\":\"i\",\"ts\":" + kTs + "}";
    const RejectReason r = h.Decode(s, kTsMs);
    CheckSane(h, r);
    if (s.find('\0') != std::string::npos) CHECK(r != RejectReason::kNone);
  }
  REQUIRE(h.Decode(Single("\"u\"", "\"i\"")) == RejectReason::kNone);
}

// ------------------------------------------ near_duplicates: cluster and simhash fields

std::string WithFields(std::string_view fields) {
  return std::string("{\"user_id\":\"u\",\"item_id\":\"i\",\"ts\":") + kTs + "," +
         std::string(fields) + "}";
}

TEST_CASE("decoder near_duplicates: cluster and simhash fields of single-item events",
          "[event][near_duplicates]") {
  FilterConfig f;
  f.near_duplicates = true;
  Harness h(EventsConfig(), f);
  REQUIRE(h.Decode(WithFields(R"("cluster_id":"story-7")")) == RejectReason::kNone);
  CHECK(h.event.cluster == "story-7");
  CHECK_FALSE(h.event.has_simhash);
  REQUIRE(h.Decode(WithFields(R"("cluster_id":42)")) == RejectReason::kNone);
  CHECK(h.event.cluster == "42");  // integers as written, like item IDs
  REQUIRE(h.Decode(WithFields(R"("cluster_id":"story")")) == RejectReason::kNone);
  CHECK(h.event.cluster == "story");
  REQUIRE(h.Decode(WithFields(R"("cluster_id":null,"simhash":null)")) == RejectReason::kNone);
  CHECK(h.event.cluster.empty());
  CHECK_FALSE(h.event.has_simhash);
  REQUIRE(h.Decode(WithFields(R"("simhash":18446744073709551615)")) == RejectReason::kNone);
  CHECK(h.event.has_simhash);
  CHECK(h.event.simhash == 0xffffffffffffffffULL);
  REQUIRE(h.Decode(WithFields(R"("simhash":"00000000DeadBeef")")) == RejectReason::kNone);
  CHECK(h.event.simhash == 0xdeadbeefULL);
  REQUIRE(h.Decode(WithFields(R"("simhash":0)")) == RejectReason::kNone);
  CHECK(h.event.has_simhash);
  CHECK(h.event.simhash == 0);
  // The next event does not inherit them.
  REQUIRE(h.Decode(Single("\"u\"", "\"i\"")) == RejectReason::kNone);
  CHECK(h.event.cluster.empty());
  CHECK_FALSE(h.event.has_simhash);
  // A list event: validated, ignored.
  REQUIRE(h.Decode(List("\"u\"", R"(["a","b"],"cluster_id":"c","simhash":1)")) ==
          RejectReason::kNone);
  CHECK(h.event.cluster.empty());
  CHECK_FALSE(h.event.has_simhash);
  CHECK(h.Items() == Items{"a", "b"});
}

TEST_CASE("decoder near_duplicates: bad cluster and simhash fields are rejected by name",
          "[event][near_duplicates]") {
  FilterConfig f;
  f.near_duplicates = true;
  EventsConfig e;
  e.max_id_bytes = 8;
  Harness h(e, f);
  for (const char* bad : {R"("cluster_id":"")", R"("cluster_id":true)", R"("cluster_id":1.5)",
                          R"("cluster_id":["c"])", R"("cluster_id":{"c":1})"}) {
    INFO(bad);
    CHECK(h.Decode(WithFields(bad)) == RejectReason::kBadCluster);
  }
  CHECK(h.Decode(WithFields(R"("cluster_id":"123456789")")) == RejectReason::kIdTooLong);
  for (const char* bad :
       {R"("simhash":-1)", R"("simhash":1.5)", R"("simhash":18446744073709551616)",
        R"("simhash":"dead")", R"("simhash":"00000000deadbeeg")", R"("simhash":"0x000000deadbeef")",
        R"("simhash":true)", R"("simhash":[1])", R"("simhash":1e3)"}) {
    INFO(bad);
    CHECK(h.Decode(WithFields(bad)) == RejectReason::kBadSimhash);
  }
  // Malformed JSON still outranks them; other reasons rank before them.
  CHECK(h.Decode(WithFields(R"("simhash":01)")) == RejectReason::kNotJson);
  CHECK(h.Decode(R"({"user_id":"","item_id":"i","ts":1,"cluster_id":""})") ==
        RejectReason::kEmptyUser);
  // near_duplicates off: the same fields are not read.
  Harness off;
  CHECK(off.Decode(WithFields(R"("cluster_id":"","simhash":"dead")")) == RejectReason::kNone);
  CHECK(off.event.cluster.empty());
}

}  // namespace
}  // namespace ef
