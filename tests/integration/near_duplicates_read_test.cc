// Issue 31, near-duplicate filtering on the read side (docs/CONTENT.md rule 5),
// against a real redis-server: the client library, `serve` (HTTP) and `check`
// answer seen / near_duplicate / unseen for a user whose bucket key holds items
// and cluster marks written by the writers' rule, with clusters from the
// request and from the content map (`<prefix>cm{item}`, contentdb::EncodeMapValue),
// and read exactly as before with filter.near_duplicates off; serve's content-map
// counters, and the precedence seen > near_duplicate > served.
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "bloom/cluster_token.h"
#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/stages.h"
#include "common/clock.h"
#include "contentdb/cluster_cache.h"
#include "contentdb/index.h"
#include "exposure_filter/client.h"
#include "redis/meta.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/serve_client.h"
#include "support/stack.h"
#include "support/temp_dir.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Strings = std::vector<std::string>;

// The user's current bucket key holds `probes` (items, and cluster marks as the
// writers set them), written with the layout's position primitive (SETBIT), and
// the layout is stored (by EnsureMeta, as writers of today store it, unless
// `store_meta` is false).
void WriteKey(RedisServer& redis, const Layout& layout, const std::string& user,
              const Strings& probes, bool store_meta = true) {
  auto conn = redis.Connect();
  Layout effective;
  if (store_meta) REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
  const int64_t now_s = SystemClock().NowMs() / 1000;
  const int64_t start = BucketStart(now_s, layout.bucket_seconds);
  const std::string key = MakeKey(layout.prefix, user, start, layout.bucket_seconds);
  const Stage& st = layout.stage_table[0];
  std::vector<uint32_t> pos(st.k);
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& p : probes) {
    ComputeStagePositions(HashItem(p, layout.seed), st, layout.RuleFor(start), pos.data());
    for (uint32_t b : pos) cmds.push_back({"SETBIT", key, std::to_string(b), "1"});
  }
  std::vector<RedisReply> replies;
  REQUIRE(conn->Commands(cmds, &replies).ok());
}

// The writers' rule (CONTENT.md rule 5, revision 2) for the exposures (item,
// cluster): item, and cluster when cluster != item.
Strings Exposures(const std::vector<std::pair<std::string, std::string>>& seen) {
  Strings probes;
  for (const auto& [item, cluster] : seen) {
    probes.push_back(item);
    if (WritesClusterMark(item, cluster)) probes.push_back(cluster);
  }
  return probes;
}

// Revision 1 of the writers' rule (before founder_marks_from): item, and
// token(cluster) when cluster != item.
Strings ExposuresRevision1(const std::vector<std::pair<std::string, std::string>>& seen) {
  Strings probes;
  for (const auto& [item, cluster] : seen) {
    probes.push_back(item);
    if (WritesClusterMark(item, cluster)) probes.push_back(ClusterToken(cluster));
  }
  return probes;
}

void MapEntry(RedisServer& redis, const Layout& layout, const std::string& item,
              const std::string& cluster) {
  redis.Command({"SET", contentdb::MapKey(layout.prefix, item),
                 contentdb::EncodeMapValue(1, 0x1234, cluster)});
}

// `tweak` changes the options before Create (e.g. the content cache's clock).
std::unique_ptr<exposure_filter::Client> MakeClient(
    RedisServer& redis, bool near_duplicates,
    const std::function<void(exposure_filter::ClientOptions&)>& tweak = {}) {
  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + redis.address(), "filter.items_per_bucket=200",
                 "filter.fpr=0.01",
                 std::string("filter.near_duplicates=") + (near_duplicates ? "true" : "false")};
  o.timeout = 5000ms;
  o.on_error = exposure_filter::OnError::kFailClosed;
  if (tweak) tweak(o);
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  return client;
}

int64_t MgetCalls(RedisServer& redis) {
  const RedisReply info = redis.Command({"INFO", "commandstats"});
  const size_t at = info.str.find("cmdstat_mget:calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(info.str.substr(at + 19));
}

// Keys read by every command since the last CONFIG RESETSTAT (INFO stats).
int64_t KeysRead(RedisServer& redis) {
  const std::string info = redis.Command({"INFO", "stats"}).str;
  return std::stoll(RedisServer::InfoValue(info, "keyspace_hits")) +
         std::stoll(RedisServer::InfoValue(info, "keyspace_misses"));
}

// The user saw A2 (cluster A, whose first item is A) and B (its own cluster).
const std::vector<std::pair<std::string, std::string>> kSeen = {{"A2", "A"}, {"B", "B"}};

// serve's /metrics text (a 200 required).
std::string ScrapeText(httplib::Client& http) {
  auto m = http.Get("/metrics");
  REQUIRE(m);
  REQUIRE(m->status == 200);
  return m->body;
}

}  // namespace

TEST_CASE("near duplicates: the library answers seen, near_duplicate and unseen, clusters given",
          "[integration][near_duplicates][client]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  auto client = MakeClient(redis, true);
  const std::vector<std::string_view> items = {"A2", "A3", "A", "B2", "C1"};
  const std::vector<std::string_view> clusters = {"A", "A", "A", "B", "C"};
  exposure_filter::CallOptions call;
  call.cluster_lookup = false;
  const exposure_filter::Result r = client->SeenWithClusters("u1", items, clusters, call);
  INFO(r.error);
  REQUIRE(r.ok);
  // A, the founder of A2's cluster, reads seen: A2's exposure marked it (CONTENT.md
  // rule 5, revision 2).
  CHECK(r.seen == std::vector<bool>{true, false, true, false, false});
  CHECK(r.near_duplicate == std::vector<bool>{false, true, false, true, false});
  CHECK(r.near_duplicate_count == 2);
  CHECK(r.cluster == Strings{"A", "A", "A", "B", "C"});
  CHECK(client->stats().near_duplicates == 2);
  CHECK(client->stats().cluster_lookups == 0);
  // Unseen() leaves near duplicates out.
  CHECK(client->Unseen("u1", {"A2", "A3", "C1"}) == Strings{"A3", "C1"});  // no cluster known
  // A clusters list of another length is an error naming it, no round trip.
  const std::vector<std::string_view> short_list = {"A"};
  const exposure_filter::Result bad = client->SeenWithClusters("u1", items, short_list);
  CHECK_FALSE(bad.ok);
  CHECK(bad.code == exposure_filter::ErrorCode::kInvalidArgument);
  CHECK(bad.error == "clusters: 1 given for 5 candidates (give one per candidate, \"\" = unknown)");
}

TEST_CASE(
    "near duplicates: the library reads unknown clusters from the content map in the MGET's round "
    "trip",
    "[integration][near_duplicates][client]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  MapEntry(redis, layout, "A3", "A");
  MapEntry(redis, layout, "B2", "B");
  MapEntry(redis, layout, "C1", "C");
  redis.Command({"SET", contentdb::MapKey(layout.prefix, "bad"), "short"});  // not a map entry
  auto client = MakeClient(redis, true);
  redis.Command({"CONFIG", "RESETSTAT"});
  const exposure_filter::Result r = client->Seen("u1", {"A2", "A3", "B2", "C1", "D1", "bad"});
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK(r.seen == std::vector<bool>{true, false, false, false, false, false});
  CHECK(r.near_duplicate == std::vector<bool>{false, true, true, false, false, false});
  CHECK(r.cluster == Strings{"", "A", "B", "C", "", ""});
  // One pipeline: the user's MGET and the map's (two MGET commands, one round trip).
  CHECK(MgetCalls(redis) == 2);
  const exposure_filter::ClientStats s = client->stats();
  CHECK(s.cluster_lookups == 6);
  CHECK(s.clusters_unknown == 3);  // A2 (not in the map), D1, bad
  CHECK(s.map_bad_values == 1);
  // A cluster given in the call wins over the map's.
  const std::vector<std::string_view> items = {"C1"};
  const std::vector<std::string_view> given = {"A"};
  CHECK(client->SeenWithClusters("u1", items, given).near_duplicate == std::vector<bool>{true});

  // filter.near_duplicates off: no map read (one MGET), no near_duplicate answer.
  auto off = MakeClient(redis, false);
  redis.Command({"CONFIG", "RESETSTAT"});
  const exposure_filter::Result o = off->Seen("u1", {"A2", "A3", "B2", "C1"});
  REQUIRE(o.ok);
  CHECK(o.seen == std::vector<bool>{true, false, false, false});
  CHECK(o.near_duplicate == std::vector<bool>(4, false));
  CHECK(o.cluster.empty());
  CHECK(MgetCalls(redis) == 1);
  // The founder A reads seen without the option too: A2's exposure set A.
  CHECK(off->Seen("u1", {"A"}).seen == std::vector<bool>{true});
  CHECK(off->stats().cluster_lookups == 0);
  const std::vector<std::string_view> four = {"A2", "A3", "B2", "C1"};
  const std::vector<std::string_view> four_clusters = {"A", "A", "B", "C"};
  CHECK(off->SeenWithClusters("u1", four, four_clusters).near_duplicate_count == 0);
}

TEST_CASE(
    "near duplicates: FilterAndMark marks the page's clusters, page 2 leaves out their near "
    "duplicates",
    "[integration][near_duplicates][client]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  auto client = MakeClient(redis, true);
  const std::vector<std::string_view> page1 = {"P1", "Q1"};
  const std::vector<std::string_view> page1_clusters = {"P", "Q1"};
  const exposure_filter::Result r1 =
      client->FilterAndMarkWithClusters("u1", page1, page1_clusters, 10);
  REQUIRE(r1.ok);
  CHECK(r1.marked_count == 2);
  // The ring holds three slots: P1, P (a cluster other than the item) and Q1 (its
  // own cluster: no mark). docs/HTTP.md: a cluster mark takes a slot.
  {
    const auto ring = redis.Connect()->Command({"GET", layout.prefix + "{u1}:served"});
    REQUIRE(ring.ok());
    REQUIRE(ring->str.size() >= 16);
    uint32_t filled = 0;
    for (int b = 3; b >= 0; --b)
      filled = filled << 8 | static_cast<unsigned char>(ring->str[12 + b]);
    CHECK(filled == 3);
  }
  // Page 2: P2 (cluster P: P marked), Q2 (cluster Q1, served itself), R.
  const std::vector<std::string_view> page2 = {"P2", "Q2", "R", "A3"};
  const std::vector<std::string_view> page2_clusters = {"P", "Q1", "R", "A"};
  const exposure_filter::Result r2 =
      client->FilterAndMarkWithClusters("u1", page2, page2_clusters, 10);
  REQUIRE(r2.ok);
  CHECK(r2.served == std::vector<bool>{true, true, false, false});
  CHECK(r2.near_duplicate == std::vector<bool>{false, false, false, true});
  CHECK(r2.marked == std::vector<bool>{false, false, true, false});
}

TEST_CASE(
    "near duplicates: serve answers near_duplicates with the cluster, from the request and the map",
    "[integration][near_duplicates][serve]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const Layout layout = DefaultTestLayout();
  WriteKey(stack.redis(), layout, "u1", Exposures(kSeen));
  MapEntry(stack.redis(), layout, "B2", "B");
  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto post = [&](const std::string& body) {
    auto r = http.Post("/v1/filter", body, "application/json");
    REQUIRE(r);
    return std::make_pair(r->status, r->body);
  };
  // A3 by the request's cluster, B2 by the map's, C1 unseen.
  auto [status, body] = post(
      R"({"user_id": "u1", "items": ["A2", "A3", "B2", "C1"], "clusters": [null, "A", null, "C"]})");
  INFO(body);
  REQUIRE(status == 200);
  CHECK(json::parse(body) == json::parse(R"({"unseen": ["C1"], "seen_count": 1, "served": [],
      "served_count": 0, "near_duplicates": [{"item": "A3", "cluster": "A"},
      {"item": "B2", "cluster": "B"}], "near_duplicate_count": 2})"));
  // Batch: per request.
  auto batch = http.Post("/v1/filter:batch",
                         R"({"requests": [{"user_id": "u1", "items": ["A3"], "clusters": ["A"]},
                                          {"user_id": "u2", "items": ["A3"]}]})",
                         "application/json");
  REQUIRE(batch);
  CHECK(json::parse(batch->body).at("results").at(0).at("near_duplicate_count") == 1);
  CHECK(json::parse(batch->body).at("results").at(1) ==
        json::parse(R"({"unseen": ["A3"], "seen_count": 0})"));
  // Bad clusters: 400 naming the field.
  auto [bad_status, bad_body] =
      post(R"({"user_id": "u1", "items": ["A2", "A3"], "clusters": ["A"]})");
  CHECK(bad_status == 400);
  CHECK(json::parse(bad_body).at("error") ==
        "clusters: 1 entries for 2 items (one per item, null when unknown)");
  auto [bad2_status, bad2_body] = post(R"({"user_id": "u1", "items": ["A2"], "clusters": [{}]})");
  CHECK(bad2_status == 400);
  CHECK(json::parse(bad2_body).at("error") ==
        "clusters[0]: expected a string, an integer or null, got an object");
  // The metric counts the near duplicates answered (2 + 1).
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("exposure_filter_serve_near_duplicates_total 3") != std::string::npos);
  CHECK(metrics->body.find("exposure_filter_serve_cluster_lookups_total") != std::string::npos);
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "near duplicates: check prints near-duplicate with the cluster, from --cluster and the map",
    "[integration][near_duplicates][cli]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  MapEntry(redis, layout, "B2", "B");
  const std::vector<std::string> base = {EF_BINARY, "check",
                                         "--set",   "redis.address=" + redis.address(),
                                         "--set",   "filter.items_per_bucket=200",
                                         "--set",   "filter.fpr=0.01",
                                         "--set",   "filter.near_duplicates=true",
                                         "-u",      "u1"};
  std::vector<std::string> argv = base;
  for (const char* a : {"--cluster", "A3=A", "A2", "A3", "B2", "C1"}) argv.push_back(a);
  SplitRunResult r = RunCommandWithEnv(argv, {});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("near-duplicate  A3  (cluster A)") != std::string::npos);
  CHECK(r.out.find("near-duplicate  B2  (cluster B)") != std::string::npos);
  CHECK(r.out.find("unseen  C1") != std::string::npos);
  CHECK(r.out.find("seen    A2") != std::string::npos);
  argv.push_back("--json");
  r = RunCommandWithEnv(argv, {});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("near_duplicates") ==
        json::parse(R"([{"item": "A3", "cluster": "A"}, {"item": "B2", "cluster": "B"}])"));
  CHECK(j.at("unseen") == json::parse(R"(["C1"])"));
  // A --cluster naming no candidate, or not ITEM=CLUSTER: a usage error naming it.
  argv = base;
  for (const char* a : {"--cluster", "Z=A", "A2"}) argv.push_back(a);
  r = RunCommandWithEnv(argv, {});
  CHECK(r.code == app::kExitUsage);
  CHECK(r.err.find("--cluster Z=A: Z is not a candidate item") != std::string::npos);
  argv = base;
  for (const char* a : {"--cluster", "A2", "A2"}) argv.push_back(a);
  r = RunCommandWithEnv(argv, {});
  CHECK(r.code == app::kExitUsage);
  CHECK(r.err.find("--cluster A2: expected ITEM=CLUSTER") != std::string::npos);
  // Without filter.near_duplicates: a usage error naming --cluster.
  argv = base;
  argv.insert(argv.end(), {"--set", "filter.near_duplicates=false"});  // the later --set wins
  for (const char* a : {"--cluster", "A3=A", "A2", "A3"}) argv.push_back(a);
  r = RunCommandWithEnv(argv, {});
  INFO(r.out << r.err);
  CHECK(r.code == app::kExitUsage);
  CHECK(r.out.empty());
  CHECK(r.err.find("--cluster: needs filter.near_duplicates: true") != std::string::npos);
}

TEST_CASE(
    "near duplicates: serve's /metrics counts the content map's unknown clusters and bad values",
    "[integration][near_duplicates][serve][metrics]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const Layout layout = DefaultTestLayout();
  WriteKey(stack.redis(), layout, "u1", Exposures(kSeen));
  // B2's entry is exactly 17 bytes (seq, simhash, the 1-byte cluster "B"): a map entry.
  MapEntry(stack.redis(), layout, "B2", "B");
  REQUIRE(stack.redis().Command({"STRLEN", contentdb::MapKey(layout.prefix, "B2")}).integer == 17);
  // Not map entries: 5 bytes, and 16 bytes (one short of the shortest entry).
  stack.redis().Command({"SET", contentdb::MapKey(layout.prefix, "bad5"), "short"});
  stack.redis().Command(
      {"SET", contentdb::MapKey(layout.prefix, "bad16"), std::string(16, '\x01')});
  // An empty value reads as a missing key: unknown, not a bad value.
  stack.redis().Command({"SET", contentdb::MapKey(layout.prefix, "empty"), ""});
  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto scrape = [&] { return ScrapeText(http); };
  const char* const kLookups = "exposure_filter_serve_cluster_lookups_total";
  const char* const kUnknown = "exposure_filter_serve_clusters_unknown_total";
  const char* const kBad = "exposure_filter_serve_content_map_bad_values_total";
  const std::string before = scrape();
  for (const char* series : {kLookups, kUnknown, kBad}) {
    INFO(series);
    REQUIRE(SampleValue(before, series) >= 0);  // exported before any lookup
  }
  // A3's cluster is given (no lookup); the six others are looked up: B2 found,
  // A2 and D1 not in the map, empty empty, bad5 and bad16 not map entries.
  auto r =
      http.Post("/v1/filter",
                R"({"user_id": "u1", "items": ["A2", "A3", "B2", "D1", "empty", "bad5", "bad16"],
          "clusters": [null, "A", null, null, null, null, null]})",
                "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  // The unknown ones are tested by their item ID alone: A2 seen, the others unseen.
  CHECK(json::parse(r->body) == json::parse(R"({"unseen": ["D1", "empty", "bad5", "bad16"],
      "seen_count": 1, "served": [], "served_count": 0, "near_duplicates":
      [{"item": "A3", "cluster": "A"}, {"item": "B2", "cluster": "B"}],
      "near_duplicate_count": 2})"));
  const std::string after = scrape();
  CHECK(SampleValue(after, kLookups) - SampleValue(before, kLookups) == 6);
  CHECK(SampleValue(after, kUnknown) - SampleValue(before, kUnknown) ==
        5);                                                          // A2, D1, empty, bad5, bad16
  CHECK(SampleValue(after, kBad) - SampleValue(before, kBad) == 2);  // bad5, bad16
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "near duplicates: an answer's precedence is seen, then near_duplicate, then served (serve and "
    "the library)",
    "[integration][near_duplicates][served][serve][client]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const Layout layout = DefaultTestLayout();
  WriteKey(stack.redis(), layout, "u1", Exposures(kSeen));  // A2 (A set too) and B
  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  // Served: A2 (seen, and of cluster A: a near duplicate too), A3 (of cluster A:
  // a near duplicate, not seen), B (seen), S1 (served alone).
  auto marked = http.Post("/v1/served", R"({"user_id": "u1", "items": ["A2", "A3", "B", "S1"]})",
                          "application/json");
  REQUIRE(marked);
  INFO(marked->body);
  REQUIRE(marked->status == 200);
  REQUIRE(json::parse(marked->body).at("marked") == 4);
  auto r = http.Post("/v1/filter", R"({"user_id": "u1", "items": ["A2", "A3", "B", "S1", "C1"],
                                      "clusters": ["A", "A", null, null, null]})",
                     "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  // A2 and B seen; A3 a near duplicate (not served); S1 served; C1 unseen.
  CHECK(json::parse(r->body) == json::parse(R"({"unseen": ["C1"], "seen_count": 2,
      "served": ["S1"], "served_count": 1,
      "near_duplicates": [{"item": "A3", "cluster": "A"}], "near_duplicate_count": 1})"));
  // Without its cluster (none given, none in the map) A3 is served: the ring holds it.
  auto r2 = http.Post("/v1/filter", R"({"user_id": "u1", "items": ["A2", "A3", "B", "S1", "C1"]})",
                      "application/json");
  REQUIRE(r2);
  INFO(r2->body);
  REQUIRE(r2->status == 200);
  CHECK(json::parse(r2->body) == json::parse(R"({"unseen": ["C1"], "seen_count": 2,
      "served": ["A3", "S1"], "served_count": 2})"));

  // The library reads the same ring and bits with the same precedence.
  auto client = MakeClient(stack.redis(), true);
  const std::vector<std::string_view> items = {"A2", "A3", "B", "S1", "C1"};
  const std::vector<std::string_view> clusters = {"A", "A", "", "", ""};
  exposure_filter::CallOptions call;
  call.cluster_lookup = false;
  const exposure_filter::Result lib = client->SeenWithClusters("u1", items, clusters, call);
  INFO(lib.error);
  REQUIRE(lib.ok);
  CHECK(lib.seen == std::vector<bool>{true, false, true, false, false});
  CHECK(lib.near_duplicate == std::vector<bool>{false, true, false, false, false});
  CHECK(lib.served == std::vector<bool>{false, false, false, true, false});
  // With no clusters, A3 is answered served: the ring holds it (so the answers
  // above are precedence, not a missing mark).
  const std::vector<std::string_view> none = {"", "", "", "", ""};
  const exposure_filter::Result alone = client->SeenWithClusters("u1", items, none, call);
  REQUIRE(alone.ok);
  CHECK(alone.seen == std::vector<bool>{true, false, true, false, false});
  CHECK(alone.near_duplicate == std::vector<bool>(5, false));
  CHECK(alone.served == std::vector<bool>{false, true, false, true, false});
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "near duplicates: the library's content cache answers again without Redis, and an item "
    "indexed after a miss is found once the miss's 10 s are over (issue 52)",
    "[integration][near_duplicates][client][content_cache]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  MapEntry(redis, layout, "A3", "A");
  MapEntry(redis, layout, "B2", "B");
  std::atomic<int64_t> now_ms{1'000'000};
  auto client = MakeClient(redis, true, [&](exposure_filter::ClientOptions& o) {
    o.cache_clock_ms = [&] { return now_ms.load(); };
  });
  const Strings items = {"A2", "A3", "B2", "N1"};  // N1: not indexed yet
  auto check = [&](const exposure_filter::Result& r, const std::string& n1_cluster) {
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.seen == std::vector<bool>{true, false, false, false});
    CHECK(r.near_duplicate == std::vector<bool>{false, true, true, !n1_cluster.empty()});
    CHECK(r.cluster == Strings{"", "A", "B", n1_cluster});
  };
  // A call reads the map (a second MGET) and keeps what it answered.
  redis.Command({"CONFIG", "RESETSTAT"});
  check(client->Seen("u1", items), "");
  CHECK(MgetCalls(redis) == 2);
  const int64_t first_keys = KeysRead(redis);
  exposure_filter::ClientStats s = client->stats();
  CHECK(s.cluster_lookups == 4);
  CHECK(s.cluster_cache_misses == 4);
  CHECK(s.cluster_cache_hits == 0);
  CHECK(s.clusters_unknown == 2);  // A2, N1
  CHECK(s.cluster_cache_bytes > 0);
  CHECK(s.cluster_cache_bytes <= size_t{64} << 20);  // serve.content_cache_bytes' default

  // The same call again: the cache answers all four (clusters and "not known"),
  // no map key is read: one MGET, four keys fewer.
  redis.Command({"CONFIG", "RESETSTAT"});
  check(client->Seen("u1", items), "");
  CHECK(MgetCalls(redis) == 1);
  CHECK(KeysRead(redis) == first_keys - 4);
  s = client->stats();
  CHECK(s.cluster_lookups == 8);
  CHECK(s.cluster_cache_hits == 4);
  CHECK(s.cluster_cache_misses == 4);
  CHECK(s.clusters_unknown == 4);

  // N1 is indexed now (a near duplicate of A). The miss stands for 10 s
  // (ClusterCache::kMissRetryMs) after it was read, then N1 is read again.
  MapEntry(redis, layout, "N1", "A");
  now_ms += contentdb::ClusterCache::kMissRetryMs - 1;
  check(client->Seen("u1", items), "");
  now_ms += 1;
  redis.Command({"CONFIG", "RESETSTAT"});
  check(client->Seen("u1", items), "A");
  CHECK(MgetCalls(redis) == 2);  // N1 and A2 (also a miss 10 s ago) read again
  CHECK(KeysRead(redis) == first_keys - 2);
  s = client->stats();
  CHECK(s.cluster_cache_misses == 6);
  CHECK(s.cluster_cache_hits == 10);

  // A cluster is kept (an assignment never changes): with its map entry gone,
  // A3 keeps its cluster without a read; N1's is kept now too.
  redis.Command({"DEL", contentdb::MapKey(layout.prefix, "A3")});
  redis.Command({"CONFIG", "RESETSTAT"});
  check(client->Seen("u1", items), "A");
  CHECK(MgetCalls(redis) == 1);
  CHECK(client->stats().cluster_cache_hits == 14);
}

TEST_CASE(
    "near duplicates: with content_cache_bytes 0 every call reads the map, and a cluster given in "
    "the call needs no cache (issue 52)",
    "[integration][near_duplicates][client][content_cache]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  WriteKey(redis, layout, "u1", Exposures(kSeen));
  MapEntry(redis, layout, "A3", "A");
  auto client =
      MakeClient(redis, true, [](exposure_filter::ClientOptions& o) { o.content_cache_bytes = 0; });
  for (int i = 0; i < 2; ++i) {
    redis.Command({"CONFIG", "RESETSTAT"});
    const exposure_filter::Result r = client->Seen("u1", {"A3", "C1"});
    REQUIRE(r.ok);
    CHECK(r.near_duplicate == std::vector<bool>{true, false});
    CHECK(MgetCalls(redis) == 2);
  }
  const exposure_filter::ClientStats s = client->stats();
  CHECK(s.cluster_lookups == 4);
  CHECK(s.cluster_cache_misses == 4);
  CHECK(s.cluster_cache_hits == 0);
  CHECK(s.cluster_cache_bytes == 0);
  // The config key does the same (ClientOptions unset: serve.content_cache_bytes).
  auto by_key = MakeClient(redis, true, [](exposure_filter::ClientOptions& o) {
    o.overrides.push_back("serve.content_cache_bytes=0");
  });
  for (int i = 0; i < 2; ++i) REQUIRE(by_key->Seen("u1", {"A3", "C1"}).ok);
  CHECK(by_key->stats().cluster_cache_misses == 4);
  CHECK(by_key->stats().cluster_cache_hits == 0);
}

TEST_CASE(
    "near duplicates: serve's /metrics counts the content cache's hits, misses and bytes "
    "(issue 52)",
    "[integration][near_duplicates][serve][metrics][content_cache]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const Layout layout = DefaultTestLayout();
  WriteKey(stack.redis(), layout, "u1", Exposures(kSeen));
  MapEntry(stack.redis(), layout, "B2", "B");
  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto scrape = [&] { return ScrapeText(http); };
  const char* const kHits = "exposure_filter_serve_cluster_cache_hits_total";
  const char* const kMisses = "exposure_filter_serve_cluster_cache_misses_total";
  const char* const kBytes = "exposure_filter_serve_cluster_cache_bytes";
  const std::string before = scrape();
  for (const char* series : {kHits, kMisses, kBytes}) {
    INFO(series);
    REQUIRE(SampleValue(before, series) == 0);  // exported before any lookup
  }
  const std::string body = R"({"user_id": "u1", "items": ["A2", "B2", "C1"]})";
  const json want = json::parse(R"({"unseen": ["C1"], "seen_count": 1, "served": [],
      "served_count": 0, "near_duplicates": [{"item": "B2", "cluster": "B"}],
      "near_duplicate_count": 1})");
  for (int i = 0; i < 2; ++i) {
    stack.redis().Command({"CONFIG", "RESETSTAT"});
    auto r = http.Post("/v1/filter", body, "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    CHECK(json::parse(r->body) == want);
    CHECK(MgetCalls(stack.redis()) == (i == 0 ? 2 : 1));  // the second: no map read
  }
  const std::string after = scrape();
  CHECK(SampleValue(after, kMisses) == 3);
  CHECK(SampleValue(after, kHits) == 3);
  CHECK(SampleValue(after, kBytes) > 0);
  CHECK(SampleValue(after, kBytes) <= double(int64_t{64} << 20));
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "near duplicates: revision-1 data (cluster tokens, a meta without founder_marks_from) reads "
    "near_duplicate through the library and serve, before and after a writer adds the field",
    "[integration][near_duplicates][client][serve]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const Layout layout = DefaultTestLayout();
  // The meta and the key as a deployment of revision 1 left them.
  {
    std::vector<std::string> hset = {"HSET", MetaKey(layout.prefix)};
    for (const auto& [f, v] : layout.ToFields()) {
      hset.push_back(f);
      hset.push_back(v);
    }
    stack.redis().Command(hset);
  }
  WriteKey(stack.redis(), layout, "u1", ExposuresRevision1(kSeen), false);
  const std::vector<std::string_view> items = {"A2", "A3", "A", "B2", "C1"};
  const std::vector<std::string_view> clusters = {"A", "A", "A", "B", "C"};
  exposure_filter::CallOptions call;
  call.cluster_lookup = false;
  auto expect_revision1_answers = [&] {
    auto client = MakeClient(stack.redis(), true);
    const exposure_filter::Result r = client->SeenWithClusters("u1", items, clusters, call);
    INFO(r.error);
    REQUIRE(r.ok);
    // The founder A is a near duplicate (token(A) set), not seen: A2's exposure
    // did not set A itself.
    CHECK(r.seen == std::vector<bool>{true, false, false, false, false});
    CHECK(r.near_duplicate == std::vector<bool>{false, true, true, true, false});
  };
  expect_revision1_answers();
  // A writer of revision 2 starts: it stores founder_marks_from = the next
  // bucket's start, so the current bucket (which holds the tokens) is still read
  // for them.
  {
    auto conn = stack.redis().Connect();
    Layout effective;
    REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
    REQUIRE(effective.founder_marks_from > SystemClock().NowMs() / 1000);
  }
  expect_revision1_answers();
  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto r = http.Post("/v1/filter", R"({"user_id": "u1", "items": ["A2", "A3", "A", "C1"],
                                      "clusters": ["A", "A", "A", "C"]})",
                     "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  CHECK(json::parse(r->body) == json::parse(R"({"unseen": ["C1"], "seen_count": 1,
      "served": [], "served_count": 0, "near_duplicates": [{"item": "A3", "cluster": "A"},
      {"item": "A", "cluster": "A"}], "near_duplicate_count": 2})"));
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

}  // namespace ef::test
