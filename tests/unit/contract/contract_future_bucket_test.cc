// Contract v1 revision 2, rule 4 (docs/FORMAT.md): an event stamped ahead of the
// writer's clock is written into the bucket of the writer's clock, so a reader at
// the processing time finds it. Issue 9, defect 2.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "config/config.h"
#include "event/decoder.h"
#include "pipeline/coalescer.h"
#include "pipeline/ingest.h"
#include "read/bloom_reader.h"
#include "support/fakes.h"

namespace ef {
namespace {

using ::ef::testing::FakeClock;
using ::ef::testing::FakeSink;
using ::ef::testing::FakeSource;

constexpr int64_t kMinuteMs = 60 * 1000;

struct Span {
  const char* name;
  int64_t bucket_seconds;
  int64_t window_seconds;
  int64_t boundary_s;  // a bucket boundary
};

// 2025-11-22T09:00:00Z (an hour boundary) and 2025-11-23T00:00:00Z (midnight UTC).
const Span kHourSpan{"1h buckets", 3600, 86400, 1763802000};
const Span kDaySpan{"1d buckets", 86400, 30 * 86400, 1763856000};

// The pipeline (Decoder + Coalescer through Ingest) with fake edges and a clock.
struct Pipeline {
  explicit Pipeline(const Span& span, int64_t now_ms) : clock(now_ms) {
    filter.bucket_seconds = span.bucket_seconds;
    filter.window_seconds = span.window_seconds;
    StatusOr<Layout> l = LayoutFromConfig(filter);
    REQUIRE(l.ok());
    layout = *l;
    options.batch_max_wait_ms = 0;
    options.poll_timeout_ms = 0;
    options.commit_interval_ms = int64_t{1} << 50;
    decoder = std::make_unique<Decoder>(events, filter);
    ingest = std::make_unique<Ingest>(source, sink, *decoder, layout, clock, nullptr, options);
  }

  void Send(const std::string& user, const std::string& item, int64_t ts_ms) {
    source.Append(0,
                  "{\"user_id\":\"" + user + "\",\"item_id\":\"" + item +
                      "\",\"ts\":" + std::to_string(ts_ms) + "}",
                  ts_ms);
  }

  // Processes everything appended, at the clock's current time.
  void Drain() {
    for (int i = 0; i < 100 && (source.Unconsumed() > 0 || ingest->pending()); ++i) {
      Status st = ingest->Step(stop);
      INFO(st.ToString());
      REQUIRE(st.ok());
    }
    REQUIRE(source.Unconsumed() == 0);
    REQUIRE_FALSE(ingest->pending());
    REQUIRE(ingest->totals().events_written == ingest->totals().messages);
  }

  FilterConfig filter;
  EventsConfig events;
  IngestOptions options;
  Layout layout;
  FakeSource source;
  FakeSink sink;
  FakeClock clock;
  std::atomic<bool> stop{false};
  std::unique_ptr<Decoder> decoder;
  std::unique_ptr<Ingest> ingest;
};

// What a reader that follows contract v1 as first written (revision 1, rule 6)
// sees at now_s: the live buckets up to the bucket of now, nothing after it. Other
// languages' readers may still do exactly this.
CheckResult ReadLiveBuckets(const Pipeline& p, const std::string& user,
                            const std::vector<std::string>& items, int64_t now_s) {
  const std::vector<int64_t> starts =
      LiveBuckets(now_s, p.layout.window_seconds, p.layout.bucket_seconds);
  std::vector<std::string> values;
  for (int64_t s : starts) {
    values.push_back(p.sink.RedisValue(MakeKey(p.layout.prefix, user, s, p.layout.bucket_seconds)));
  }
  return TestItems(p.layout, values, starts, items);
}

// What BloomReader::Check (and so `exposure-filter check`) sees at now_s: its own
// plan of keys, the values the sink holds for them (MGET), its TestItems.
CheckResult ReadAsBloomReader(const Pipeline& p, const std::string& user,
                              const std::vector<std::string>& items, int64_t now_s) {
  StatusOr<ReadPlan> plan = PlanRead(p.layout, user, now_s);
  REQUIRE(plan.ok());
  std::vector<std::string> values;
  for (const std::string& key : plan->keys) values.push_back(p.sink.RedisValue(key));
  return TestItems(p.layout, values, plan->bucket_starts, items);
}

TEST_CASE(
    "Contract: an event stamped after the next bucket boundary, processed before it, is "
    "found by a reader at the processing time",
    "[contract]") {
  const Span span = GENERATE(kHourSpan, kDaySpan);
  INFO(span.name);
  const int64_t boundary_ms = span.boundary_s * 1000;
  const int64_t processed_ms = boundary_ms - 2 * kMinuteMs;
  const int64_t stamped_ms = boundary_ms + 3 * kMinuteMs;  // within max_future (1 h)
  Pipeline p(span, processed_ms);
  p.Send("u1", "early-item", stamped_ms);
  p.Send("u1", "on-time-item", processed_ms - kMinuteMs);
  p.Drain();

  const int64_t now_s = processed_ms / 1000;
  const CheckResult r = ReadLiveBuckets(p, "u1", {"early-item", "on-time-item"}, now_s);
  CHECK(r.seen[0]);
  CHECK(r.seen[1]);
  const CheckResult rb = ReadAsBloomReader(p, "u1", {"early-item", "on-time-item"}, now_s);
  CHECK(rb.seen[0]);
  CHECK(rb.seen[1]);
  CHECK_FALSE(ReadAsBloomReader(p, "u1", {"never-sent"}, now_s).seen[0]);

  // Both went to the bucket of the processing time, whose key expires at that
  // bucket's end + window: the key actually written, not the one of the stamp.
  const int64_t used = BucketStart(now_s, span.bucket_seconds);
  const std::string key = MakeKey(p.layout.prefix, "u1", used, span.bucket_seconds);
  CHECK(p.sink.keys() == std::vector<std::string>{key});
  CHECK(p.sink.expire_at(key) == ExpireAt(used, span.bucket_seconds, span.window_seconds));

  // Still found once the boundary has passed, and for the whole window after.
  CHECK(ReadLiveBuckets(p, "u1", {"early-item"}, span.boundary_s + 600).seen[0]);
  CHECK(ReadLiveBuckets(p, "u1", {"early-item"}, used + span.window_seconds).seen[0]);
  CHECK(ReadAsBloomReader(p, "u1", {"early-item"}, used + span.window_seconds).seen[0]);
}

TEST_CASE("Contract: an event stamped at the clock or before keeps the bucket of its time",
          "[contract]") {
  const Span span = GENERATE(kHourSpan, kDaySpan);
  INFO(span.name);
  const int64_t processed_ms = span.boundary_s * 1000 + 5 * kMinuteMs;
  Pipeline p(span, processed_ms);
  const int64_t before_boundary_ms = span.boundary_s * 1000 - kMinuteMs;
  p.Send("u1", "old", before_boundary_ms);
  p.Send("u1", "now", processed_ms);
  p.Drain();
  const int64_t previous = BucketStart(before_boundary_ms / 1000, span.bucket_seconds);
  const std::vector<std::string> keys = {
      MakeKey(p.layout.prefix, "u1", previous, span.bucket_seconds),
      MakeKey(p.layout.prefix, "u1", span.boundary_s, span.bucket_seconds)};
  CHECK(p.sink.keys() == keys);
  CHECK(p.sink.expire_at(keys[0]) == ExpireAt(previous, span.bucket_seconds, span.window_seconds));
  CHECK(ReadAsBloomReader(p, "u1", {"old", "now"}, processed_ms / 1000).seen ==
        std::vector<bool>{true, true});
}

TEST_CASE(
    "Contract: a reader whose clock is behind the writer's finds what was written "
    "just after a boundary",
    "[contract]") {
  const Span span = GENERATE(kHourSpan, kDaySpan);
  INFO(span.name);
  // The writer's clock has passed the boundary; the reader's is 30 s behind it.
  const int64_t writer_ms = span.boundary_s * 1000 + 10 * 1000;
  const int64_t reader_s = span.boundary_s - 20;
  Pipeline p(span, writer_ms);
  p.Send("u1", "fresh", span.boundary_s * 1000 + 5 * 1000);
  p.Drain();
  CHECK(p.sink.keys() == std::vector<std::string>{
                             MakeKey(p.layout.prefix, "u1", span.boundary_s, span.bucket_seconds)});
  // BloomReader reads the bucket after the reader's newest live one.
  const CheckResult r = ReadAsBloomReader(p, "u1", {"fresh"}, reader_s);
  CHECK(r.seen[0]);
  CHECK(r.seen_bucket[0] == span.boundary_s);
  // A reader of the first text would miss it until its own clock passes the boundary.
  CHECK_FALSE(ReadLiveBuckets(p, "u1", {"fresh"}, reader_s).seen[0]);
  CHECK(ReadLiveBuckets(p, "u1", {"fresh"}, span.boundary_s).seen[0]);
}

TEST_CASE("Contract: FORMAT.md rule 4 write-time vectors (Decoder + Coalescer)", "[contract]") {
  struct Vector {
    int64_t bucket_seconds;
    int64_t ts_ms;
    int64_t clock_ms;
    const char* key;
    int64_t expire_at;
  };
  const Vector vectors[] = {
      {3600, 1763802180000, 1763801880000, "ef:{u1}:2025112208", 1766394000},
      {86400, 1763856180000, 1763855880000, "ef:{u1}:20251122", 1766448000},
      {86400, 1763800000123, 1763800000123, "ef:{u1}:20251122", 1766448000},
      {3600, 1763800000123, 1763900000000, "ef:{u1}:2025112208", 1766394000},
  };
  for (const Vector& v : vectors) {
    INFO("bucket " << v.bucket_seconds << " ts " << v.ts_ms << " clock " << v.clock_ms);
    FilterConfig filter;
    filter.bucket_seconds = v.bucket_seconds;
    filter.window_seconds = 30 * 86400;
    StatusOr<Layout> layout = LayoutFromConfig(filter);
    REQUIRE(layout.ok());
    Decoder decoder(EventsConfig{}, filter);
    const std::string payload =
        R"({"user_id":"u1","item_id":"i9","ts":)" + std::to_string(v.ts_ms) + "}";
    Event event;
    REQUIRE(decoder.Decode(payload.data(), payload.size(), 0, v.clock_ms, &event) ==
            RejectReason::kNone);
    Coalescer coalescer(*layout);
    coalescer.Add(event);
    coalescer.Seal();
    REQUIRE(coalescer.batch().size == 1);
    CHECK(coalescer.batch().keys[0].key == v.key);
    CHECK(coalescer.batch().keys[0].expire_at == v.expire_at);
  }
}

TEST_CASE("ReadBuckets: the live buckets, then the next one", "[contract]") {
  const Span span = GENERATE(kHourSpan, kDaySpan);
  INFO(span.name);
  for (const int64_t now : {span.boundary_s - 1, span.boundary_s, span.boundary_s + 1}) {
    INFO("now " << now);
    std::vector<int64_t> want = LiveBuckets(now, span.window_seconds, span.bucket_seconds);
    REQUIRE(want.size() == static_cast<size_t>(span.window_seconds / span.bucket_seconds + 1));
    want.push_back(BucketStart(now, span.bucket_seconds) + span.bucket_seconds);
    CHECK(ReadBuckets(now, span.window_seconds, span.bucket_seconds) == want);
  }
}

}  // namespace
}  // namespace ef
