// The read side against a real local Redis Cluster (3 masters + 3 replicas,
// tests/support/redis_cluster.h): the library (exposure_filter::Client), the
// `check` CLI, `serve` and `layout show|stats`, with the same config as for one
// node (redis.address = the seed list). The filters are written here with plain
// SETBIT through the router at the positions docs/FORMAT.md defines (stage 0,
// ComputeStagePositions), into two buckets per user, for users on every master;
// the expected answer is computed from the positions written, independently of
// the reader. Also: a user whose slot is migrating with its keys split between
// the two nodes (MGET gets TRYAGAIN: the client reads key by key), and a killed
// master (fail open within the deadline, correct again after the failover).
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/served.h"
#include "bloom/stages.h"
#include "common/clock.h"
#include "contentdb/index.h"
#include "exposure_filter/client.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "redis/meta.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef {
namespace {

using namespace std::chrono_literals;
using test::LocalRedisCluster;

constexpr int kUsersPerMaster = 3;
constexpr int kItemsPerBucket = 12;
constexpr int kNeverItems = 40;

// What was written: per user, the bucket starts and the stage-0 positions set in
// each, and the candidates with their expected answer.
struct Written {
  Layout layout;
  int64_t now_s = 0;
  std::vector<std::string> users;
  std::map<std::string, int> master_of;  // user -> node index of its master
  std::map<std::string, std::vector<std::string>> candidates;
  std::map<std::string, std::vector<bool>> expected;
};

// Seen iff all stage-0 positions of the item are set in one of the user's buckets
// (only stage 0 is written: the values are no longer than stage 0).
std::vector<bool> Expected(const Layout& layout, const std::vector<std::set<uint32_t>>& buckets,
                           const std::vector<std::string>& items) {
  const Stage& st = layout.stage_table.at(0);
  std::vector<uint32_t> pos(st.k);
  std::vector<bool> out;
  for (const std::string& item : items) {
    ComputeStagePositions(HashItem(item, layout.seed), st, layout.RuleFor(std::time(nullptr)),
                          pos.data());
    bool seen = false;
    for (const auto& set : buckets) {
      bool all = true;
      for (uint32_t p : pos) all = all && set.count(p) > 0;
      seen = seen || all;
    }
    out.push_back(seen);
  }
  return out;
}

// Users on every master, each with items in this bucket and the previous one,
// and the meta (EnsureMeta through the router).
Written WriteUsers(LocalRedisCluster& cluster, const std::string& tag) {
  Written w;
  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  w.layout = *layout;
  REQUIRE(w.layout.stage_table.at(0).offset == 0);  // written: stage 0 only
  w.now_s = SystemClock().NowMs() / 1000;
  const int64_t bucket = BucketStart(w.now_s, w.layout.bucket_seconds);
  const int64_t previous = bucket - w.layout.bucket_seconds;

  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  Layout effective;
  REQUIRE(EnsureMeta(router, w.layout, &effective).ok());

  std::map<int, int> per_master;
  std::vector<ClusterRouter::SlotCommand> setbits;
  for (int i = 0; per_master.size() < 3 ||
                  std::any_of(per_master.begin(), per_master.end(),
                              [](const auto& e) { return e.second < kUsersPerMaster; });
       ++i) {
    const std::string user = tag + "-u" + std::to_string(i);
    const std::string key = MakeKey(w.layout.prefix, user, bucket, w.layout.bucket_seconds);
    const uint16_t slot = KeySlot(key);
    const int master = cluster.MasterForSlot(slot);
    REQUIRE(master >= 0);
    if (per_master[master] >= kUsersPerMaster) continue;
    ++per_master[master];
    w.users.push_back(user);
    w.master_of[user] = master;
    std::vector<std::set<uint32_t>> buckets;
    std::vector<std::string>& cands = w.candidates[user];
    for (int64_t start : {previous, bucket}) {
      std::set<uint32_t> set;
      const std::string k = MakeKey(w.layout.prefix, user, start, w.layout.bucket_seconds);
      const Stage& st = w.layout.stage_table[0];
      std::vector<uint32_t> pos(st.k);
      for (int j = 0; j < kItemsPerBucket; ++j) {
        const std::string item = user + "-b" + std::to_string(start) + "-i" + std::to_string(j);
        cands.push_back(item);
        ComputeStagePositions(HashItem(item, w.layout.seed), st, w.layout.RuleFor(start),
                              pos.data());
        for (uint32_t p : pos) {
          set.insert(p);
          setbits.push_back({slot, {"SETBIT", k, std::to_string(p), "1"}});
        }
      }
      setbits.push_back(
          {slot,
           {"EXPIREAT", k,
            std::to_string(ExpireAt(start, w.layout.bucket_seconds, w.layout.window_seconds))}});
      buckets.push_back(std::move(set));
    }
    for (int j = 0; j < kNeverItems; ++j) cands.push_back(user + "-never-" + std::to_string(j));
    w.expected[user] = Expected(w.layout, buckets, cands);
  }
  auto replies = router.Commands(setbits);
  REQUIRE(replies.ok());
  for (const RedisReply& r : *replies) REQUIRE(r.type == RedisReply::Type::kInteger);
  return w;
}

std::unique_ptr<exposure_filter::Client> MakeClient(
    const LocalRedisCluster& cluster, std::chrono::milliseconds timeout, size_t pool = 2,
    std::chrono::milliseconds layout_recheck = exposure_filter::ClientOptions{}.layout_recheck) {
  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + cluster.seeds()};
  o.timeout = timeout;
  o.pool_size = pool;
  o.layout_recheck = layout_recheck;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  return client;
}

void CheckAnswers(exposure_filter::Client& client, const Written& w, const std::string& user) {
  exposure_filter::CallOptions call;
  call.deadline = 5000ms;
  call.at_unix_seconds = w.now_s;
  const exposure_filter::Result r = client.Seen(user, w.candidates.at(user), call);
  INFO("user " << user << ": " << r.error);
  REQUIRE(r.ok);
  REQUIRE_FALSE(r.failed_open);
  CHECK(r.seen == w.expected.at(user));
  CHECK(r.buckets_present == 2);
}

// "seen X" / "unseen X" lines -> item -> seen.
std::map<std::string, bool> ParseAnswers(const std::string& out) {
  std::map<std::string, bool> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string word, item;
    if (l >> word >> item && (word == "seen" || word == "unseen")) m[item] = word == "seen";
  }
  return m;
}

void CheckCli(const LocalRedisCluster& cluster, const Written& w, const std::string& user,
              const test::TempDir& dir) {
  std::vector<std::string> argv = {EF_BINARY, "check", "--set", "redis.address=" + cluster.seeds(),
                                   "-u",      user,    "--at",  "@" + std::to_string(w.now_s)};
  const std::vector<std::string>& items = w.candidates.at(user);
  argv.insert(argv.end(), items.begin(), items.end());
  test::RunResult r = test::RunCommand(argv);
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::map<std::string, bool> got = ParseAnswers(r.out);
  REQUIRE(got.size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) CHECK(got[items[i]] == w.expected.at(user)[i]);

  // --file: the same answer.
  std::string text;
  for (const std::string& item : items) text += item + "\n";
  dir.Write(user + ".txt", text);
  const std::string file = dir.File(user + ".txt");
  argv = {EF_BINARY, "check", "--set", "redis.address=" + cluster.seeds(),
          "-u",      user,    "--at",  "@" + std::to_string(w.now_s),
          "--file",  file,    "--json"};
  r = test::RunCommand(argv, "", /*stdout_only=*/true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> seen(j["seen"].begin(), j["seen"].end());
  for (size_t i = 0; i < items.size(); ++i)
    CHECK((seen.count(items[i]) > 0) == w.expected.at(user)[i]);
}

LocalRedisCluster& Cluster() {
  static LocalRedisCluster cluster;
  return cluster;
}

}  // namespace

TEST_CASE(
    "cluster readers: the library, check (also --file) and layout show|stats read users on "
    "every master",
    "[cluster][readers]") {
  LocalRedisCluster& cluster = Cluster();
  test::TempDir dir;
  const Written w = WriteUsers(cluster, "lib");
  std::set<int> masters;
  for (const auto& [u, m] : w.master_of) masters.insert(m);
  REQUIRE(masters.size() == 3);

  auto client = MakeClient(cluster, 2000ms);
  CHECK(client->layout().stored);
  size_t expected_seen = 0;
  for (const std::string& user : w.users) {
    CheckAnswers(*client, w, user);
    for (bool s : w.expected.at(user)) expected_seen += s;
  }
  // Unseen: exactly the candidates expected unseen.
  {
    const std::string& user = w.users.front();
    std::vector<std::string> want;
    for (size_t i = 0; i < w.candidates.at(user).size(); ++i)
      if (!w.expected.at(user)[i]) want.push_back(w.candidates.at(user)[i]);
    // Unseen queries at now: the written buckets are live.
    CHECK(client->Unseen(user, w.candidates.at(user), 5000ms) == want);
  }
  // SeenBatch: users of all three masters in one call.
  std::vector<exposure_filter::Query> queries;
  for (const std::string& user : w.users) queries.push_back({user, w.candidates.at(user)});
  queries.push_back({"", {"x"}});  // invalid: fails alone
  exposure_filter::CallOptions call;
  call.deadline = 5000ms;
  call.at_unix_seconds = w.now_s;
  const std::vector<exposure_filter::Result> results = client->SeenBatch(queries, call);
  REQUIRE(results.size() == queries.size());
  size_t batch_seen = 0;
  for (size_t q = 0; q < w.users.size(); ++q) {
    INFO(w.users[q] << ": " << results[q].error);
    REQUIRE(results[q].ok);
    CHECK_FALSE(results[q].failed_open);
    CHECK(results[q].seen == w.expected.at(w.users[q]));
    batch_seen += results[q].seen_count;
  }
  CHECK(batch_seen == expected_seen);
  CHECK_FALSE(results.back().ok);
  CHECK(results.back().code == exposure_filter::ErrorCode::kInvalidArgument);
  CHECK(client->Ping(2000ms));
  {
    // BloomReader (tools, tests) through a router: the same answers.
    ClusterRouter router(cluster.RouterOptions());
    BloomReader reader(router, w.layout);
    for (const std::string& user : w.users) {
      auto r = reader.Check(user, w.candidates.at(user), w.now_s);
      REQUIRE(r.ok());
      CHECK(r->seen == w.expected.at(user));
    }
  }
  CHECK(client->stats().redis_errors == 0);

  // The CLI: one user per master.
  std::set<int> cli_masters;
  for (const std::string& user : w.users) {
    if (!cli_masters.insert(w.master_of.at(user)).second) continue;
    CheckCli(cluster, w, user, dir);
  }

  // layout show and stats with the same config.
  test::RunResult show =
      test::RunCommand({EF_BINARY, "layout", "show", "--set", "redis.address=" + cluster.seeds()});
  INFO(show.out);
  CHECK(show.code == 0);
  CHECK_THAT(show.out, Catch::Contains("the stored layout is the configured one"));
  test::RunResult stats = test::RunCommand(
      {EF_BINARY, "layout", "stats", "--json", "--set", "redis.address=" + cluster.seeds()}, "",
      true);
  INFO(stats.out);
  REQUIRE(stats.code == 0);
  const auto j = nlohmann::json::parse(stats.out);
  CHECK(j["keys"] == 2 * w.users.size());
  CHECK(j["users"] == w.users.size());
  test::RunResult upgrade = test::RunCommand(
      {EF_BINARY, "layout", "upgrade", "--set", "redis.address=" + cluster.seeds()});
  INFO(upgrade.out);
  CHECK(upgrade.code == 0);
  CHECK_THAT(upgrade.out, Catch::Contains("nothing to do"));
}

TEST_CASE("cluster readers: serve answers /v1/filter and /v1/filter:batch for every master",
          "[cluster][readers]") {
  LocalRedisCluster& cluster = Cluster();
  test::TempDir dir;
  const Written w = WriteUsers(cluster, "srv");
  const int port = test::FreePort();
  test::Process serve({EF_BINARY, "serve", "--set", "redis.address=" + cluster.seeds(), "--set",
                       "serve.listen=127.0.0.1:" + std::to_string(port), "--set",
                       "serve.timeout=2s", "--set", "metrics.listen="},
                      dir.File("serve.log"));
  REQUIRE(test::WaitFor(
      [&] {
        if (!serve.Running()) return true;
        httplib::Client c("127.0.0.1", port);
        auto r = c.Get("/readyz");
        return r && r->status == 200;
      },
      30s));
  INFO("serve output:\n" << serve.Output());
  REQUIRE(serve.Running());
  httplib::Client http("127.0.0.1", port);
  nlohmann::json batch;
  batch["requests"] = nlohmann::json::array();
  std::vector<std::vector<std::string>> want_unseen;
  for (const std::string& user : w.users) {
    std::vector<std::string> want;
    for (size_t i = 0; i < w.candidates.at(user).size(); ++i)
      if (!w.expected.at(user)[i]) want.push_back(w.candidates.at(user)[i]);
    nlohmann::json req;
    req["user_id"] = user;
    req["items"] = w.candidates.at(user);
    auto r = http.Post("/v1/filter", req.dump(), "application/json");
    REQUIRE(r);
    INFO(user << ": " << r->body);
    REQUIRE(r->status == 200);
    const auto j = nlohmann::json::parse(r->body);
    CHECK_FALSE(j.contains("failed_open"));
    CHECK(j["unseen"].get<std::vector<std::string>>() == want);
    batch["requests"].push_back(req);
    want_unseen.push_back(std::move(want));
  }
  auto r = http.Post("/v1/filter:batch", batch.dump(), "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  const auto j = nlohmann::json::parse(r->body);
  REQUIRE(j["results"].size() == w.users.size());
  for (size_t q = 0; q < w.users.size(); ++q) {
    CHECK_FALSE(j["results"][q].contains("failed_open"));
    CHECK(j["results"][q]["unseen"].get<std::vector<std::string>>() == want_unseen[q]);
  }
  CHECK(serve.Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "cluster readers: a user whose slot is migrating with its keys split between the nodes is "
    "answered correctly (key by key) by the library and check",
    "[cluster][readers][migration]") {
  LocalRedisCluster& cluster = Cluster();
  test::TempDir dir;
  const Written w = WriteUsers(cluster, "mig");
  const std::string user = w.users.front();
  const uint16_t slot = KeySlot(MakeKey(w.layout.prefix, user, 0, w.layout.bucket_seconds));
  const int from = w.master_of.at(user);
  int to = -1;
  for (int m : cluster.Masters())
    if (m != from) to = m;
  REQUIRE(to >= 0);
  auto client = MakeClient(cluster, 2000ms);
  CheckAnswers(*client, w, user);  // the router knows the slot's owner

  cluster.BeginMigration(slot, from, to);
  // The user's two keys (and nothing else in the slot): move one of them.
  REQUIRE(cluster.MoveKeys(slot, 1) == 1);
  {
    // Redis itself refuses the user's MGET now: the case under test.
    std::vector<std::string> mget = {"MGET"};
    for (int64_t s : ReadBuckets(w.now_s, w.layout.window_seconds, w.layout.bucket_seconds))
      mget.push_back(MakeKey(w.layout.prefix, user, s, w.layout.bucket_seconds));
    const RedisReply direct = cluster.Command(from, mget);
    REQUIRE(direct.type == RedisReply::Type::kError);
    CHECK_THAT(direct.str, Catch::StartsWith("TRYAGAIN"));
  }
  const auto before = client->stats();
  CheckAnswers(*client, w, user);
  // And in a batch with users of other masters.
  std::vector<exposure_filter::Query> queries;
  for (const std::string& u : w.users) queries.push_back({u, w.candidates.at(u)});
  exposure_filter::CallOptions call;
  call.deadline = 5000ms;
  call.at_unix_seconds = w.now_s;
  const auto results = client->SeenBatch(queries, call);
  for (size_t q = 0; q < w.users.size(); ++q) {
    INFO(w.users[q] << ": " << results[q].error);
    REQUIRE(results[q].ok);
    CHECK_FALSE(results[q].failed_open);
    CHECK(results[q].seen == w.expected.at(w.users[q]));
  }
  CHECK(client->stats().redis_errors == before.redis_errors);
  CheckCli(cluster, w, user, dir);

  cluster.FinishMigration(slot);
  CheckAnswers(*client, w, user);
  CHECK(client->stats().redis_errors == before.redis_errors);
}

TEST_CASE(
    "cluster readers: a killed master fails its users open within the deadline, other "
    "masters' users are answered, and all are correct again after the failover",
    "[cluster][readers][failover]") {
  LocalRedisCluster& cluster = Cluster();
  const Written w = WriteUsers(cluster, "fo");
  auto client = MakeClient(cluster, 300ms, 1);
  for (const std::string& user : w.users) CheckAnswers(*client, w, user);
  // Let the replicas have every write before the master goes.
  for (int m : cluster.Masters()) {
    const RedisReply r = cluster.Command(m, {"WAIT", "1", "5000"});
    REQUIRE(r.type == RedisReply::Type::kInteger);
    REQUIRE(r.integer == 1);
  }
  // The master of the meta key: the hardest case (the layout cannot be re-read).
  const int victim = cluster.MasterForSlot(KeySlot(MetaKey(w.layout.prefix)));
  std::string victim_user;
  for (const std::string& user : w.users)
    if (w.master_of.at(user) == victim && victim_user.empty()) victim_user = user;
  REQUIRE_FALSE(victim_user.empty());
  cluster.Kill(victim);

  // Its user: failed open within the deadline: 300 ms and 1.2 s of scheduling
  // slack for a loaded machine, still short of the failover a client that
  // ignored its deadline would wait for (cluster-node-timeout 1 s, then the
  // election).
  exposure_filter::CallOptions call;
  call.at_unix_seconds = w.now_s;
  const auto t0 = std::chrono::steady_clock::now();
  const exposure_filter::Result r = client->Seen(victim_user, w.candidates.at(victim_user), call);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(r.error);
  CHECK(r.ok);
  CHECK(r.failed_open);
  CHECK(r.seen_count == 0);
  CHECK(took < 300ms + 1200ms);
  CHECK(client->stats().failed_open >= 1);
  // A batch of every user: the victim's users fail open, the others are answered
  // (before: the whole batch failed open, one dead master failing every user).
  {
    std::vector<exposure_filter::Query> queries;
    for (const std::string& user : w.users) queries.push_back({user, w.candidates.at(user)});
    exposure_filter::CallOptions batch_call;
    batch_call.at_unix_seconds = w.now_s;
    // The live masters' answers must arrive within the deadline, and the dead
    // one's users wait it out: 300 ms was too short on a loaded machine (a live
    // master's user failed open after 308 ms, issue 33). 1 s still ends before
    // a failover can (cluster-node-timeout 1 s, then the election's 0.5-1 s).
    batch_call.deadline = 1000ms;
    const std::vector<exposure_filter::Result> results = client->SeenBatch(queries, batch_call);
    REQUIRE(results.size() == w.users.size());
    size_t answered = 0;
    for (size_t i = 0; i < w.users.size(); ++i) {
      const std::string& user = w.users[i];
      INFO(user << ": " << results[i].error);
      CHECK(results[i].ok);
      if (w.master_of.at(user) == victim) {
        CHECK(results[i].failed_open);
      } else {
        CHECK_FALSE(results[i].failed_open);
        CHECK(results[i].seen == w.expected.at(user));
        ++answered;
      }
    }
    CHECK(answered > 0);
  }
  // Users of the other masters: answered (the meta's master may be the victim:
  // the client keeps the layout it read).
  for (const std::string& user : w.users) {
    if (w.master_of.at(user) == victim) continue;
    call.deadline = 5000ms;
    const exposure_filter::Result other = client->Seen(user, w.candidates.at(user), call);
    INFO(user << ": " << other.error);
    CHECK(other.ok);
    CHECK_FALSE(other.failed_open);
    CHECK(other.seen == w.expected.at(user));
  }

  cluster.AwaitHealthy();
  // After the failover, within a few calls (the router re-reads the topology):
  // every user correct, through the same client.
  REQUIRE(test::WaitFor(
      [&] {
        exposure_filter::CallOptions c;
        c.at_unix_seconds = w.now_s;
        c.deadline = 2000ms;
        return !client->Seen(victim_user, w.candidates.at(victim_user), c).failed_open;
      },
      30s));
  for (const std::string& user : w.users) CheckAnswers(*client, w, user);
  // The killed master back, as a replica: the next test of this process (one
  // process runs every test with a tag) finds every shard with a replica again.
  cluster.Start(victim);
  cluster.AwaitHealthy();
}

}  // namespace ef

namespace ef {
namespace {

TEST_CASE("cluster readers: served items live in the user's slot, marked and read on every master",
          "[cluster][readers][served]") {
  LocalRedisCluster& cluster = Cluster();
  const Written w = WriteUsers(cluster, "served");
  auto client = MakeClient(cluster, 5000ms);
  std::set<int> masters;
  for (const std::string& user : w.users) {
    const std::string key = ServedKey(w.layout.prefix, user);
    // The served key hashes to the user's slot: the slot of its bucket keys.
    const uint16_t slot = KeySlot(key);
    CHECK(slot == KeySlot(MakeKey(w.layout.prefix, user, BucketStart(w.now_s, 86400), 86400)));
    const std::vector<std::string>& cands = w.candidates.at(user);
    exposure_filter::CallOptions call;
    call.deadline = 5000ms;
    call.at_unix_seconds = w.now_s;
    const exposure_filter::Result page1 = client->FilterAndMarkViews(
        user, std::vector<std::string_view>(cands.begin(), cands.end()), 5, call);
    INFO(user << ": " << page1.error);
    REQUIRE(page1.ok);
    REQUIRE_FALSE(page1.mark_failed);
    CHECK(page1.seen == w.expected.at(user));
    CHECK(page1.marked_count == 5);
    // The ring is on the master of that slot, and only there.
    const int master = cluster.MasterForSlot(slot);
    masters.insert(master);
    CHECK(cluster.Command(master, {"EXISTS", key}).integer == 1);
    // One MGET (buckets and ring together) reads the marks back: served, not seen.
    const exposure_filter::Result again = client->Seen(user, cands, call);
    REQUIRE(again.ok);
    CHECK(again.seen == w.expected.at(user));
    CHECK(again.served == page1.marked);
    CHECK(again.served_count == 5);
  }
  CHECK(masters.size() == 3);
}

}  // namespace
}  // namespace ef

namespace ef {
namespace {

// Appends to *cmds what makes the user's bucket `key` (starting at `start`) hold
// an item it saw of cluster `cluster_id`, <seen_tag><c>, with cluster_id beside
// it (the writers' rule, CONTENT.md rule 5 revision 2), and the content map entry item ->
// cluster_id (sequence c). Returns the map entry's key.
std::string SeenClusterAndMapEntry(const Layout& layout, const std::string& key, int64_t start,
                                   const std::string& seen_tag, const std::string& item, int c,
                                   const std::string& cluster_id,
                                   std::vector<ClusterRouter::SlotCommand>* cmds) {
  const Stage& st = layout.stage_table[0];
  std::vector<uint32_t> pos(st.k);
  for (const std::string& probe : {seen_tag + std::to_string(c), cluster_id}) {
    ComputeStagePositions(HashItem(probe, layout.seed), st, layout.RuleFor(start), pos.data());
    for (uint32_t p : pos) cmds->push_back({KeySlot(key), {"SETBIT", key, std::to_string(p), "1"}});
  }
  const std::string map_key = contentdb::MapKey(layout.prefix, item);
  cmds->push_back(
      {KeySlot(map_key), {"SET", map_key, contentdb::EncodeMapValue(c, 0, cluster_id)}});
  return map_key;
}

}  // namespace

TEST_CASE(
    "cluster readers: near duplicates, the content map's entries on every master are read in the "
    "MGET's call",
    "[cluster][readers][near_duplicates]") {
  LocalRedisCluster& cluster = Cluster();
  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const int64_t now_s = SystemClock().NowMs() / 1000;
  const int64_t start = BucketStart(now_s, layout->bucket_seconds);
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  Layout effective;
  REQUIRE(EnsureMeta(router, *layout, &effective).ok());
  // The user saw an item of each of 12 clusters (the writers' rule: item, C).
  const std::string user = "nd-user";
  const std::string key = MakeKey(layout->prefix, user, start, layout->bucket_seconds);
  std::vector<ClusterRouter::SlotCommand> cmds;
  std::vector<std::string> candidates;
  std::set<int> map_masters;
  for (int c = 0; c < 12; ++c) {
    // A candidate of that cluster, known only to the content map (its own slot).
    const std::string item = "nd-cand-" + std::to_string(c);
    const std::string map_key = SeenClusterAndMapEntry(*layout, key, start, "nd-seen-", item, c,
                                                       "nd-c" + std::to_string(c), &cmds);
    map_masters.insert(cluster.MasterForSlot(KeySlot(map_key)));
    candidates.push_back(item);
  }
  candidates.push_back("nd-unknown");
  auto replies = router.Commands(cmds);
  REQUIRE(replies.ok());
  REQUIRE(map_masters.size() == 3);  // the lookups cross every master

  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + cluster.seeds(), "filter.near_duplicates=true"};
  o.timeout = 5000ms;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  const exposure_filter::Result r = client->Seen(user, candidates);
  INFO(r.error);
  REQUIRE(r.ok);
  REQUIRE_FALSE(r.failed_open);
  std::vector<bool> want(13, true);
  want.back() = false;
  CHECK(r.near_duplicate == want);
  CHECK(r.seen_count == 0);
  CHECK(r.cluster.front() == "nd-c0");
  CHECK(client->stats().cluster_lookups == 13);
  CHECK(client->stats().clusters_unknown == 1);

  // A bucket value longer than the client's layout (as a writer with a newer one
  // leaves) makes the call read the layout again and run once more: its lookups
  // are counted once, not once per run.
  const std::string long_user = "nd-long";
  const std::string long_key = MakeKey(layout->prefix, long_user, start, layout->bucket_seconds);
  const Stage& last = layout->stage_table.back();
  const std::string past_end = std::to_string((last.offset + last.m + 7) / 8 + 8);
  REQUIRE(router.Commands({{KeySlot(long_key), {"SETRANGE", long_key, past_end, "x"}}}).ok());
  const exposure_filter::Result lr = client->Seen(long_user, candidates);
  INFO(lr.error);
  REQUIRE(lr.ok);
  CHECK(lr.near_duplicate_count == 0);  // this user saw nothing
  CHECK(client->stats().cluster_lookups == 26);
  CHECK(client->stats().clusters_unknown == 2);
}

// Issue 52: the library's cache of the content map keeps what the map answered
// (a cluster, or "not known" for 10 s), never a lookup that got no answer: an
// item whose map entry is on a master that is down is unknown for that call
// only, and found once the master answers again. The master is paused (CLIENT
// PAUSE: it answers no client, the cluster bus still runs, so no failover).
TEST_CASE(
    "cluster readers: the content cache keeps no answer for a map entry whose master is down, "
    "and finds it once it answers (issue 52)",
    "[cluster][readers][near_duplicates][content_cache]") {
  LocalRedisCluster& cluster = Cluster();
  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const int64_t now_s = SystemClock().NowMs() / 1000;
  const int64_t start = BucketStart(now_s, layout->bucket_seconds);
  ClusterRouter router(cluster.RouterOptions());
  REQUIRE(router.Discover().ok());
  Layout effective;
  REQUIRE(EnsureMeta(router, *layout, &effective).ok());
  const int meta_master = cluster.MasterForSlot(KeySlot(MetaKey(layout->prefix)));
  // A user on the meta's master, so that the victim holds neither.
  std::string user;
  for (int u = 0; user.empty(); ++u) {
    const std::string name = "cc-user-" + std::to_string(u);
    if (cluster.MasterForSlot(
            KeySlot(MakeKey(layout->prefix, name, start, layout->bucket_seconds))) == meta_master)
      user = name;
  }
  const std::string key = MakeKey(layout->prefix, user, start, layout->bucket_seconds);
  std::vector<ClusterRouter::SlotCommand> cmds;
  std::vector<std::string> candidates;
  std::map<int, std::vector<size_t>> of_master;  // map entry's master -> candidates
  for (int c = 0; c < 24; ++c) {
    const std::string item = "cc-cand-" + std::to_string(c);
    const std::string map_key = SeenClusterAndMapEntry(*layout, key, start, "cc-seen-", item, c,
                                                       "cc-c" + std::to_string(c), &cmds);
    of_master[cluster.MasterForSlot(KeySlot(map_key))].push_back(candidates.size());
    candidates.push_back(item);
  }
  REQUIRE(router.Commands(cmds).ok());
  int victim = -1;
  for (const auto& [m, idx] : of_master)
    if (m != meta_master && !idx.empty()) victim = m;
  REQUIRE(victim >= 0);
  const size_t on_victim = of_master[victim].size();

  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + cluster.seeds(), "filter.near_duplicates=true"};
  o.timeout = 2000ms;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  REQUIRE(client->Seen("cc-warm", {"x"}).ok);  // the layout read, connections open
  // Long enough for the two calls below (400 ms each at most), short of the
  // test's patience.
  const RedisReply paused = cluster.Command(victim, {"CLIENT", "PAUSE", "4000", "ALL"});
  REQUIRE(paused.type == RedisReply::Type::kStatus);
  exposure_filter::CallOptions call_options;
  call_options.deadline = 400ms;

  // Twice while the victim answers nothing: its entries are read both times (no
  // answer kept), the others only the first time.
  for (int call = 0; call < 2; ++call) {
    INFO("call " << call);
    const exposure_filter::ClientStats before = client->stats();
    const exposure_filter::Result r = client->Seen(user, candidates, call_options);
    INFO(r.error);
    REQUIRE(r.ok);
    REQUIRE_FALSE(r.failed_open);
    for (size_t i = 0; i < candidates.size(); ++i) {
      const bool down = std::count(of_master[victim].begin(), of_master[victim].end(), i) > 0;
      CHECK(r.near_duplicate[i] == !down);
    }
    const exposure_filter::ClientStats after = client->stats();
    CHECK(after.cluster_cache_misses - before.cluster_cache_misses ==
          (call == 0 ? candidates.size() : on_victim));
    CHECK(after.cluster_cache_hits - before.cluster_cache_hits ==
          (call == 0 ? 0 : candidates.size() - on_victim));
  }
  // Once the pause is over the victim answers, and what it answers is kept.
  const RedisReply pong = cluster.Command(victim, {"PING"});  // waits out the pause
  REQUIRE(pong.type == RedisReply::Type::kStatus);
  const exposure_filter::Result r = client->Seen(user, candidates);
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK(r.near_duplicate_count == candidates.size());
  const exposure_filter::ClientStats before = client->stats();
  const exposure_filter::Result again = client->Seen(user, candidates);
  REQUIRE(again.ok);
  CHECK(again.near_duplicate_count == candidates.size());
  CHECK(client->stats().cluster_cache_hits - before.cluster_cache_hits == candidates.size());
  CHECK(client->stats().cluster_cache_misses == before.cluster_cache_misses);
}

TEST_CASE(
    "cluster readers: a periodic layout re-read while the meta's master is down takes little of "
    "a live master's call",
    "[cluster][readers][failover]") {
  LocalRedisCluster& cluster = Cluster();
  const Written w = WriteUsers(cluster, "px");
  auto client = MakeClient(cluster, 300ms, 1, 1ms);  // every call below re-reads the meta
  for (const std::string& user : w.users) CheckAnswers(*client, w, user);
  const int victim = cluster.MasterForSlot(KeySlot(MetaKey(w.layout.prefix)));
  std::string live;
  for (const std::string& user : w.users)
    if (w.master_of.at(user) != victim && live.empty()) live = user;
  REQUIRE_FALSE(live.empty());
  cluster.Kill(victim);
  // Each call re-reads the meta from the dead master first. Before: the router
  // tried it for half of the call's deadline (1,000 of 2,000 ms every call, and a
  // batch of live users failed open with 1 s on a loaded machine); now for at
  // most 100 ms, and the answer comes from the live master with the layout read
  // before.
  for (int i = 0; i < 3; ++i) {
    const uint64_t reads = client->stats().layout_reads;
    std::this_thread::sleep_for(5ms);  // the 1 ms period runs out
    exposure_filter::CallOptions call;
    call.at_unix_seconds = w.now_s;
    call.deadline = 2000ms;
    const auto t0 = std::chrono::steady_clock::now();
    const exposure_filter::Result r = client->Seen(live, w.candidates.at(live), call);
    const auto took = std::chrono::steady_clock::now() - t0;
    INFO("call " << i << ": " << r.error << ", took "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    CHECK(client->stats().layout_reads == reads + 1);  // the re-read was tried
    CHECK(r.ok);
    CHECK_FALSE(r.failed_open);
    CHECK(r.seen == w.expected.at(live));
    CHECK(took < 700ms);  // before: 1,000 ms (half the deadline), now ~100 ms
  }
  cluster.AwaitHealthy();
  cluster.Start(victim);  // back, as a replica (see the test above)
  cluster.AwaitHealthy();
}

// Issue 47 item 2: a failed periodic meta re-read was not retried until the next
// period (10 s by default), so with `layout upgrade --to 3 --lead 20` one failure
// was enough for a reader to read a rule-9 bucket with rule 2. Before the fix the
// second call below made no re-read (layout_reads stayed at before + 1), and the
// version-2 reader answered with its copy whatever its age.
TEST_CASE(
    "cluster readers: a failed periodic meta re-read is retried a second later, and a layout "
    "below version 3 is not used once its copy is 10 s old (issue 47)",
    "[cluster][readers][failover]") {
  LocalRedisCluster& cluster = Cluster();
  const Written w = WriteUsers(cluster, "rr");
  const int victim = cluster.MasterForSlot(KeySlot(MetaKey(w.layout.prefix)));
  std::string live;
  for (const std::string& user : w.users)
    if (w.master_of.at(user) != victim && live.empty()) live = user;
  REQUIRE_FALSE(live.empty());
  exposure_filter::CallOptions call;
  call.at_unix_seconds = w.now_s;
  call.deadline = 2000ms;

  SECTION("retried after a second") {
    auto client = MakeClient(cluster, 2000ms, 1, 4000ms);  // one router, a 4 s period
    CheckAnswers(*client, w, live);
    std::this_thread::sleep_for(4100ms);  // the period runs out
    const uint64_t before = client->stats().layout_reads;
    // The meta's master answers nothing for a second: the re-read (100 ms at
    // most of a call) fails, the call answers with the layout read before.
    cluster.Command(victim, {"CLIENT", "PAUSE", "1000", "ALL"});
    exposure_filter::Result r = client->Seen(live, w.candidates.at(live), call);
    CHECK(client->stats().layout_reads == before + 1);
    CHECK(r.ok);
    CHECK(r.seen == w.expected.at(live));
    std::this_thread::sleep_for(1300ms);  // the pause is over, and a second has passed
    r = client->Seen(live, w.candidates.at(live), call);
    CHECK(client->stats().layout_reads == before + 2);  // retried: 1 s later, not 4 s
    CHECK(r.ok);
    r = client->Seen(live, w.candidates.at(live), call);
    CHECK(client->stats().layout_reads == before + 2);  // read: a period away again
  }
  SECTION("a version-2 layout older than 10 s is not used") {
    // A version-2 meta of its own prefix (the configured v3 layout's version 2).
    FilterConfig f;
    f.key_prefix = "rv:";
    f.layout_version = 2;
    auto v2 = LayoutFromConfig(f);
    REQUIRE(v2.ok());
    ClusterRouter router(cluster.RouterOptions());
    REQUIRE(router.Discover().ok());
    Layout effective;
    REQUIRE(EnsureMeta(router, *v2, &effective).ok());
    const int v2_master = cluster.MasterForSlot(KeySlot(MetaKey("rv:")));
    std::string other;  // a user whose keys are not on that master
    for (int i = 0; other.empty(); ++i) {
      const std::string u = "rv-u" + std::to_string(i);
      if (cluster.MasterForSlot(KeySlot(MakeKey("rv:", u, 0, 86400))) != v2_master) other = u;
    }
    exposure_filter::ClientOptions o;
    o.overrides = {"redis.address=" + cluster.seeds(), "filter.key_prefix=rv:"};
    o.timeout = 2000ms;
    o.pool_size = 1;
    std::string error;
    auto client = exposure_filter::Client::Create(o, &error);
    INFO(error);
    REQUIRE(client);
    REQUIRE(client->layout().version == 2);
    const auto read_at = std::chrono::steady_clock::now();
    // The meta's master answers nothing for 14 s: from 5 s on (the period of a
    // layout below version 3) every re-read fails, retried every second.
    cluster.Command(v2_master, {"CLIENT", "PAUSE", "14000", "ALL"});
    const std::vector<std::string> items = {"a", "b"};
    size_t answered_young = 0, refused_old = 0, answered_old = 0;
    while (std::chrono::steady_clock::now() - read_at < 13s) {
      const exposure_filter::Result r = client->Seen(other, items, call);
      const auto age = std::chrono::steady_clock::now() - read_at;
      if (age < 9s) answered_young += r.ok && !r.failed_open;
      if (age > 11s) {
        if (r.failed_open && r.error.find("was last read") != std::string::npos) ++refused_old;
        if (!r.failed_open) ++answered_old;
      }
      std::this_thread::sleep_for(250ms);
    }
    CHECK(answered_young > 10);  // the copy served while young enough
    CHECK(refused_old > 0);      // then the calls failed open, naming why
    CHECK(answered_old == 0);
    // The pause over, the next re-read succeeds and answers come back.
    REQUIRE(test::WaitFor(
        [&] {
          const exposure_filter::Result r = client->Seen(other, items, call);
          return r.ok && !r.failed_open;
        },
        10s));
    REQUIRE(router.Command(MetaKey("rv:"), {"DEL", MetaKey("rv:")}).ok());
  }
}

}  // namespace ef
