// OffsetsForTime / EndOffsetsForTime against librdkafka's mock cluster, which
// answers every ListOffsets-by-time with "end": the message-timestamp binary
// search does all the work here. Semantics under test: src/kafka/offsets_for_time.h.
#include "kafka/offsets_for_time.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kafka/producer.h"
#include "support/stack.h"

namespace ef::test {
namespace {

constexpr int64_t kBase = 1'700'000'000'000;

// The reference answer: first offset with ts >= x, or ts.size().
int64_t FirstAtOrAfter(const std::vector<int64_t>& ts, int64_t x) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i] >= x) return static_cast<int64_t>(i);
  return static_cast<int64_t>(ts.size());
}

int MaxProbes(size_t n) { return 1 + static_cast<int>(std::ceil(std::log2(n))); }

class Fixture {
 public:
  Fixture() : stack_(4) {
    ProducerOptions po;
    po.bootstrap_servers = stack_.kafka().bootstrap_servers();
    auto p = KafkaProducer::Create(po);
    REQUIRE(p.ok());
    producer_ = std::move(p.value());
    config_.bootstrap_servers = stack_.kafka().bootstrap_servers();
    config_.topics = {stack_.topic()};
    config_.group_id = stack_.group() + "-seek";
  }
  // Produces one message per timestamp into `partition`, in order.
  void Fill(int32_t partition, const std::vector<int64_t>& ts) {
    for (size_t i = 0; i < ts.size(); ++i)
      REQUIRE(
          producer_->Produce(stack_.topic(), partition, "k", "m" + std::to_string(i), ts[i]).ok());
    REQUIRE(producer_->Flush(10000).ok());
  }
  TopicPartition Tp(int32_t p) const { return {stack_.topic(), p}; }
  const KafkaConfig& config() const { return config_; }

 private:
  Stack stack_;
  std::unique_ptr<KafkaProducer> producer_;
  KafkaConfig config_;
};

TEST_CASE("offsets for time: binary search fallback on the mock", "[integration][replay]") {
  Fixture f;
  // p0: 100 messages, non-decreasing, two per timestamp (base + 1000 * (i / 2)).
  std::vector<int64_t> mono;
  for (int i = 0; i < 100; ++i) mono.push_back(kBase + 1000 * (i / 2));
  f.Fill(0, mono);
  // p1: ordered except offset 5, stamped far in the future (breaks the skew bound).
  std::vector<int64_t> outlier;
  for (int i = 0; i < 64; ++i) outlier.push_back(kBase + 1000 * i);
  outlier[5] = kBase + 1'000'000;
  f.Fill(1, outlier);
  // p2: empty. p3: 200 messages jittered by up to +-4 s around 1 s steps, so a
  // later message is at most 7 s older than an earlier one (skew bound 10 s).
  std::vector<int64_t> jitter;
  const int64_t j[3] = {0, 4000, -4000};
  for (int i = 0; i < 200; ++i) jitter.push_back(kBase + 1000 * i + j[i % 3]);
  f.Fill(3, jitter);

  const std::vector<TopicPartition> all = {f.Tp(0), f.Tp(1), f.Tp(2), f.Tp(3)};
  TimeSeekOptions exact;
  exact.max_skew_ms = 0;

  SECTION("ordered partition, exact with max_skew_ms = 0; empty partition") {
    struct Case {
      int64_t t;
      int64_t want;
    };
    const Case cases[] = {
        {kBase - 5000, 0},     // before all
        {kBase + 25000, 50},   // equal to a timestamp: the first of the two
        {kBase + 25500, 52},   // between timestamps
        {kBase + 49000, 98},   // the last timestamp
        {kBase + 49001, 100},  // after all: the high watermark
    };
    for (const auto& c : cases) {
      CAPTURE(c.t - kBase);
      TimeSeekStats stats;
      auto r = OffsetsForTime(f.config(), {f.Tp(0), f.Tp(2)}, c.t, 5000, exact, &stats);
      REQUIRE(r.ok());
      CHECK(r.value()[0] == c.want);
      CHECK(r.value()[0] == FirstAtOrAfter(mono, c.t));
      CHECK(r.value()[1] == 0);  // empty partition: its high watermark
      // The mock has no time index: every answer comes from message timestamps.
      CHECK_FALSE(stats.broker_answered[0]);
      CHECK(stats.probes[0] >= 1);
      CHECK(stats.probes[0] <= MaxProbes(mono.size()));  // 8 for 100 messages
      CHECK(stats.probes[1] == 0);
      if (c.want == 100) CHECK(stats.probes[0] == 1);  // only the last message read
    }
  }

  SECTION("--until: exclusive end, first offset with ts > until") {
    const std::pair<int64_t, int64_t> cases[] = {
        {kBase - 1, 0}, {kBase + 25000, 52}, {kBase + 25500, 52}, {kBase + 49000, 100}};
    for (const auto& [until, want] : cases) {
      CAPTURE(until - kBase);
      auto r = EndOffsetsForTime(f.config(), {f.Tp(0), f.Tp(2)}, until, 5000, exact);
      REQUIRE(r.ok());
      CHECK(r.value()[0] == want);
      CHECK(r.value()[1] == 0);
    }
  }

  SECTION("out-of-order beyond the skew bound: a local boundary, the outlier is skipped") {
    const int64_t t = kBase + 40000;
    TimeSeekStats stats;
    auto r = OffsetsForTime(f.config(), {f.Tp(1)}, t, 5000, exact, &stats);
    REQUIRE(r.ok());
    const int64_t b = r.value()[0];
    // Documented: ts(b - 1) < T <= ts(b); offset 5 (ts >= T) lies before it.
    REQUIRE(b > 0);
    REQUIRE(b < 64);
    CHECK(outlier[b - 1] < t);
    CHECK(outlier[b] >= t);
    CHECK(b == 40);
    CHECK(FirstAtOrAfter(outlier, t) == 5);
    CHECK(stats.probes[0] <= MaxProbes(outlier.size()));
  }

  SECTION("out-of-order within the skew bound: nothing at or after T is skipped") {
    TimeSeekOptions opt;
    opt.max_skew_ms = 10000;
    for (int64_t t = kBase - 2000; t <= kBase + 205000; t += 15500) {
      CAPTURE(t - kBase);
      TimeSeekStats stats;
      auto r = OffsetsForTime(f.config(), all, t, 5000, opt, &stats);
      REQUIRE(r.ok());
      const int64_t b = r.value()[3];
      // Never skips: no message before b has ts >= T ...
      CHECK(b <= FirstAtOrAfter(jitter, t));
      // ... and replays little: b is at or after the first ts >= T - 2 * skew.
      CHECK(b >= FirstAtOrAfter(jitter, t - 2 * opt.max_skew_ms));
      CHECK(stats.probes[3] <= MaxProbes(jitter.size()));  // 9 for 200 messages
      CHECK(r.value()[2] == 0);
      CHECK(stats.probes[2] == 0);

      // --until with the same bound: nothing at or after the end has ts <= U.
      auto e = EndOffsetsForTime(f.config(), {f.Tp(3)}, t, 5000, opt);
      REQUIRE(e.ok());
      const int64_t end = e.value()[0];
      for (size_t i = static_cast<size_t>(end); i < jitter.size(); ++i) CHECK(jitter[i] > t);
    }
  }

  SECTION("default skew bound is 5 minutes") {
    CHECK(TimeSeekOptions{}.max_skew_ms == 300000);
    auto r = OffsetsForTime(f.config(), {f.Tp(0)}, kBase + 300000 + 25000, 5000);
    REQUIRE(r.ok());
    CHECK(r.value()[0] == 50);
  }

  SECTION("a partition named twice is an argument error") {
    auto r = OffsetsForTime(f.config(), {f.Tp(0), f.Tp(0)}, kBase, 5000);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ef::test
