// exposure_filter::Client (include/exposure_filter/client.h) against a real
// redis-server, with bits written by the daemon's own writer (RedisBitWriter):
// answers, one MGET per user, layout v2, invalid user IDs, fail open / closed when
// Redis is down or too slow, reconnect after a restart, threads, SeenBatch, and the
// installed package used by an outside project (examples/recall).
#include "exposure_filter/client.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stages.h"
#include "redis/meta.h"
#include "support/items_key.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir.h"
#include "support/wait.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using exposure_filter::Client;
using exposure_filter::ClientOptions;
using exposure_filter::ErrorCode;
using exposure_filter::OnError;
using exposure_filter::Query;
using exposure_filter::QueryView;
using exposure_filter::Result;

constexpr int64_t kDay = 86400;

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

// A redis-server and a layout (prefix "ct:", 1d buckets, 30d window); Write puts
// items into a user's bucket `days_ago` days back with the daemon's writer.
struct Fixture {
  RedisServer redis;
  FilterConfig filter;
  Layout layout;

  explicit Fixture(int64_t items_per_bucket = 200, uint32_t stages = 1,
                   uint32_t layout_version = 3) {
    filter.key_prefix = "ct:";
    filter.items_per_bucket = items_per_bucket;
    filter.stages = stages;
    filter.layout_version = layout_version;
    auto l = LayoutFromConfig(filter);
    REQUIRE(l.ok());
    layout = *l;
  }

  std::vector<std::string> Overrides() const {
    return {"redis.address=" + redis.address(), "filter.key_prefix=" + filter.key_prefix,
            "filter.items_per_bucket=" + std::to_string(filter.items_per_bucket),
            "filter.stages=" + std::to_string(filter.stages),
            "filter.layout_version=" + std::to_string(filter.layout_version)};
  }

  ClientOptions Options(OnError on_error = OnError::kFailOpen) const {
    ClientOptions o;
    o.overrides = Overrides();
    o.on_error = on_error;
    o.timeout = 500ms;
    return o;
  }

  std::unique_ptr<Client> MakeClient(const ClientOptions& o) const {
    std::string error;
    auto client = Client::Create(o, &error);
    INFO(error);
    REQUIRE(client);
    return client;
  }

  void Write(const std::string& user, int days_ago, const std::vector<std::string>& items) {
    const int64_t start = BucketStart(Now() - days_ago * kDay, kDay);
    BitBatch batch;
    batch.keys.push_back(test::KeyOfItems(layout, MakeKey(layout.prefix, user, start, kDay), items,
                                          ExpireAt(start, kDay, layout.window_seconds)));
    batch.size = 1;
    BitWriterOptions o;
    o.redis.port = redis.port();
    o.layout = layout;
    RedisBitWriter writer(o);
    REQUIRE(writer.Write(batch, nullptr).ok());
  }

  // Independent of the client: GET each key a reader reads and test every stage.
  std::vector<bool> Oracle(const std::string& user, const std::vector<std::string>& items) const {
    auto conn = redis.Connect();
    std::vector<std::string> values;
    const std::vector<int64_t> starts = ReadBuckets(Now(), layout.window_seconds, kDay);
    for (int64_t s : starts) {
      auto v = conn->Command({"GET", MakeKey(layout.prefix, user, s, kDay)});
      REQUIRE(v.ok());
      values.push_back(v->str);
    }
    // The stored layout (v2 once the writer ensured it; v3 from v3_from 0).
    std::vector<bool> out;
    for (const auto& item : items) {
      const Hash128 h = HashItem(item, layout.seed);
      bool seen = false;
      for (size_t b = 0; b < values.size(); ++b)
        seen = seen || ValueContains(values[b], layout.stage_table, layout.RuleFor(starts[b]), h);
      out.push_back(seen);
    }
    return out;
  }

  uint64_t MgetCalls() const {
    auto conn = redis.Connect();
    const std::string f = RedisServer::InfoField(*conn, "commandstats", "cmdstat_mget");
    if (f.empty()) return 0;
    return std::stoull(f.substr(f.find('=') + 1));
  }
};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

// docs/GUIDE.md "The client library": pool_size 4, a 50 ms per-call deadline,
// fail open, the layout read again every 10 s.
TEST_CASE("client: ClientOptions defaults are the ones GUIDE.md states", "[integration][client]") {
  const ClientOptions o;
  CHECK(o.pool_size == 4);
  CHECK(o.timeout == std::chrono::milliseconds(50));
  CHECK(o.on_error == OnError::kFailOpen);
  CHECK(o.layout_recheck == std::chrono::seconds(10));
  CHECK_FALSE(o.allow_missing_layout);
}

TEST_CASE("client: seen and unseen candidates of items the writer wrote, one MGET per call",
          "[integration][client]") {
  Fixture fx;
  fx.Write("u1", 0, Items("today", 50));
  fx.Write("u1", 10, Items("older", 50));
  fx.Write("u2", 0, Items("other", 50));
  auto client = fx.MakeClient(fx.Options());
  CHECK(client->layout().stored);
  CHECK(client->layout().version == 3);  // a fresh deployment, one stage

  const auto candidates = Concat(Concat(Items("today", 50), Items("older", 50)), Items("new", 200));
  const uint64_t mgets_before = fx.MgetCalls();
  const Result r = client->Seen("u1", candidates);
  CHECK(fx.MgetCalls() == mgets_before + 1);
  REQUIRE(r.ok);
  CHECK_FALSE(r.failed_open);
  REQUIRE(r.seen.size() == candidates.size());
  CHECK(r.buckets_read == 32);  // 30 live 1d buckets of a 30d window + 1, and the next one
  CHECK(r.buckets_present == 2);
  for (size_t i = 0; i < 100; ++i) CHECK(r.seen[i]);  // no false negatives
  CHECK(r.seen == fx.Oracle("u1", candidates));
  size_t false_positives = 0;
  for (size_t i = 100; i < candidates.size(); ++i) false_positives += r.seen[i];
  CHECK(false_positives < 10);  // 200 new items, fpr 1% over the window
  CHECK(r.seen_count == 100 + false_positives);

  const auto unseen = client->Unseen("u1", candidates);
  std::vector<std::string> expected;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!r.seen[i]) expected.push_back(candidates[i]);
  CHECK(unseen == expected);

  // The same candidates as views (read in place): the same answer.
  const std::vector<std::string_view> views(candidates.begin(), candidates.end());
  const Result rv = client->SeenViews("u1", views, std::chrono::milliseconds(1000));
  REQUIRE(rv.ok);
  CHECK(rv.seen == r.seen);
  CHECK(rv.seen_count == r.seen_count);
  CHECK(client->SeenViews("u1", std::span<const std::string_view>()).seen.empty());
  CHECK(client->Seen("u1", {}).seen.empty());  // unambiguous: the view form has its own name

  // u2's items are not u1's, and u1's not u2's.
  CHECK(client->Seen("u2", Items("other", 50)).seen_count == 50);
  CHECK(client->Seen("u3", Items("today", 50)).seen_count == 0);
  const auto stats = client->stats();
  CHECK(stats.calls == 7);
  CHECK(stats.users == 7);
  CHECK(stats.candidates == 3 * candidates.size() + 100);
  CHECK(stats.seen == 3 * r.seen_count + 50);
  CHECK(stats.failed_open == 0);
  CHECK(stats.redis_errors == 0);
  CHECK(client->Ready());
}

TEST_CASE("client: layout v2, a heavy user's items in several stages are all seen",
          "[integration][client][v2]") {
  Fixture fx(10, 8, 2);  // 10 items per bucket at stage 0: 300 items fill several stages
  REQUIRE(fx.layout.version() == 2);
  fx.Write("heavy", 1, Items("h", 300));
  auto conn = fx.redis.Connect();
  const std::string key = MakeKey(fx.layout.prefix, "heavy", BucketStart(Now() - kDay, kDay), kDay);
  const auto len = conn->Command({"STRLEN", key})->integer;
  CHECK(StagesPresent(fx.layout.stage_table, static_cast<size_t>(len)) >= 3);

  auto client = fx.MakeClient(fx.Options());
  CHECK(client->layout().version == 2);
  const auto candidates = Concat(Items("h", 300), Items("n", 300));
  const Result r = client->Seen("heavy", candidates);
  REQUIRE(r.ok);
  for (size_t i = 0; i < 300; ++i) CHECK(r.seen[i]);
  CHECK(r.seen == fx.Oracle("heavy", candidates));

  // A v1 reader (stage 0 only) misses items of later stages: the stages matter.
  Layout v1 = fx.layout.SingleStage();
  size_t stage0_only = 0;
  auto value = conn->Command({"GET", key});
  for (const auto& item : Items("h", 300))
    stage0_only +=
        ValueContains(value->str, v1.stage_table, PositionRule::kModulo, HashItem(item, v1.seed));
  CHECK(stage0_only < 300);
}

TEST_CASE("client: an invalid user ID is an error whatever the policy, and costs no MGET",
          "[integration][client]") {
  Fixture fx;
  fx.Write("u1", 0, Items("a", 10));
  for (OnError policy : {OnError::kFailOpen, OnError::kFailClosed}) {
    auto client = fx.MakeClient(fx.Options(policy));
    const uint64_t mgets = fx.MgetCalls();
    for (const std::string user : {"", "}x"}) {
      const Result r = client->Seen(user, Items("a", 10));
      CHECK_FALSE(r.ok);
      CHECK_FALSE(r.failed_open);
      CHECK(r.code == ErrorCode::kInvalidArgument);
      CHECK(r.error.find("user") != std::string::npos);
      CHECK(r.seen == std::vector<bool>(10, false));
      CHECK(client->Unseen(user, Items("a", 10)).empty());
    }
    CHECK(fx.MgetCalls() == mgets);
    CHECK(client->stats().errors == 4);
    CHECK(client->stats().failed_open == 0);
  }
}

TEST_CASE("client: SeenBatch answers each query as Seen does, in one call",
          "[integration][client]") {
  Fixture fx;
  std::vector<Query> queries;
  for (int u = 0; u < 6; ++u) {
    const std::string user = "b" + std::to_string(u);
    fx.Write(user, u, Items(user, 20 + u));
    queries.push_back({user, Concat(Items(user, 20 + u), Items("b0", 20))});
  }
  queries.push_back({"}bad", Items("x", 3)});
  queries.push_back({"nobody", Items("b1", 5)});
  auto client = fx.MakeClient(fx.Options());
  const uint64_t mgets = fx.MgetCalls();
  const auto batch = client->SeenBatch(queries);
  CHECK(fx.MgetCalls() == mgets + queries.size() - 1);  // one MGET per valid user
  REQUIRE(batch.size() == queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    INFO("query " << i << " user " << queries[i].user);
    const Result single = client->Seen(queries[i].user, queries[i].candidates);
    CHECK(batch[i].ok == single.ok);
    CHECK(batch[i].code == single.code);
    CHECK(batch[i].seen == single.seen);
    CHECK(batch[i].seen_count == single.seen_count);
    CHECK(batch[i].buckets_present == single.buckets_present);
  }
  CHECK(batch[0].seen_count >= 40);  // b0's own items and the b0 candidates
  CHECK(batch[6].code == ErrorCode::kInvalidArgument);
  CHECK(client->stats().calls == 1 + queries.size());

  // The same queries as views (no copies): the same answers, one MGET per valid user.
  std::vector<std::vector<std::string_view>> item_views(queries.size());
  std::vector<QueryView> views;
  for (size_t i = 0; i < queries.size(); ++i) {
    item_views[i].assign(queries[i].candidates.begin(), queries[i].candidates.end());
    views.push_back({queries[i].user, item_views[i]});
  }
  const uint64_t mgets_before_views = fx.MgetCalls();
  const auto by_view = client->SeenBatchViews(views, std::chrono::milliseconds(1000));
  CHECK(fx.MgetCalls() == mgets_before_views + queries.size() - 1);
  REQUIRE(by_view.size() == batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    INFO("query " << i << " user " << queries[i].user);
    CHECK(by_view[i].ok == batch[i].ok);
    CHECK(by_view[i].code == batch[i].code);
    CHECK(by_view[i].seen == batch[i].seen);
    CHECK(by_view[i].seen_count == batch[i].seen_count);
  }
  CHECK(client->SeenBatchViews(std::span<const QueryView>()).empty());
}

TEST_CASE("client: Redis down fails open (all unseen, counted) or closed, within the deadline",
          "[integration][client][faults]") {
  Fixture fx;
  fx.Write("u1", 0, Items("a", 20));
  auto open = fx.MakeClient(fx.Options(OnError::kFailOpen));
  auto closed = fx.MakeClient(fx.Options(OnError::kFailClosed));
  REQUIRE(open->Seen("u1", Items("a", 20)).seen_count == 20);
  REQUIRE(closed->Seen("u1", Items("a", 20)).seen_count == 20);
  fx.redis.Stop();

  for (int i = 0; i < 3; ++i) {  // the first finds its connection closed, the next cannot connect
    const auto start = std::chrono::steady_clock::now();
    const Result r = open->Seen("u1", Items("a", 20), 200ms);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took < 200ms + 1s);  // generous margin for a loaded machine; no waiting for Redis
    CHECK(r.ok);
    CHECK(r.failed_open);
    CHECK(r.code == ErrorCode::kUnavailable);
    CHECK(r.error.find(fx.redis.address()) != std::string::npos);
    CHECK(r.seen == std::vector<bool>(20, false));
    CHECK(open->Unseen("u1", Items("a", 20)) == Items("a", 20));
  }
  CHECK(open->stats().failed_open == 6);
  CHECK(open->stats().redis_errors == 6);
  CHECK_FALSE(open->Ready());

  const Result c = closed->Seen("u1", Items("a", 20), 200ms);
  CHECK_FALSE(c.ok);
  CHECK_FALSE(c.failed_open);
  CHECK(c.code == ErrorCode::kUnavailable);
  CHECK(closed->Unseen("u1", Items("a", 20)).empty());
  CHECK(closed->stats().errors == 2);
  CHECK(closed->stats().failed_open == 0);

  // Create itself fails with one line naming the address.
  std::string error;
  ErrorCode code = ErrorCode::kOk;
  CHECK_FALSE(Client::Create(fx.Options(), &error, &code));
  CHECK(code == ErrorCode::kUnavailable);
  CHECK(error.find(fx.redis.address()) != std::string::npos);
}

TEST_CASE("client: a Redis that answers too slowly fails the call at its deadline",
          "[integration][client][faults]") {
  Fixture fx;
  fx.Write("u1", 0, Items("a", 20));
  // Margins for a loaded machine: the default deadline (1.5 s) is 30 times the
  // call's (50 ms), and Redis answers 2 s after it at the earliest.
  ClientOptions options = fx.Options(OnError::kFailOpen);
  options.timeout = 1500ms;
  auto client = fx.MakeClient(options);
  REQUIRE(client->Seen("u1", Items("a", 20)).seen_count == 20);
  // CLIENT PAUSE holds every client's commands for 3.5 s: Redis is up but slow.
  auto admin = fx.redis.Connect();
  const auto paused = std::chrono::steady_clock::now();
  REQUIRE(admin->Command({"CLIENT", "PAUSE", "3500", "ALL"})->type != RedisReply::Type::kError);
  // A call deadline shorter than ClientOptions::timeout bounds the wait (the
  // socket timeout is what is left of the deadline): well before the 1.5 s that
  // ClientOptions::timeout alone would wait.
  const auto start2 = std::chrono::steady_clock::now();
  const Result r2 = client->Seen("u1", Items("a", 20), 50ms);
  const auto took2 = std::chrono::steady_clock::now() - start2;
  CHECK(r2.failed_open);
  CHECK(took2 < 1000ms);
  CHECK(client->stats().redis_errors == 1);
  // The default deadline bounds the wait too: failed open before Redis answers.
  const Result r = client->Seen("u1", Items("a", 20));
  const auto end = std::chrono::steady_clock::now();
  CHECK(r.failed_open);
  CHECK(end - paused < 3500ms);  // answered before Redis did
  // After the pause the client reconnects and answers again.
  CHECK(WaitFor([&] { return client->Seen("u1", Items("a", 20)).seen_count == 20; }, 10s));
  CHECK(client->Ready());
}

TEST_CASE("client: reconnects after Redis restarts and re-reads the layout",
          "[integration][client][faults]") {
  Fixture fx;
  fx.Write("u1", 0, Items("a", 20));
  auto client = fx.MakeClient(fx.Options());
  REQUIRE(client->Seen("u1", Items("a", 20)).seen_count == 20);
  fx.redis.Stop();
  CHECK(client->Seen("u1", Items("a", 20)).failed_open);
  fx.redis.Start();  // AOF: the bits and the meta are back
  CHECK(WaitFor(
      [&] {
        const Result r = client->Seen("u1", Items("a", 20));
        return r.ok && !r.failed_open && r.seen_count == 20;
      },
      10s));
  CHECK(client->stats().reconnects >= 1);
  CHECK(client->Ready());
  CHECK(client->Ping(500ms));

  // A meta that no longer matches the config (another m) fails the calls after
  // the next reconnect: the layout is checked again.
  auto admin = fx.redis.Connect();
  REQUIRE(admin->Command({"HSET", MetaKey(fx.layout.prefix), "m", "1234"})->type !=
          RedisReply::Type::kError);
  fx.redis.Stop();
  fx.redis.Start();
  CHECK(WaitFor(
      [&] { return client->Seen("u1", Items("a", 20)).code == ErrorCode::kLayoutMismatch; }, 10s));
  const Result r = client->Seen("u1", Items("a", 20));
  CHECK(r.failed_open);
  CHECK(r.error.find("m: stored 1234") != std::string::npos);
}

TEST_CASE("client: threads calling concurrently on a small pool get correct answers",
          "[integration][client]") {
  Fixture fx;
  for (int u = 0; u < 4; ++u)
    fx.Write("t" + std::to_string(u), u, Items("t" + std::to_string(u), 30));
  ClientOptions o = fx.Options();
  o.pool_size = 2;
  o.timeout = 5s;  // the test checks answers, not latency
  auto client = fx.MakeClient(o);
  std::vector<std::vector<bool>> expected(4);
  const auto candidates = Concat(Items("t0", 30), Items("t3", 30));
  for (int u = 0; u < 4; ++u) expected[u] = fx.Oracle("t" + std::to_string(u), candidates);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const int u = (t + i) % 4;
        const Result r = client->Seen("t" + std::to_string(u), candidates);
        if (!r.ok || r.failed_open || r.seen != expected[u]) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  CHECK(client->stats().calls == 240);
  CHECK(client->stats().failed_open == 0);
}

TEST_CASE(
    "client: the installed package builds examples/recall, which prints the unseen items and two "
    "pages that share no item",
    "[integration][client][install]") {
  Fixture fx;
  fx.Write("r1", 2, Items("seen", 5));
  TempDir dir;
  const std::string build_dir = std::filesystem::path(EF_BINARY).parent_path().string();
  std::vector<std::string> argv = {std::string(EF_SOURCE_DIR) + "/examples/recall/build-and-run.sh",
                                   build_dir, dir.path()};
  for (const auto& o : fx.Overrides()) {
    argv.push_back("--set");
    argv.push_back(o);
  }
  argv.insert(argv.end(), {"-u", "r1", "seen-0", "fresh-1", "seen-4", "fresh-2"});
  const SplitRunResult run = RunCommandWithEnv(argv, {}, "", 300s);
  INFO(run.out << run.err << dir.Read("build.log"));
  REQUIRE(run.code == 0);
  CHECK(run.out == "fresh-1\nfresh-2\n");
  CHECK(run.err.find("2 of 4 candidate(s) seen by r1") != std::string::npos);
  CHECK(std::filesystem::exists(dir.File("prefix/include/exposure_filter/client.h")));

  // The page-2 case (README "Paged feeds"): --page 2 returns page 1 with
  // FilterAndMark, then page 2 from the same pool with no exposure in between.
  std::vector<std::string> paged = {dir.File("build/recall")};
  for (const auto& o : fx.Overrides()) paged.insert(paged.end(), {"--set", o});
  const std::vector<std::string> pool = {"seen-0",  "fresh-1", "seen-4", "fresh-2",
                                         "fresh-3", "fresh-4", "fresh-5"};
  paged.insert(paged.end(), {"-u", "r1", "--page", "2"});
  paged.insert(paged.end(), pool.begin(), pool.end());
  const SplitRunResult pages = RunCommandWithEnv(paged, {}, "", 60s);
  INFO(pages.out << pages.err);
  REQUIRE(pages.code == 0);
  CHECK(pages.out == "page 1: fresh-1 fresh-2\npage 2: fresh-3 fresh-4\non both pages: 0\n");
  // Page 2 shares no item with page 1 (read from the output, not from its last line).
  auto page_items = [&](const std::string& label) {
    std::vector<std::string> items;
    const size_t at = pages.out.find(label);
    if (at == std::string::npos) return items;
    std::string line =
        pages.out.substr(at + label.size(), pages.out.find('\n', at) - at - label.size());
    for (size_t b = 0, e; b < line.size(); b = e + 1) {
      e = std::min(line.find(' ', b), line.size());
      if (e > b) items.push_back(line.substr(b, e - b));
    }
    return items;
  };
  const std::vector<std::string> page1 = page_items("page 1:"), page2 = page_items("page 2:");
  CHECK(page1.size() == 2);
  CHECK(page2.size() == 2);
  for (const auto& item : page2) CHECK(std::find(page1.begin(), page1.end(), item) == page1.end());
  CHECK(pages.err.find("page 2 for r1: 2 item(s) marked served; of 7 candidate(s) 2 seen, 2 "
                       "served recently") != std::string::npos);
  // Another process (another request of the recall service) sees the ring too.
  paged.erase(paged.end() - static_cast<long>(pool.size()) - 2,
              paged.end() - static_cast<long>(pool.size()));
  const SplitRunResult after = RunCommandWithEnv(paged, {}, "", 60s);
  INFO(after.out << after.err);
  REQUIRE(after.code == 0);
  CHECK(after.out == "fresh-5\n");
  CHECK(after.err.find("2 of 7 candidate(s) seen by r1, 4 served recently") != std::string::npos);
}

}  // namespace ef::test

namespace ef::test {

namespace {

// The benchmark's shape (below): 31 day buckets of 200 items each, 1,000
// candidates of which 100 were seen.
std::vector<std::string> BenchCandidates(Fixture& fx) {
  for (int d = 0; d < 31; ++d) fx.Write("bench", d, Items("d" + std::to_string(d), 200));
  std::vector<std::string> candidates = Items("d3", 100);
  for (const auto& c : Items("cand", 900)) candidates.push_back(c);
  return candidates;
}

}  // namespace

// The correctness part of the hidden benchmark below, registered.
TEST_CASE("client: 1,000 candidates against 31 full buckets are answered as the bits say",
          "[integration][client]") {
  Fixture fx;
  const std::vector<std::string> candidates = BenchCandidates(fx);
  auto client = fx.MakeClient(fx.Options());
  const Result r = client->Seen("bench", candidates);
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK_FALSE(r.failed_open);
  CHECK(r.buckets_present == 31);
  const std::vector<bool> want = fx.Oracle("bench", candidates);
  CHECK(r.seen == want);
  size_t seen = 0;
  for (bool b : want) seen += b;
  CHECK(r.seen_count == seen);
  for (size_t i = 0; i < 100; ++i) CHECK(want[i]);  // the 100 written
}

// Not run by default (hidden tag): the figures for the target, 1,000
// candidates against 32 bucket keys (30 days of 1d buckets, each with 200 items).
//   build/ef_integration_tests "[client-bench]"
TEST_CASE("client: latency and CPU of Seen for 1,000 candidates x 32 buckets",
          "[.][client-bench]") {
  Fixture fx;
  const std::vector<std::string> candidates = BenchCandidates(fx);
  auto client = fx.MakeClient(fx.Options());
  constexpr int kCalls = 2000;
  std::vector<double> wall_us;
  wall_us.reserve(kCalls);
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  };
  for (int i = 0; i < 100; ++i) REQUIRE(client->Seen("bench", candidates).ok);  // warm-up
  const double cpu0 = cpu_now();
  for (int i = 0; i < kCalls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = client->Seen("bench", candidates);
    wall_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    REQUIRE((r.ok && !r.failed_open && r.seen_count >= 100));
  }
  const double cpu_per_call = (cpu_now() - cpu0) / kCalls;
  std::sort(wall_us.begin(), wall_us.end());
  const Result r = client->Seen("bench", candidates);
  std::printf(
      "Seen(1000 candidates, %zu keys, %zu present): client CPU %.0f us/call; wall p50 %.0f us, "
      "p99 %.0f us, p999 %.0f us\n",
      r.buckets_read, r.buckets_present, cpu_per_call, wall_us[kCalls / 2],
      wall_us[kCalls * 99 / 100], wall_us[kCalls * 999 / 1000]);
}

}  // namespace ef::test

namespace ef::test {

TEST_CASE("check: --file reads candidates from a file or stdin (-), output as with arguments",
          "[integration][client][cli]") {
  Fixture fx;
  fx.Write("u1", 3, Items("a", 5));
  TempDir dir;
  dir.Write("items.txt", "a-0\r\nnew-1\n\na-3\nnew-2\n");
  // Items before the --set options (--set takes every value up to the next option).
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {EF_BINARY, "check", "-u", "u1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& o : fx.Overrides()) argv.insert(argv.end(), {"--set", o});
    return argv;
  };
  const RunResult args = RunCommand(with({"a-0", "new-1", "a-3", "new-2"}), "", true);
  REQUIRE(args.code == 0);
  CHECK(args.out.find("seen    a-0  (bucket ") != std::string::npos);
  CHECK(args.out.find("unseen  new-1\n") != std::string::npos);
  const RunResult file = RunCommand(with({"--file", dir.File("items.txt")}), "", true);
  CHECK(file.code == 0);
  CHECK(file.out == args.out);
  const RunResult in =
      RunCommand(with({"--file", "-", "--unseen"}), "a-0\nnew-1\na-3\nnew-2\n", true);
  CHECK(in.code == 0);
  CHECK(in.out == "new-1\nnew-2\n");
  const RunResult missing = RunCommand(with({"--file", dir.File("nope.txt")}));
  CHECK(missing.code == 2);
  CHECK(missing.out.find("--file " + dir.File("nope.txt") + ": cannot open") != std::string::npos);
}

}  // namespace ef::test

namespace ef::test {

TEST_CASE("client: no layout in Redis fails Create, unless allowed: then it is picked up later",
          "[integration][client]") {
  Fixture fx(10, 8);
  std::string error;
  ErrorCode code = ErrorCode::kOk;
  CHECK_FALSE(Client::Create(fx.Options(), &error, &code));
  CHECK(code == ErrorCode::kLayoutMismatch);
  CHECK(error.find("no layout stored at ct:meta") != std::string::npos);

  ClientOptions o = fx.Options();
  o.allow_missing_layout = true;
  auto client = fx.MakeClient(o);
  CHECK_FALSE(client->layout().stored);
  CHECK(client->Seen("heavy", Items("h", 100)).seen_count == 0);
  fx.Write("heavy", 0, Items("h", 100));  // the writer stores the (v2) meta
  // Calls look for the meta again (at most once a second) until it is there.
  CHECK(WaitFor(
      [&] {
        (void)client->Seen("heavy", {"x"});
        return client->layout().stored;
      },
      10s));
  CHECK(client->Seen("heavy", Items("h", 100)).seen_count == 100);
  CHECK(client->layout().version == 3);
}

}  // namespace ef::test

namespace ef::test {

// Issue 26 item 1: a reader connected before `layout upgrade` kept reading stage 0
// alone for as long as its connections stayed healthy (1,301 of 1,500 items
// answered unseen, minutes later).
TEST_CASE(
    "client: after a layout upgrade, a value longer than the known layout makes the "
    "client re-read the meta before it answers",
    "[integration][client][v2][upgrade]") {
  Fixture fx(10, 8, 2);
  REQUIRE(fx.layout.version() == 2);
  auto admin = fx.redis.Connect();
  Layout v1_effective;
  REQUIRE(EnsureMeta(*admin, fx.layout.SingleStage(), &v1_effective).ok());
  ClientOptions o = fx.Options();
  o.layout_recheck = std::chrono::hours(1);  // only the long value can trigger it
  auto client = fx.MakeClient(o);
  REQUIRE(client->layout().version == 1);
  // Warm the pooled connection: from here on it is healthy and reused.
  REQUIRE(client->Seen("heavy", {"x"}).ok);

  bool changed = false;
  Layout after;
  REQUIRE(UpgradeMeta(*admin, fx.layout, 2, 0, false, &changed, &after).ok());
  REQUIRE(changed);
  fx.Write("heavy", 0, Items("h", 300));  // stages 0..3 of a v2 writer

  const Result r = client->Seen("heavy", Items("h", 300));
  REQUIRE(r.ok);
  CHECK_FALSE(r.failed_open);
  CHECK(r.seen_count == 300);
  CHECK(client->layout().version == 2);
}

TEST_CASE("client: the stored layout is re-read periodically while connections are healthy",
          "[integration][client][v2][upgrade]") {
  Fixture fx(10, 8, 2);
  auto admin = fx.redis.Connect();
  Layout v1_effective;
  REQUIRE(EnsureMeta(*admin, fx.layout.SingleStage(), &v1_effective).ok());
  ClientOptions o = fx.Options();
  o.layout_recheck = 300ms;
  auto client = fx.MakeClient(o);
  REQUIRE(client->layout().version == 1);
  REQUIRE(client->Seen("heavy", {"x"}).ok);
  bool changed = false;
  Layout after;
  REQUIRE(UpgradeMeta(*admin, fx.layout, 2, 0, false, &changed, &after).ok());
  // No long value to hint at it: only the period brings the new layout in.
  CHECK(WaitFor(
      [&] {
        (void)client->Seen("heavy", {"x"});
        return client->layout().version == 2;
      },
      10s));
  // And a meta changed to another layout fails calls instead of reading wrong bits.
  REQUIRE(admin->Command({"HSET", MetaKey(fx.layout.prefix), "m", "1234"})->type !=
          RedisReply::Type::kError);
  CHECK(WaitFor([&] { return client->Seen("heavy", {"x"}).code == ErrorCode::kLayoutMismatch; },
                10s));
}

}  // namespace ef::test

namespace ef::test {

// Issue 26 item 3: with `CONFIG SET timeout 2` and a 5 s idle gap the first call
// answered every candidate unseen (failed_open) on the pooled connection the
// server had closed; the next calls were right.
TEST_CASE("client: a pooled connection the server closed while idle is replaced within the call",
          "[integration][client][faults]") {
  Fixture fx;
  fx.Write("u1", 0, Items("a", 20));
  auto client = fx.MakeClient(fx.Options());
  REQUIRE(client->Seen("u1", Items("a", 20)).seen_count == 20);
  fx.redis.Command({"CONFIG", "SET", "timeout", "1"});
  // The server closes the client's idle connection: only the asking one is left.
  REQUIRE(WaitFor(
      [&] {
        auto c = fx.redis.Connect();
        return RedisServer::InfoField(*c, "clients", "connected_clients") == "1";
      },
      15s));
  const Result r = client->Seen("u1", Items("a", 20));
  INFO(r.error);
  CHECK(r.ok);
  CHECK_FALSE(r.failed_open);
  CHECK(r.seen_count == 20);
  CHECK(client->stats().stale_retries == 1);
}

}  // namespace ef::test

namespace ef::test {
namespace {

int64_t VmRssKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

}  // namespace

// Issue 26 item 11: the per-thread buffers of the MGET path grew to the largest
// reply and kept it (a 380 KB batch body retained 46 MB in serve).
TEST_CASE("client: a huge reply's buffers are released after the call", "[integration][client]") {
  Fixture fx(200, 8);
  const Stage& last = fx.layout.stage_table.back();
  const std::string full((last.offset + last.m + 7) / 8, '\0');  // every stage present
  auto admin = fx.redis.Connect();
  Layout effective;
  REQUIRE(EnsureMeta(*admin, fx.layout, &effective).ok());
  std::vector<Query> queries;
  for (int u = 0; u < 16; ++u) {
    const std::string user = "huge-" + std::to_string(u);
    for (int64_t s : ReadBuckets(Now(), fx.layout.window_seconds, kDay))
      REQUIRE(admin->Command({"SET", MakeKey(fx.layout.prefix, user, s, kDay), full})->type ==
              RedisReply::Type::kStatus);
    queries.push_back({user, Items("c", 10)});
  }
  auto client = fx.MakeClient(fx.Options());
  REQUIRE(client->SeenBatch({{"warm", {"x"}}}, 10s)[0].ok);
  const int64_t before_kb = VmRssKb();
  const auto results = client->SeenBatch(queries, 30s);
  for (const auto& r : results) REQUIRE(r.ok);
  const int64_t after_kb = VmRssKb();
  const double reply_mb = 16.0 * 32 * static_cast<double>(full.size()) / (1 << 20);
  std::printf("huge reply: %.1f MB; VmRSS %lld kB before, %lld kB after the call\n", reply_mb,
              static_cast<long long>(before_kb), static_cast<long long>(after_kb));
  REQUIRE(reply_mb > 32);
  CHECK(after_kb - before_kb < 16 * 1024);
}

}  // namespace ef::test
