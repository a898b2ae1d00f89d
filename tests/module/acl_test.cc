// The Redis ACL that docs/CONFIG.md documents, applied verbatim (the test reads
// the `ACL SETUSER` lines from the file), serves every write mode and every
// command: run, replay, check, serve and layout (issue 26 item 6). Before, the
// documented ACL (`~ef:* +@read +@write +@connection`) made `run` exit 3 with
// NOPERM: EVAL, INFO, MULTI were outside it, and bitop's temporary keys were
// named outside the key prefix (`{user}:ef-tmp:<id>`).
#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "exposure_filter/client.h"
#include "module/module_support.h"
#include "redis/meta.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

constexpr char kUser[] = "exposure-filter";
constexpr char kPassword[] = "S3cret";  // as documented

// The `ACL SETUSER` lines of docs/CONFIG.md, each split into words.
std::vector<std::vector<std::string>> DocumentedAcl() {
  std::ifstream in(std::string(EF_SOURCE_DIR) + "/docs/CONFIG.md");
  REQUIRE(in);
  std::vector<std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ACL SETUSER ", 0) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    out.push_back(std::move(w));
  }
  return out;
}

bool NamesModuleCommand(const std::vector<std::string>& acl) {
  for (const auto& w : acl)
    if (w.find("ef.") != std::string::npos) return true;
  return false;
}

// Applies the documented lines; the module's line only where the module is loaded.
void ApplyAcl(RedisConnection& admin, bool with_module) {
  const auto lines = DocumentedAcl();
  REQUIRE(lines.size() >= 2);  // the user, and the module's commands
  size_t applied = 0;
  for (const auto& acl : lines) {
    if (NamesModuleCommand(acl) && !with_module) continue;
    RedisReply r = Cmd(admin, acl);
    INFO("ACL line: " << acl[2] << " ...: " << r.str);
    REQUIRE(r.type == RedisReply::Type::kStatus);
    ++applied;
  }
  REQUIRE(applied >= 1);
  // The user exists, with the documented password and key pattern.
  RedisOptions o = admin.options();
  o.username = kUser;
  o.password = kPassword;
  REQUIRE(RedisConnection::Connect(o).ok());
}

std::vector<std::string> Env() {
  return {std::string("EXPOSURE_FILTER_REDIS_USERNAME=") + kUser,
          std::string("EXPOSURE_FILTER_REDIS_PASSWORD=") + kPassword};
}

// The binary as the ACL user (credentials in the environment).
SplitRunResult EfAsUser(std::vector<std::string> args) {
  return Ef(std::move(args), Env(), "", 120s);
}

std::vector<std::string> WithSets(std::vector<std::string> args,
                                  const std::vector<std::string>& sets) {
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

// Users with many items in one bucket, so that every batch has keys above
// redis.bitop_threshold (bitop's MULTI/SET tmp/BITOP path) and below it.
std::vector<TestEvent> Events(int64_t now_ms) {
  std::vector<TestEvent> events = MakeEvents("acl", 12, 3, 1, now_ms, 26);
  for (int u = 0; u < 3; ++u) {
    TestEvent e;
    e.user = "dense-" + std::to_string(u);
    for (int i = 0; i < 40; ++i)
      e.items.push_back("d" + std::to_string(u) + "-" + std::to_string(i));
    e.ts_ms = now_ms - 1000;
    events.push_back(e);
  }
  return events;
}

Layout DefaultLayout() {
  auto l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  return l.value();
}

void ExpectOk(const SplitRunResult& r, const std::string& what) {
  INFO(what << ": exit " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(r.err.find("NOPERM") == std::string::npos);
}

// The stack's redis-server and one with the module, each with the documented
// ACL applied, and the admin connections to them.
struct AclServers {
  Stack stack{2};
  std::unique_ptr<RedisServer> with_module = ServerWithModule();
  std::unique_ptr<RedisConnection> plain_admin = stack.redis().Connect();
  std::unique_ptr<RedisConnection> module_admin = with_module->Connect();
  AclServers() {
    ApplyAcl(*plain_admin, false);
    ApplyAcl(*module_admin, true);
  }
  // A write mode and the server it is tried on.
  struct Mode {
    const char* mode;
    RedisServer* server;
    RedisConnection* admin;
  };
  Mode Plain(const char* mode) { return {mode, &stack.redis(), plain_admin.get()}; }
  Mode Module(const char* mode) { return {mode, with_module.get(), module_admin.get()}; }
};

}  // namespace

TEST_CASE("acl: the documented ACL serves run, replay in every write mode, check, serve and layout",
          "[module][acl]") {
  AclServers servers;
  Stack& stack = servers.stack;
  RedisConnection* plain_admin = servers.plain_admin.get();

  const int64_t now = SystemClock().NowMs();
  const std::vector<TestEvent> events = Events(now);
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  const Layout layout = DefaultLayout();

  // run (write_mode auto: bitop without the module) as the ACL user.
  {
    std::vector<std::string> argv = {"env"};
    for (const auto& e : Env()) argv.push_back(e);
    for (const auto& a : WithSets({EF_BINARY, "run", "-c", config},
                                  {"pipeline.commit_interval=200ms", "redis.bitop_threshold=8"}))
      argv.push_back(a);
    Process daemon(argv, stack.dir().File("run.log"));
    const bool committed = stack.AwaitCommitted(daemon, 60s);
    INFO("run log:\n" << daemon.Output());
    CHECK(committed);
    CHECK(daemon.Stop(SIGTERM, 30s) == 0);
    CHECK(daemon.Output().find("NOPERM") == std::string::npos);
    CHECK(MissingItems(*plain_admin, layout, events).empty());
  }

  // replay in every write mode, each into an empty Redis (the meta written anew).
  const AclServers::Mode modes[] = {servers.Plain("auto"),     servers.Plain("bitop"),
                                    servers.Plain("bitfield"), servers.Plain("setbit"),
                                    servers.Module("module"),  servers.Module("auto")};
  for (const AclServers::Mode& m : modes) {
    INFO("write_mode " << m.mode << " on " << m.server->address());
    Cmd(*m.admin, {"FLUSHALL"});
    ExpectOk(
        EfAsUser(WithSets({"replay", "-c", config, "--since", "2d"},
                          {"redis.address=" + m.server->address(),
                           std::string("redis.write_mode=") + m.mode, "redis.bitop_threshold=8"})),
        std::string("replay, write_mode ") + m.mode);
    CHECK(MissingItems(*m.admin, layout, events).empty());
  }

  // check, layout show / stats / upgrade --dry-run.
  const TestEvent& e = events.front();
  const auto check = EfAsUser({"check", "-c", config, "-u", e.user, "--json", e.items.front()});
  ExpectOk(check, "check");
  CHECK(check.out.find(e.items.front()) != std::string::npos);
  ExpectOk(EfAsUser({"layout", "show", "-c", config}), "layout show");
  ExpectOk(EfAsUser({"layout", "stats", "-c", config}), "layout stats");
  ExpectOk(EfAsUser({"layout", "upgrade", "--dry-run", "-c", config}), "layout upgrade --dry-run");

  // serve: one /v1/filter request answered from Redis (not failed open).
  const int port = FreePort();
  std::vector<std::string> argv = {"env"};
  for (const auto& x : Env()) argv.push_back(x);
  for (const auto& a : WithSets({EF_BINARY, "serve", "-c", config},
                                {"serve.listen=127.0.0.1:" + std::to_string(port)}))
    argv.push_back(a);
  Process serve(argv, stack.dir().File("serve.log"));
  std::string body;
  const bool answered = WaitFor(
      [&] {
        if (!serve.Running()) return true;
        httplib::Client c("127.0.0.1", port);
        auto r = c.Post("/v1/filter",
                        R"({"user_id":")" + e.user + R"(","items":[")" + e.items.front() +
                            R"(","never-seen"]})",
                        "application/json");
        if (!r || r->status != 200) return false;
        body = r->body;
        return true;
      },
      30s);
  INFO("serve log:\n" << serve.Output() << "\nbody: " << body);
  REQUIRE(answered);
  CHECK(serve.Running());
  const auto j = nlohmann::json::parse(body);
  CHECK_FALSE(j.contains("failed_open"));
  CHECK(j.at("seen_count") == 1);
  CHECK(j.at("unseen") == nlohmann::json::array({"never-seen"}));
  CHECK(serve.Stop(SIGTERM, 30s) == 0);
}

// Issue 53: layout version 4's writers send the creation and growth scripts (EVAL,
// EVALSHA; inside them GET, STRLEN, GETRANGE, BITCOUNT, SET, EXPIREAT) and
// `layout stats` reads each classed key's header (GETRANGE): all within the
// documented ACL, in every write mode (items_per_bucket 10: the dense users' keys
// grow stages, through the growth script).
TEST_CASE("acl: the documented ACL serves layout version 4's replay in every write mode",
          "[module][acl][v4]") {
  AclServers servers;
  Stack& stack = servers.stack;
  const std::vector<TestEvent> events = Events(SystemClock().NowMs());
  stack.Produce(events);
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  layout_version: 4\n  items_per_bucket: 10\n");
  FilterConfig f;
  f.layout_version = 4;
  f.items_per_bucket = 10;
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  const AclServers::Mode modes[] = {servers.Plain("bitop"), servers.Plain("bitfield"),
                                    servers.Plain("setbit"), servers.Module("module")};
  for (const AclServers::Mode& m : modes) {
    INFO("write_mode " << m.mode << " on " << m.server->address());
    Cmd(*m.admin, {"FLUSHALL"});
    const std::vector<std::string> sets = {"redis.address=" + m.server->address(),
                                           std::string("redis.write_mode=") + m.mode,
                                           "redis.bitop_threshold=8"};
    ExpectOk(EfAsUser(WithSets({"replay", "-c", config, "--since", "2d"}, sets)),
             std::string("replay, write_mode ") + m.mode);
    CHECK(Cmd(*m.admin, {"HGET", "ef:meta", "version"}).str == "4");
    CHECK(MissingItems(*m.admin, *layout, events).empty());
    ExpectOk(EfAsUser(WithSets({"layout", "stats", "-c", config}, sets)), "layout stats");
  }
}

// Session 35: the documented ACL lacked INCRBY and HDEL, which the content index
// sends (a new item's sequence number; a moved fingerprint), so `content` and
// `run`/`replay` filing an exposure's simhash got NOPERM.
TEST_CASE("acl: the documented ACL serves content, and replay and check with near_duplicates",
          "[module][acl][near_duplicates]") {
  Stack stack(2);
  auto admin = stack.redis().Connect();
  ApplyAcl(*admin, false);
  REQUIRE(stack.kafka().CreateTopic("items", 1, 1).ok());
  const std::string text = "The river rose overnight and closed the old bridge to traffic.";
  stack.ProduceRawTo("items",
                     {nlohmann::json{{"item_id", "story-1"}, {"text", text}}.dump(),
                      nlohmann::json{{"item_id", "repost-1"}, {"text", text}}.dump(),  // re-posts
                      nlohmann::json{{"item_id", "repost-2"}, {"text", text}}.dump()});
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\ncontent:\n  topic: items\n");
  ExpectOk(EfAsUser({"content", "-c", config, "--exit-at-end"}), "content");

  // An exposure of the re-post (its cluster from the map), and one of an item
  // the index has not seen, with its fingerprint: replay files it (INCRBY, SET,
  // HSET, PEXPIRE).
  const int64_t now = SystemClock().NowMs();
  stack.ProduceRaw(
      {nlohmann::json{{"user_id", "alice"}, {"item_id", "repost-1"}, {"ts", now}}.dump(),
       nlohmann::json{
           {"user_id", "bob"}, {"item_id", "fresh-1"}, {"ts", now}, {"simhash", "0123456789abcdef"}}
           .dump()});
  ExpectOk(EfAsUser({"replay", "-c", config, "--since", "1h", "--timeout", "60s"}), "replay");
  const auto check =
      EfAsUser({"check", "-c", config, "-u", "alice", "--json", "story-1", "repost-1", "repost-2"});
  ExpectOk(check, "check");
  const auto j = nlohmann::json::parse(check.out);
  // story-1, the cluster's founder, reads seen: repost-1's exposure marked it
  // (docs/CONTENT.md rule 5, revision 2); repost-2 is a near duplicate by the map.
  CHECK(j.at("seen") == nlohmann::json::array({"story-1", "repost-1"}));
  CHECK(j.value("near_duplicates", nlohmann::json::array()) ==
        nlohmann::json::parse(R"([{"item": "repost-2", "cluster": "story-1"}])"));
  // The fresh item was filed: the content map knows it now.
  const RedisReply map = Cmd(*admin, {"KEYS", "ef:*fresh-1*"});
  CHECK(map.elements.size() >= 1);
}

// Session 35: a NOPERM from the content index (an ACL without INCRBY, as the one
// documented before) paused `content` and `replay` for good, "retrying every
// 50..500 ms"; like any refused command it ends them with exit 3, naming it.
TEST_CASE("acl: a content index command the ACL refuses ends content and replay with exit 3",
          "[module][acl][near_duplicates]") {
  Stack stack(2);
  auto admin = stack.redis().Connect();
  ApplyAcl(*admin, false);
  REQUIRE(Cmd(*admin, {"ACL", "SETUSER", kUser, "-incrby"}).type == RedisReply::Type::kStatus);
  REQUIRE(stack.kafka().CreateTopic("items", 1, 1).ok());
  stack.ProduceRawTo("items",
                     {nlohmann::json{{"item_id", "story-1"}, {"text", "A story."}}.dump()});
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\ncontent:\n  topic: items\n");
  const auto content = EfAsUser({"content", "-c", config, "--exit-at-end"});
  INFO("content: exit " << content.code << "\n" << content.err);
  CHECK_FALSE(content.timed_out);
  CHECK(content.code == 3);
  CHECK(content.err.find("INCRBY") != std::string::npos);
  CHECK(content.err.find("NOPERM") != std::string::npos);

  stack.ProduceRaw({nlohmann::json{{"user_id", "bob"},
                                   {"item_id", "fresh-1"},
                                   {"ts", SystemClock().NowMs()},
                                   {"simhash", "0123456789abcdef"}}
                        .dump()});
  const auto replay = EfAsUser({"replay", "-c", config, "--since", "1h", "--timeout", "60s"});
  INFO("replay: exit " << replay.code << "\n" << replay.err);
  CHECK_FALSE(replay.timed_out);
  CHECK(replay.code == 3);
  CHECK(replay.err.find("NOPERM") != std::string::npos);
}

// Issue 26 item 5: with redis.cluster auto, an ACL without cluster|slots made the
// daemon log "NOPERM ... 'cluster|slots'; retrying until it answers" and loop.
TEST_CASE("acl: the documented ACL lets the client library mark and read served items",
          "[module][acl][served]") {
  RedisServer redis;
  auto admin = redis.Connect();
  ApplyAcl(*admin, false);
  Layout stored;
  REQUIRE(EnsureMeta(*admin, DefaultLayout(), &stored).ok());
  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + redis.address(), std::string("redis.username=") + kUser,
                 std::string("redis.password=") + kPassword};
  o.on_error = exposure_filter::OnError::kFailClosed;
  o.timeout = 2s;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  const exposure_filter::MarkResult m = client->MarkServed("acl-user", {"a", "b"});
  INFO(m.error);
  CHECK(m.ok);
  CHECK(m.marked == 2);
  // The first mark ran EVALSHA, got NOSCRIPT and sent EVAL: both allowed.
  const exposure_filter::Result r = client->FilterAndMark("acl-user", {"a", "b", "c", "d"}, 1);
  INFO(r.error);
  CHECK(r.ok);
  CHECK(r.served_count == 2);
  CHECK(r.marked_count == 1);
  CHECK_FALSE(r.mark_failed);
}

TEST_CASE("acl: redis.cluster auto with an ACL that refuses CLUSTER SLOTS exits 3 naming the rule",
          "[module][acl]") {
  Stack stack(1);
  auto admin = stack.redis().Connect();
  RedisReply r = Cmd(*admin, {"ACL", "SETUSER", kUser, "on", std::string(">") + kPassword, "~*",
                              "&*", "+@all", "-cluster|slots"});
  REQUIRE(r.type == RedisReply::Type::kStatus);
  std::vector<std::string> argv = {"env"};
  for (const auto& e : Env()) argv.push_back(e);
  const std::string config = stack.WriteConfig();
  argv.insert(argv.end(), {EF_BINARY, "run", "-c", config});
  Process daemon(argv, stack.dir().File("run.log"));
  const auto code = daemon.Wait(30s);
  INFO("run log:\n" << daemon.Output());
  REQUIRE(code.has_value());
  CHECK(*code == 3);
  CHECK(daemon.Output().find("cluster|slots") != std::string::npos);
  CHECK(daemon.Output().find("redis.cluster") != std::string::npos);
}

}  // namespace ef::test
