// ContentConsumer (src/pipeline/content_consumer.h), the loop of `exposure-filter
// content`, with fakes at its edges only: the source (FakeSource) and the content
// index (an Assign function). The real decoder. Its guarantees: an offset is
// committed only after every message before it was assigned or rejected; while
// Assign fails the batch is kept, the source paused and polled, and Assign
// retried; bad items are counted by reason and stepped over; an error Assign
// cannot recover from ends Run at once; a commit the source holds back is neither
// counted nor failed. (tests/content/consumer_test.cc runs the command end to end
// on Redis and the mock cluster.)
#include "pipeline/content_consumer.h"

#include <prometheus/registry.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "event/item_decoder.h"
#include "metrics/content_metrics.h"
#include "support/fakes.h"

namespace ef {
namespace {

using ::ef::testing::FakeSource;

std::string Item(const std::string& id, uint64_t simhash) {
  return R"({"item_id":")" + id + R"(","simhash":)" + std::to_string(simhash) + "}";
}

// The content index: each item its own cluster; the first `fail` calls fail with
// `code`. Records, per call, the items and what the source had committed then.
struct FakeIndex {
  int fail = 0;
  StatusCode code = StatusCode::kUnavailable;
  FakeSource* source = nullptr;
  std::vector<std::vector<std::string>> calls;
  std::vector<int64_t> committed_at_call;  // -1: nothing committed yet

  StatusOr<std::vector<contentdb::Assignment>> operator()(
      const std::vector<contentdb::ContentItem>& items) {
    std::vector<std::string> ids;
    for (const auto& i : items) ids.push_back(i.item_id);
    calls.push_back(ids);
    auto c = source->committed().find(source->Tp(0));
    committed_at_call.push_back(c == source->committed().end() ? -1 : c->second);
    if (fail > 0) {
      --fail;
      return Status(code, "fake index: failing (simulated)");
    }
    std::vector<contentdb::Assignment> out;
    for (const auto& i : items) out.push_back({i.item_id, false, "", -1});
    return out;
  }
};

ContentConsumerOptions Fast(FakeSource& source) {
  ContentConsumerOptions o;
  o.batch_max_items = 2;
  o.batch_max_wait_ms = 0;
  o.poll_timeout_ms = 1;
  o.commit_interval_ms = 0;  // an async commit after every step
  o.backoff_min_ms = 1;
  o.backoff_max_ms = 2;
  o.shutdown_grace_ms = 2000;
  o.end_offsets = {{source.Tp(0), source.EndOffset(0)}};
  return o;
}

struct Run {
  FakeSource source{"items", 1};
  FakeIndex index;
  ItemDecoder decoder;
  prometheus::Registry registry;
  ContentMetrics metrics{registry};
  Run() {
    index.source = &source;
    source.Assign(source.Tp(0));
  }
  Status Go() {
    ContentConsumer loop(
        source, decoder, [this](const auto& items) { return index(items); }, &metrics,
        Fast(source));
    std::atomic<bool> stop{false};
    Status st = loop.Run(stop);
    totals = loop.totals();
    return st;
  }
  ContentTotals totals;
  int64_t Committed() {
    auto c = source.committed().find(source.Tp(0));
    return c == source.committed().end() ? -1 : c->second;
  }
};

}  // namespace

TEST_CASE("ContentConsumer: while Assign fails nothing of the batch is committed, then all is",
          "[pipeline][content]") {
  Run r;
  for (int i = 1; i <= 4; ++i) r.source.Append(0, Item("i" + std::to_string(i), i * 1000003ULL));
  r.index.fail = 3;
  REQUIRE(r.Go().ok());
  // The first batch (i1, i2) three times failing, then assigned; then i3, i4.
  REQUIRE(r.index.calls.size() == 5);
  for (int c = 0; c < 4; ++c) {
    INFO("call " << c);
    CHECK(r.index.calls[c] == std::vector<std::string>{"i1", "i2"});
    CHECK(r.index.committed_at_call[c] <= 0);  // nothing of the batch committed
  }
  CHECK(r.index.calls[4] == std::vector<std::string>{"i3", "i4"});
  CHECK(r.index.committed_at_call[4] == 2);  // the first batch, once assigned
  CHECK(r.Committed() == 4);
  CHECK(r.totals.assign_failures == 3);
  CHECK(r.totals.items_new == 4);
  CHECK(r.totals.batches == 2);
  // The source was paused while Assign failed, and polled meanwhile.
  CHECK(r.source.pause_calls() >= 1);
  CHECK(r.source.polls_while_paused() >= 1);
  CHECK_FALSE(r.source.paused());
  CHECK(r.source.commits().back().sync);  // the end: a sync commit
}

TEST_CASE("ContentConsumer: bad items are counted by reason and committed past",
          "[pipeline][content]") {
  Run r;
  r.source.Append(0, "not json");
  r.source.Append(0, R"({"item_id":"","simhash":7})");
  r.source.Append(0, Item("good", 42));
  r.source.Append(0, R"({"item_id":"no-content"})");
  r.source.Append(0, R"({"item_id":"s","simhash":"xyz"})");
  REQUIRE(r.Go().ok());
  CHECK(r.Committed() == 5);
  CHECK(r.totals.messages == 5);
  CHECK(r.totals.rejected == 4);
  CHECK(r.totals.rejected_by_reason ==
        std::map<std::string, uint64_t>{
            {"not_json", 1}, {"empty_item", 1}, {"missing_content", 1}, {"bad_simhash", 1}});
  CHECK(r.totals.items_new == 1);
  std::vector<std::string> assigned;
  for (const auto& c : r.index.calls) assigned.insert(assigned.end(), c.begin(), c.end());
  CHECK(assigned == std::vector<std::string>{"good"});
}

TEST_CASE("ContentConsumer: an error Assign cannot recover from ends Run, nothing committed",
          "[pipeline][content]") {
  Run r;
  r.source.Append(0, Item("i1", 1));
  r.source.Append(0, Item("i2", 2));
  r.index.fail = 1;
  r.index.code = StatusCode::kPermissionDenied;  // e.g. NOPERM from Redis
  const Status st = r.Go();
  CHECK(st.code() == StatusCode::kPermissionDenied);
  CHECK(r.index.calls.size() == 1);
  CHECK(r.Committed() <= 0);
}

TEST_CASE("ContentConsumer: a commit the source holds back is neither counted nor failed",
          "[pipeline][content]") {
  Run r;
  for (int i = 1; i <= 6; ++i) r.source.Append(0, Item("i" + std::to_string(i), i));
  r.source.HoldNextAsyncCommits(2);
  REQUIRE(r.Go().ok());
  CHECK(r.source.held_commits() == 2);
  CHECK(r.Committed() == 6);
  // Every commit counted was sent (the fake records sent commits only); a held
  // one is not a failure.
  CHECK(r.totals.commits == r.source.commits().size());
  CHECK(r.metrics.commits_ok->Value() == static_cast<double>(r.source.commits().size()));
  CHECK(r.metrics.commits_failed->Value() == 0);
}

TEST_CASE(
    "ContentConsumer: a revoke commits what was assigned of the revoked partitions at once, "
    "a failed one is counted, a lost one sends nothing",
    "[pipeline][content]") {
  enum class Kind { kCommitted, kFailed, kLost };
  for (Kind kind : {Kind::kCommitted, Kind::kFailed, Kind::kLost}) {
    INFO("kind " << static_cast<int>(kind));
    FakeSource source("items", 2);
    source.Assign(source.Tp(0));
    source.Assign(source.Tp(1));
    source.Append(0, Item("a1", 1));
    source.Append(0, Item("a2", 2));
    source.Append(1, Item("b1", 3));
    source.Append(1, Item("b2", 4));
    FakeIndex index;
    index.source = &source;
    ItemDecoder decoder;
    prometheus::Registry registry;
    ContentMetrics metrics{registry};
    ContentConsumerOptions o = Fast(source);
    o.commit_interval_ms = 1000000;  // no async commit: only the revoke's and the final one
    o.end_offsets.clear();
    std::atomic<bool> stop{false};
    // Poll 1 takes a1, a2 (partition 0); before poll 2, partition 0 is revoked;
    // poll 2 takes b1, b2; poll 3 stops the loop.
    source.on_poll = [&](FakeSource& s) {
      if (s.polls() == 2) {
        if (kind == Kind::kFailed) s.FailNextCommits(1);
        s.RevokeOnNextPoll({s.Tp(0)}, /*lost=*/kind == Kind::kLost);
      }
      if (s.polls() == 3) stop = true;
    };
    ContentConsumer loop(
        source, decoder, [&](const auto& items) { return index(items); }, &metrics, o);
    REQUIRE(loop.Run(stop).ok());
    REQUIRE(index.calls.size() == 2);
    CHECK(index.calls[0] == std::vector<std::string>{"a1", "a2"});
    CHECK(index.calls[1] == std::vector<std::string>{"b1", "b2"});
    // The final commit is partition 1's only: partition 0 is no longer ours.
    REQUIRE_FALSE(source.commits().empty());
    CHECK(source.commits().back().sync);
    REQUIRE(source.commits().back().offsets.size() == 1);
    CHECK(source.commits().back().offsets[0].tp == source.Tp(1));
    CHECK(source.commits().back().offsets[0].offset == 2);
    switch (kind) {
      case Kind::kCommitted:  // partition 0 at 2, synchronously, on the revoke
        REQUIRE(source.commits().size() == 2);
        CHECK(source.commits()[0].sync);
        REQUIRE(source.commits()[0].offsets.size() == 1);
        CHECK(source.commits()[0].offsets[0].tp == source.Tp(0));
        CHECK(source.commits()[0].offsets[0].offset == 2);
        CHECK(loop.totals().commits == 2);
        CHECK(metrics.commits_ok->Value() == 2);
        CHECK(metrics.commits_failed->Value() == 0);
        break;
      case Kind::kFailed:  // tried and refused: counted as failed, not as a commit
        REQUIRE(source.commits().size() == 2);
        CHECK_FALSE(source.commits()[0].ok);
        CHECK(source.commits()[0].offsets[0].tp == source.Tp(0));
        CHECK(loop.totals().commits == 1);
        CHECK(metrics.commits_ok->Value() == 1);
        CHECK(metrics.commits_failed->Value() == 1);
        break;
      case Kind::kLost:  // the group gave it away: no commit is tried
        CHECK(source.commits().size() == 1);
        CHECK(loop.totals().commits == 1);
        CHECK(metrics.commits_failed->Value() == 0);
        break;
    }
    CHECK(source.committed().count(source.Tp(0)) == (kind == Kind::kCommitted ? 1u : 0u));
  }
}

}  // namespace ef
