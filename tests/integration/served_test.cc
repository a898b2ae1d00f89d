// Served items (docs/FORMAT.md rule 10, bloom/served.h) against a real
// redis-server: the script writes exactly what its C++ model (ApplyServed) says,
// byte for byte, and its name is Redis's own SHA-1 of it; the client's
// MarkServed / FilterAndMark make paged feeds never repeat an item before its
// exposure arrives, within one MGET per read; the ring stays within its bound and
// keeps the newest items; TTL; concurrent marks; fail open / closed; NOPERM.
#include "bloom/served.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/sha1.h"
#include "exposure_filter/client.h"
#include "redis/meta.h"
#include "support/items_key.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/wait.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using exposure_filter::Client;
using exposure_filter::ClientOptions;
using exposure_filter::ErrorCode;
using exposure_filter::MarkResult;
using exposure_filter::OnError;
using exposure_filter::Result;

constexpr int64_t kDay = 86400;

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

std::vector<std::string> Items(const std::string& tag, int n, int from = 0) {
  std::vector<std::string> out;
  for (int i = from; i < from + n; ++i) out.push_back(tag + "-" + std::to_string(i));
  return out;
}

// A redis-server with a stored layout (prefix "sv:"), and clients on it.
struct Fixture {
  RedisServer redis;
  Layout layout;
  std::vector<std::string> extra;  // more --set overrides

  Fixture() {
    FilterConfig f;
    f.key_prefix = "sv:";
    auto l = LayoutFromConfig(f);
    REQUIRE(l.ok());
    layout = *l;
    auto conn = redis.Connect();
    Layout stored;
    REQUIRE(EnsureMeta(*conn, layout, &stored).ok());
  }

  ClientOptions Options(OnError on_error = OnError::kFailOpen) const {
    ClientOptions o;
    o.overrides = {"redis.address=" + redis.address(), "filter.key_prefix=sv:"};
    o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
    o.on_error = on_error;
    o.timeout = 2000ms;
    return o;
  }

  std::unique_ptr<Client> MakeClient(OnError on_error = OnError::kFailOpen) const {
    std::string error;
    auto c = Client::Create(Options(on_error), &error);
    INFO(error);
    REQUIRE(c);
    return c;
  }

  // An exposure written by the daemon's writer into today's bucket.
  void Expose(const std::string& user, const std::vector<std::string>& items) {
    const int64_t start = BucketStart(Now(), kDay);
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

  uint64_t Calls(const std::string& command) const {
    auto conn = redis.Connect();
    const std::string f = RedisServer::InfoField(*conn, "commandstats", "cmdstat_" + command);
    if (f.empty()) return 0;
    return std::stoull(f.substr(f.find('=') + 1));
  }
};

std::vector<std::string> Unseen(const std::vector<std::string>& candidates, const Result& r) {
  std::vector<std::string> out;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!r.seen[i] && !r.served[i]) out.push_back(candidates[i]);
  return out;
}

TEST_CASE(
    "served ring: the script writes what ApplyServed says, byte for byte, and its name is "
    "Redis's SHA-1 of it",
    "[served][contract]") {
  RedisServer redis;
  auto conn = redis.Connect();
  // The name EVALSHA uses is the one SCRIPT LOAD gives.
  auto loaded = conn->Command({"SCRIPT", "LOAD", ServedScript()});
  REQUIRE(loaded.ok());
  REQUIRE(loaded->type == RedisReply::Type::kString);
  CHECK(loaded->str == Sha1Hex(ServedScript()));

  std::mt19937_64 rng(7);
  for (const uint32_t capacity : {1u, 7u, 64u, 500u}) {
    for (const uint32_t width : {2u, 3u, 8u}) {
      const std::string key = "ring:" + std::to_string(capacity) + ":" + std::to_string(width);
      std::string model;
      int item = 0;
      // Appends of 0 .. 2C+1 items: wrapping, more than C at once, exactly C.
      for (int round = 0; round < 12; ++round) {
        const size_t n = static_cast<size_t>(rng() % (2 * capacity + 2));
        std::vector<Hash128> hs;
        for (size_t i = 0; i < n; ++i) hs.push_back(HashItem("x" + std::to_string(item++), 0));
        std::string fps;
        AppendServedFingerprints(hs.data(), hs.size(), width, &fps);
        auto r = conn->Command({"EVALSHA", Sha1Hex(ServedScript()), "1", key,
                                std::to_string(capacity), std::to_string(width), "60000", fps});
        REQUIRE(r.ok());
        INFO("C " << capacity << " w " << width << " round " << round << " n " << n << ": "
                  << r->str);
        REQUIRE(r->type == RedisReply::Type::kInteger);
        model = ApplyServed(model, capacity, width, fps);
        auto got = conn->Command({"GET", key});
        REQUIRE(got.ok());
        REQUIRE(got->str == model);
        ServedSet set;
        REQUIRE(set.Parse(got->str));
        CHECK(static_cast<long long>(set.filled()) == r->integer);
        CHECK(got->str.size() == kServedHeaderBytes + size_t{capacity} * width);
        // Every item of the last min(n, C) is served.
        for (size_t i = n > capacity ? n - capacity : 0; i < n; ++i) CHECK(set.Contains(hs[i]));
        auto pttl = conn->Command({"PTTL", key});
        REQUIRE(pttl.ok());
        CHECK(pttl->integer > 0);
        CHECK(pttl->integer <= 60000);
      }
    }
  }
  // A foreign value (another shape, or not a ring) is replaced by a new ring.
  REQUIRE(conn->Command({"SET", "ring:foreign", "not a ring"}).ok());
  std::vector<Hash128> one = {HashItem("a", 0)};
  std::string fps;
  AppendServedFingerprints(one.data(), 1, 3, &fps);
  auto r = conn->Command({"EVAL", ServedScript(), "1", "ring:foreign", "10", "3", "1000", fps});
  REQUIRE(r.ok());
  CHECK(r->integer == 1);
  CHECK(conn->Command({"GET", "ring:foreign"})->str == ApplyServed("", 10, 3, fps));
}

TEST_CASE("served items: two pages from one candidate pool never overlap, with one MGET per read",
          "[served][client]") {
  Fixture fx;
  auto client = fx.MakeClient();
  const std::vector<std::string> pool = Items("cand", 100);
  fx.Expose("u1", Items("cand", 5, 0));  // cand-0..4 seen
  const uint64_t mgets = fx.Calls("mget");
  const uint64_t gets = fx.Calls("get");
  const uint64_t evalshas = fx.Calls("evalsha"), evals = fx.Calls("eval");

  Result page1 = client->FilterAndMark("u1", pool, 10);
  REQUIRE(page1.ok);
  REQUIRE_FALSE(page1.failed_open);
  CHECK(page1.seen_count == 5);
  CHECK(page1.served_count == 0);
  CHECK(page1.marked_count == 10);
  std::vector<std::string> shown1;
  for (size_t i = 0; i < pool.size(); ++i)
    if (page1.marked[i]) shown1.push_back(pool[i]);
  CHECK(shown1 == Items("cand", 10, 5));  // the first 10 unseen, input order

  Result page2 = client->FilterAndMark("u1", pool, 10);
  REQUIRE(page2.ok);
  CHECK(page2.seen_count == 5);
  CHECK(page2.served_count == 10);
  std::vector<std::string> shown2, served2;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (page2.marked[i]) shown2.push_back(pool[i]);
    if (page2.served[i]) served2.push_back(pool[i]);
    CHECK_FALSE((page2.served[i] && page2.seen[i]));
  }
  CHECK(served2 == shown1);
  CHECK(shown2 == Items("cand", 10, 15));
  std::set<std::string> both(shown1.begin(), shown1.end());
  for (const auto& s : shown2) CHECK(both.insert(s).second);  // no overlap
  // Two reads: two MGETs, no GET. Two marks: an EVALSHA each; the server did not
  // have the script at the first, which answered NOSCRIPT and was sent again as
  // EVAL (which caches it).
  CHECK(fx.Calls("mget") - mgets == 2);
  CHECK(fx.Calls("get") - gets == 0);
  CHECK(fx.Calls("evalsha") - evalshas == 2);
  CHECK(fx.Calls("eval") - evals == 1);

  // Unseen leaves served items out; an item served and then exposed is seen.
  fx.Expose("u1", {"cand-5"});
  const std::vector<std::string> unseen = client->Unseen("u1", pool);
  CHECK(unseen.size() == 100 - 5 - 20);
  CHECK(std::find(unseen.begin(), unseen.end(), "cand-25") != unseen.end());
  Result r = client->Seen("u1", pool);
  CHECK(r.seen[5]);
  CHECK_FALSE(r.served[5]);  // seen wins
  CHECK(r.served_count == 19);
  CHECK(Unseen(pool, r) == unseen);

  CHECK(client->stats().marked == 20);
  CHECK(client->stats().served >= 10 + 19);
}

TEST_CASE(
    "served items: FilterAndPlanMark answers as FilterAndMark without writing and WriteMarks "
    "then writes several users' plans (EVAL once where the script was missing) that read served",
    "[served][client]") {
  Fixture fx;
  auto client = fx.MakeClient();
  const std::vector<std::string> pool = Items("p", 30);
  std::vector<std::string_view> views(pool.begin(), pool.end());
  fx.Expose("w0", Items("p", 2, 0));  // p-0, p-1 seen by w0
  const uint64_t evalshas = fx.Calls("evalsha"), evals = fx.Calls("eval");
  std::vector<exposure_filter::MarkPlan> plans(3);
  for (int u = 0; u < 3; ++u) {
    const std::string user = "w" + std::to_string(u);
    Result r = client->FilterAndPlanMark(user, views, {}, 5, {}, &plans[u]);
    REQUIRE(r.ok);
    CHECK(r.marked_count == 5);
    CHECK(plans[u].items == 5);
    CHECK(plans[u].entries == 5);
    CHECK(plans[u].user == user);
    // u == 0: the 5 after the 2 seen; else the first 5.
    for (size_t i = 0; i < pool.size(); ++i)
      CHECK(r.marked[i] == (u == 0 ? i >= 2 && i < 7 : i < 5));
  }
  // Nothing written yet: a next page would return the same items.
  CHECK(fx.Calls("evalsha") == evalshas);
  CHECK(client->Seen("w1", pool).served_count == 0);
  exposure_filter::MarkPlan empty;  // costs nothing, answered ok
  plans.push_back(empty);

  std::vector<MarkResult> written = client->WriteMarks(plans);
  REQUIRE(written.size() == 4);
  for (int u = 0; u < 3; ++u) {
    INFO("user " << u << ": " << written[u].error);
    CHECK(written[u].ok);
    CHECK_FALSE(written[u].failed_open);
    CHECK(written[u].marked == 5);
    CHECK(written[u].filled == 5);
  }
  CHECK(written[3].ok);
  CHECK(written[3].marked == 0);
  // The server lacked the script: three EVALSHAs answered NOSCRIPT, three EVALs.
  CHECK(fx.Calls("evalsha") - evalshas == 3);
  CHECK(fx.Calls("eval") - evals == 3);
  for (int u = 0; u < 3; ++u) {
    Result r = client->Seen("w" + std::to_string(u), pool);
    CHECK(r.served_count == 5);
  }
  CHECK(client->stats().marked == 15);

  // Once cached: EVALSHA only.
  std::vector<exposure_filter::MarkPlan> again(1);
  client->FilterAndPlanMark("w1", views, {}, 5, {}, &again[0]);
  CHECK(client->WriteMarks(again).front().filled == 10);
  CHECK(fx.Calls("evalsha") - evalshas == 4);
  CHECK(fx.Calls("eval") - evals == 3);
}

TEST_CASE("served items: after serve.served_ttl they are candidates again", "[served][client]") {
  Fixture fx;
  fx.extra = {"serve.served_ttl=1s"};
  auto client = fx.MakeClient();
  const std::vector<std::string> pool = Items("t", 20);
  Result page = client->FilterAndMark("u-ttl", pool, 5);
  REQUIRE(page.marked_count == 5);
  auto conn = fx.redis.Connect();
  const std::string key = ServedKey("sv:", "u-ttl");
  auto pttl = conn->Command({"PTTL", key});
  REQUIRE(pttl.ok());
  CHECK(pttl->integer > 0);
  CHECK(pttl->integer <= 1000);
  CHECK(client->Unseen("u-ttl", pool).size() == 15);
  REQUIRE(WaitFor([&] { return conn->Command({"EXISTS", key})->integer == 0; }, 10s));
  CHECK(client->Unseen("u-ttl", pool) == pool);
}

TEST_CASE("served items: a burst of 10,000 marks keeps the ring at its bound and the newest served",
          "[served][client]") {
  Fixture fx;
  fx.extra = {"serve.served_items=500", "serve.served_fpr=0.0001"};
  auto client = fx.MakeClient();
  const uint32_t width = ServedWidth(500, 0.0001);
  CHECK(width == 3);  // 500 * 2^-24 = 3.0e-5 <= 1e-4; 500 * 2^-16 > 1e-4
  const std::vector<std::string> all = Items("burst", 10000);
  auto conn = fx.redis.Connect();
  const std::string key = ServedKey("sv:", "u-burst");
  for (size_t at = 0; at < all.size(); at += 1000) {
    std::vector<std::string> chunk(all.begin() + static_cast<long>(at),
                                   all.begin() + static_cast<long>(at + 1000));
    MarkResult m = client->MarkServed("u-burst", chunk);
    REQUIRE(m.ok);
    REQUIRE_FALSE(m.failed_open);
    CHECK(m.marked == 1000);
    CHECK(m.filled == 500);
    CHECK(conn->Command({"STRLEN", key})->integer ==
          static_cast<long long>(kServedHeaderBytes + 500 * width));
  }
  Result r = client->Seen("u-burst", all);
  REQUIRE(r.ok);
  size_t newest_served = 0, older_served = 0;
  for (size_t i = 0; i < all.size(); ++i) (i >= 9500 ? newest_served : older_served) += r.served[i];
  CHECK(newest_served == 500);
  // 9,500 older items against 500 fingerprints of 24 bits: 0.28 false positives
  // expected (9500 * 500 / 2^24).
  CHECK(older_served <= 3);
}

TEST_CASE(
    "served items: the defaults (serve.served_ttl 2h, served_items 500, served_fpr 0.0001) make "
    "a 1,516-byte ring that keeps the newest 500 for 2 h, and the Redis memory per user",
    "[served][client]") {
  Fixture fx;  // no serve.* override: the built-in defaults
  auto client = fx.MakeClient();
  CHECK(ServedWidth(500, 0.0001) == 3);
  // Pages of 20 (README "Paged feeds": 500 items are 25 pages of 20), then 5 more.
  const std::vector<std::string> pool = Items("p", 600);
  for (int page = 0; page < 25; ++page) {
    Result r = client->FilterAndMark("u-def", pool, 20);
    REQUIRE(r.ok);
    REQUIRE(r.marked_count == 20);
    CHECK(r.served_count == size_t(20 * page));  // every earlier page still served
  }
  auto conn = fx.redis.Connect();
  const std::string key = ServedKey("sv:", "u-def");
  CHECK(conn->Command({"STRLEN", key})->integer == 1516);  // 16 + 500 x 3
  // 100 more: 600 marked into 500 slots, the oldest 100 (pages 1-5) overwritten,
  // the newest 500 kept.
  REQUIRE(client->MarkServed("u-def", Items("p", 100, 500)).filled == 500);
  CHECK(conn->Command({"STRLEN", key})->integer == 1516);
  Result r = client->Seen("u-def", pool);
  size_t old_served = 0, new_served = 0;
  for (size_t i = 0; i < pool.size(); ++i) (i < 100 ? old_served : new_served) += r.served[i];
  CHECK(new_served == 500);
  CHECK(old_served == 0);  // 100 items against 500 24-bit fingerprints: 0.003 expected
  // What fell off the ring is a candidate again: the next page is page 1's.
  Result again = client->FilterAndMark("u-def", pool, 20);
  REQUIRE(again.marked_count == 20);
  for (size_t i = 0; i < pool.size(); ++i) CHECK(again.marked[i] == (i < 20));
  const long long pttl = conn->Command({"PTTL", key})->integer;
  CHECK(pttl > 7190 * 1000);
  CHECK(pttl <= 7200 * 1000);

  // Redis memory of a ring (the value, the key, its expiry), from used_memory
  // before and after 2,000 users' rings (any fill: the value has its full size at
  // the first mark).
  const auto used = [&] {
    return std::stoll(RedisServer::InfoField(*conn, "memory", "used_memory"));
  };
  const long long before = used();
  constexpr int kUsers = 2000;
  for (int u = 0; u < kUsers; ++u)
    REQUIRE(client->MarkServed("mem-user-" + std::to_string(100000 + u), Items("m", 20)).ok);
  const double per_user = double(used() - before) / kUsers;
  std::printf("served ring, defaults: Redis used_memory %.0f bytes per user (value 1,516)\n",
              per_user);
  CHECK(per_user >= 1516);
  CHECK(per_user <= 1516 + 400);
}

TEST_CASE(
    "served items: two concurrent pages from one pool may overlap but lose no mark, and the next "
    "sequential page shares nothing with either",
    "[served][client]") {
  Fixture fx;
  auto client = fx.MakeClient();
  const std::vector<std::string> pool = Items("q", 100);
  for (int round = 0; round < 20; ++round) {
    const std::string user = "u-race-" + std::to_string(round);
    Result a, b;
    std::thread ta([&] { a = client->FilterAndMark(user, pool, 10); });
    std::thread tb([&] { b = client->FilterAndMark(user, pool, 10); });
    ta.join();
    tb.join();
    REQUIRE((a.ok && b.ok && !a.mark_failed && !b.mark_failed));
    CHECK(a.marked_count == 10);
    CHECK(b.marked_count == 10);
    // Each read the ring before or after the other's mark: overlap 0 (one after the
    // other) or up to 10 (both read the empty ring), never beyond the page.
    std::set<std::string> shown;
    for (size_t i = 0; i < pool.size(); ++i)
      if (a.marked[i] || b.marked[i]) shown.insert(pool[i]);
    CHECK(shown.size() >= 10);
    CHECK(shown.size() <= 20);
    // Everything either returned is served now, and a later page repeats none of it.
    Result after = client->Seen(user, pool);
    CHECK(after.served_count == shown.size());
    Result next = client->FilterAndMark(user, pool, 10);
    REQUIRE(next.ok);
    CHECK(next.marked_count == 10);
    for (size_t i = 0; i < pool.size(); ++i)
      if (next.marked[i]) CHECK(shown.count(pool[i]) == 0);
  }
}

TEST_CASE("served items: concurrent marks for one user lose nothing", "[served][client]") {
  Fixture fx;
  auto client = fx.MakeClient();
  const std::vector<std::string> pool = Items("c", 400);
  // Four threads mark disjoint parts of the pool (FilterAndMark of each part).
  std::vector<std::thread> threads;
  std::vector<Result> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> part(pool.begin() + 100 * t, pool.begin() + 100 * (t + 1));
      results[t] = client->FilterAndMark("u-conc", part, 25);
    });
  }
  for (auto& th : threads) th.join();
  size_t marked = 0;
  for (const Result& r : results) {
    REQUIRE(r.ok);
    REQUIRE_FALSE(r.mark_failed);
    marked += r.marked_count;
  }
  CHECK(marked == 100);
  Result after = client->Seen("u-conc", pool);
  CHECK(after.served_count == 100);
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 100; ++i) CHECK(after.served[100 * t + i] == results[t].marked[i]);
}

TEST_CASE("served items: fail open and fail closed when Redis is down, WAIT without replicas",
          "[served][client]") {
  Fixture fx;
  auto open = fx.MakeClient(OnError::kFailOpen);
  auto closed = fx.MakeClient(OnError::kFailClosed);
  const std::vector<std::string> pool = Items("d", 10);
  REQUIRE(open->FilterAndMark("u-down", pool, 3).marked_count == 3);
  fx.redis.Stop();
  Result r = open->FilterAndMark("u-down", pool, 3);
  CHECK(r.ok);
  CHECK(r.failed_open);
  CHECK(r.marked_count == 0);
  CHECK(r.served_count == 0);
  MarkResult m = open->MarkServed("u-down", pool);
  CHECK(m.ok);
  CHECK(m.failed_open);
  CHECK(m.marked == 0);
  CHECK(m.code == ErrorCode::kUnavailable);
  CHECK_FALSE(m.error.empty());
  MarkResult mc = closed->MarkServed("u-down", pool);
  CHECK_FALSE(mc.ok);
  CHECK(mc.code == ErrorCode::kUnavailable);
  Result rc = closed->FilterAndMark("u-down", pool, 3);
  CHECK_FALSE(rc.ok);
  fx.redis.Start();
  // Back: the ring written before the outage is still there.
  REQUIRE(WaitFor([&] { return open->Seen("u-down", pool).served_count == 3; }, 10s));
  // Invalid user IDs fail without a round trip, whatever the policy.
  CHECK(open->MarkServed("}bad", pool).code == ErrorCode::kInvalidArgument);
  CHECK_FALSE(open->MarkServed("", pool).ok);

  // redis.wait_replicas with no replica: the mark is written but not acknowledged
  // by a replica within redis.wait_timeout, which is a failure named so.
  fx.extra = {"redis.wait_replicas=1", "redis.wait_timeout=100ms"};
  auto waiting = fx.MakeClient(OnError::kFailClosed);
  MarkResult w = waiting->MarkServed("u-wait", {"w-1"});
  CHECK_FALSE(w.ok);
  CHECK(w.error.find("WAIT") != std::string::npos);
  CHECK(waiting->stats().mark_errors == 1);
}

// docs/FORMAT.md rule 10: a served key of another type is no ring for a reader
// (read as missing), and a write leaves it alone and fails with WRONGTYPE, named.
TEST_CASE("served items: a served key of another type reads as no ring and is not overwritten",
          "[served][client]") {
  Fixture fx;
  auto admin = fx.redis.Connect();
  REQUIRE(admin->Command({"HSET", "sv:{u-type}:served", "f", "v"}).ok());
  fx.Expose("u-type", {"seen-1"});
  auto client = fx.MakeClient(OnError::kFailOpen);
  const Result r = client->FilterAndMark("u-type", {"seen-1", "a", "b"}, 2);
  INFO(r.error);
  CHECK(r.ok);
  CHECK(r.seen_count == 1);
  CHECK(r.served_count == 0);
  CHECK(r.mark_failed);
  CHECK(r.marked_count == 0);
  CHECK(r.error.find("WRONGTYPE") != std::string::npos);
  CHECK(r.error.find("sv:{u-type}:served") != std::string::npos);
  // The hash is still there, unchanged.
  const auto v = admin->Command({"HGET", "sv:{u-type}:served", "f"});
  REQUIRE(v.ok());
  CHECK(v->str == "v");
}

TEST_CASE("served items: an ACL without the script's commands is NOPERM, named, like the others",
          "[served][client]") {
  Fixture fx;
  auto admin = fx.redis.Connect();
  // Reads only: MGET, GET, HGETALL (the meta) and what the handshake sends.
  REQUIRE(admin
              ->Command({"ACL", "SETUSER", "reader", "on", ">pw", "resetkeys", "~sv:*", "-@all",
                         "+ping", "+info", "+select", "+cluster|slots", "+get", "+mget", "+hgetall",
                         "+eval", "+exists", "+hset"})
              .ok());
  fx.extra = {"redis.username=reader", "redis.password=pw"};
  for (const OnError policy : {OnError::kFailOpen, OnError::kFailClosed}) {
    auto client = fx.MakeClient(policy);
    MarkResult m = client->MarkServed("u-acl", {"a", "b"});
    INFO(m.error);
    CHECK(m.code == ErrorCode::kPermissionDenied);
    CHECK(m.error.find("NOPERM") != std::string::npos);
    CHECK(m.error.find("sv:{u-acl}:served") != std::string::npos);
    CHECK(m.ok == (policy == OnError::kFailOpen));
    CHECK(m.failed_open == (policy == OnError::kFailOpen));
    // Reads still work.
    CHECK(client->Seen("u-acl", {"a"}).ok);
  }
}

TEST_CASE(
    "served items: FilterAndMark marks at most what the ring keeps, cluster tokens counted, so "
    "no marked item comes back (issue 47)",
    "[served][client]") {
  // Before the fix, 600 candidates were all reported marked, the ring kept the
  // last 500, and the next page returned the first 100 again; with a cluster
  // token beside each item, 300 marks kept 250 items.
  Fixture fx;
  fx.extra = {"serve.served_items=500", "filter.near_duplicates=true"};
  auto client = fx.MakeClient();
  const std::vector<std::string> page = Items("it", 600);
  Result r = client->FilterAndMark("u-over", page, SIZE_MAX);
  REQUIRE(r.ok);
  REQUIRE_FALSE(r.mark_failed);
  CHECK(r.marked_count == 500);
  for (size_t i = 0; i < page.size(); ++i) CHECK(r.marked[i] == (i < 500));
  Result next = client->Seen("u-over", page);
  REQUIRE(next.ok);
  size_t marked_back = 0;
  for (size_t i = 0; i < 500; ++i) marked_back += !next.served[i];
  CHECK(marked_back == 0);  // every marked item stays served
  CHECK(next.served_count >= 500);

  // Near duplicates: each candidate J of cluster C != J takes two slots.
  std::vector<std::string> items = Items("nd", 300), clusters = Items("cl", 300);
  std::vector<std::string_view> iv(items.begin(), items.end()),
      cv(clusters.begin(), clusters.end());
  Result nd = client->FilterAndMarkWithClusters("u-nd", iv, cv, 300);
  REQUIRE(nd.ok);
  CHECK(nd.marked_count == 250);
  Result after = client->SeenWithClusters("u-nd", iv, cv);
  REQUIRE(after.ok);
  size_t back = 0;
  for (size_t i = 0; i < items.size(); ++i) back += nd.marked[i] && !after.served[i];
  CHECK(back == 0);
  // A request that fits is marked whole.
  Result small = client->FilterAndMark("u-small", Items("s", 20), 10);
  CHECK(small.marked_count == 10);
}

TEST_CASE(
    "served items: the FORMAT.md Python reference reads the client's ring and writes one "
    "the client reads",
    "[served][client][interop]") {
  Fixture fx;
  fx.extra = {"serve.served_items=50"};
  auto client = fx.MakeClient();
  const std::string ref = std::string(EF_SOURCE_DIR) + "/tests/interop/format_ref.py";
  const std::vector<std::string> marked = Items("m", 70);  // wraps: the last 50 stay
  REQUIRE(client->MarkServed("u-py", marked).ok);
  std::vector<std::string> argv = {
      "python3",  ref,   "served", "--port", std::to_string(fx.redis.port()),
      "--prefix", "sv:", "--user", "u-py"};
  std::vector<std::string> probe = marked;
  for (const auto& i : Items("never", 200)) probe.push_back(i);
  argv.insert(argv.end(), probe.begin(), probe.end());
  auto py = RunCommand(argv, "", true);
  INFO(py.out.substr(0, 1000));
  REQUIRE(py.code == 0);
  Result cpp = client->Seen("u-py", probe);
  std::istringstream lines(py.out);
  std::string word, item;
  size_t n = 0, served_both = 0;
  while (lines >> word >> item) {
    REQUIRE(item == probe[n]);
    CHECK((word == "served") == cpp.served[n]);
    served_both += cpp.served[n];
    ++n;
  }
  CHECK(n == probe.size());
  CHECK(served_both >= 50);  // the newest 50 (plus any false positive, both alike)

  // The reference writes a ring (capacity 50, width 3 as the client's config):
  // the client reads it, and appends to it.
  argv = {"python3",
          ref,
          "mark",
          "--port",
          std::to_string(fx.redis.port()),
          "--prefix",
          "sv:",
          "--user",
          "u-py2",
          "--capacity",
          "50",
          "--width",
          std::to_string(ServedWidth(50, 0.0001)),
          "--ttl-ms",
          "60000"};
  const std::vector<std::string> by_py = Items("py", 10);
  argv.insert(argv.end(), by_py.begin(), by_py.end());
  py = RunCommand(argv, "", true);
  INFO(py.out);
  REQUIRE(py.code == 0);
  CHECK(client->Seen("u-py2", by_py).served_count == 10);
  MarkResult m = client->MarkServed("u-py2", {"cpp-1"});
  CHECK(m.filled == 11);  // appended to the reference's ring, not a new one
}

}  // namespace
}  // namespace ef::test
