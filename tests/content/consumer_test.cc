// `exposure-filter content` (docs/CONTENT.md "Items topic") end to end: a real
// redis-server and the librdkafka mock cluster. Texts from Debian's `fortunes`:
// an original story, a re-post of it with a sentence changed, an unrelated
// text; the re-post joins the original's cluster, the unrelated text has its
// own, a malformed message is counted and skipped, the group commits to the
// end; a second group reading the same topic (redelivery) gets the same
// clusters; with Redis down nothing is committed, and once it is back the
// command finishes; SIGTERM commits what was assigned and exits 0, or exits 1
// within the shutdown grace while Redis is down.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "content/corpus.h"
#include "content/simhash.h"
#include "content/stories.h"
#include "content/tokenizer.h"
#include "contentdb/index.h"
#include "support/promtool.h"
#include "support/scrape.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using content::stories::MakeTexts;
using content::stories::Texts;

// `exposure-filter content ...` to completion (EF_BINARY: the binary under test).
SplitRunResult Content(std::vector<std::string> args) {
  args.insert(args.begin(), {EF_BINARY, "content"});
  return RunCommandWithEnv(args, {});
}

std::string Item(const std::string& id, const std::string& text) {
  return nlohmann::json{{"item_id", id}, {"text", text}}.dump();
}

std::vector<std::optional<std::string>> Clusters(Stack& stack,
                                                 const std::vector<std::string>& items) {
  auto conn = stack.redis().Connect();
  contentdb::ContentIndexOptions o;  // the defaults, as the command's config
  auto index = contentdb::ContentIndex::Make(o, contentdb::SingleNodeRunner(*conn));
  REQUIRE(index.ok());
  auto clusters = (*index)->Lookup(items);
  REQUIRE(clusters.ok());
  return *clusters;
}

std::vector<int64_t> Committed(Stack& stack, const std::string& group) {
  KafkaConfig kc;
  kc.bootstrap_servers = stack.kafka().bootstrap_servers();
  kc.topics = {stack.topic()};
  kc.group_id = group;
  auto offsets = ReadGroupOffsets(kc, 5000);
  REQUIRE(offsets.ok());
  std::vector<int64_t> out;
  for (const auto& po : *offsets) out.push_back(po.committed);
  return out;
}

TEST_CASE("items topic: an item that is not UTF-8 is rejected as bad_utf8, its byte offset logged",
          "[content]") {
  Stack stack(1, "items");
  const std::string bad = "{\"item_id\": \"u8\", \"text\": \"ab\xff\"}";
  const size_t offset = bad.find('\xff');
  stack.ProduceRaw({bad, Item("fine-1", MakeTexts().original)});
  const std::string config = stack.WriteConfig("ef.yaml", "content:\n  topic: items\n");
  const auto run = Content({"-c", config, "--exit-at-end", "--set", "content.group_id=u8"});
  INFO(run.err);
  REQUIRE(run.code == 0);
  CHECK(run.err.find("item rejected: bad_utf8 at byte " + std::to_string(offset) +
                     " of the payload") != std::string::npos);
  CHECK(Clusters(stack, {"u8", "fine-1"}) ==
        std::vector<std::optional<std::string>>{std::nullopt, "fine-1"});
}

TEST_CASE("items topic: re-post joins the original's cluster, bad item skipped, commits to the end",
          "[content]") {
  const Texts texts = MakeTexts();
  Stack stack(2, "items");
  // One key: one partition, in this order (the original is the older item).
  stack.ProduceRaw({Item("orig-1", texts.original), R"({"item_id": "bad-1", "text": )",
                    Item("repost-1", texts.repost), Item("other-1", texts.unrelated)});
  const std::string config = stack.WriteConfig("ef.yaml", "content:\n  topic: items\n");

  const auto first = Content({"-c", config, "--exit-at-end", "--set", "content.group_id=first",
                              "--set", "pipeline.commit_interval=200ms"});
  INFO(first.err);
  REQUIRE(first.code == 0);
  CHECK(first.err.find("items/") != std::string::npos);
  CHECK(first.err.find("item rejected: not_json") != std::string::npos);
  CHECK(first.err.find("3 items assigned (2 started a cluster, 1 joined one, 0 known), 1 "
                       "rejected (not_json 1)") != std::string::npos);

  const std::vector<std::string> ids = {"orig-1", "repost-1", "other-1", "bad-1"};
  const auto clusters = Clusters(stack, ids);
  CHECK(clusters[0] == std::optional<std::string>("orig-1"));
  CHECK(clusters[1] == std::optional<std::string>("orig-1"));
  CHECK(clusters[2] == std::optional<std::string>("other-1"));
  CHECK(clusters[3] == std::nullopt);
  CHECK(GroupCaughtUp(stack, "first"));

  SECTION("a second group over the same topic (redelivery) gets the same clusters") {
    const auto second =
        Content({"-c", config, "--exit-at-end", "--set", "content.group_id=second"});
    INFO(second.err);
    REQUIRE(second.code == 0);
    CHECK(second.err.find("3 items assigned (0 started a cluster, 0 joined one, 3 known)") !=
          std::string::npos);
    CHECK(Clusters(stack, ids) == clusters);
    CHECK(GroupCaughtUp(stack, "second"));
  }
  SECTION("a group that has committed everything has nothing to do") {
    const auto again = Content({"-c", config, "--exit-at-end", "--set", "content.group_id=first"});
    INFO(again.err);
    REQUIRE(again.code == 0);
    CHECK(again.err.find("nothing to do") != std::string::npos);
  }
}

TEST_CASE(
    "items topic: with Redis down nothing is committed, after it is back the command finishes",
    "[content]") {
  Stack stack(2, "items");
  stack.ProduceRaw({R"({"item_id": "a", "tokens": [["x", 1], ["y", 2]]})",
                    R"({"item_id": "b", "simhash": "00000000000000ff"})",
                    R"({"item_id": "c", "simhash": 255})"});
  const std::string config = stack.WriteConfig(
      "ef.yaml", "content:\n  topic: items\nredis:\n  cluster: \"false\"\nlog:\n  level: debug\n");
  stack.redis().Stop();
  Process cmd({EF_BINARY, "content", "-c", config, "--exit-at-end", "--set",
               "content.group_id=down", "--set", "pipeline.commit_interval=100ms"},
              stack.dir().File("content.log"));
  // Three failed attempts: the batch was taken, and commit intervals passed.
  const bool retrying = WaitFor(
      [&] {
        const std::string out = cmd.Output();
        return !cmd.Running() || out.find("content: retry 3 failed") != std::string::npos;
      },
      std::chrono::seconds(30));
  INFO(cmd.Output());
  REQUIRE(retrying);
  REQUIRE(cmd.Running());
  for (int64_t committed : Committed(stack, "down")) CHECK(committed == -1);

  stack.redis().Start();
  const auto code = cmd.Wait(std::chrono::seconds(30));
  INFO(cmd.Output());
  REQUIRE(code == std::optional<int>(0));
  CHECK(cmd.Output().find("assignments succeed again") != std::string::npos);
  CHECK(GroupCaughtUp(stack, "down"));
  const auto clusters = Clusters(stack, {"a", "b", "c"});
  CHECK(clusters[0] == std::optional<std::string>("a"));
  CHECK(clusters[1] == std::optional<std::string>("b"));
  CHECK(clusters[2] == std::optional<std::string>("b"));  // the same fingerprint: b's cluster
}

TEST_CASE(
    "items topic: SIGTERM while Redis is down exits within the shutdown grace, nothing committed",
    "[content]") {
  Stack stack(1, "items");
  stack.ProduceRaw({R"({"item_id": "a", "simhash": 1})"});
  const std::string config = stack.WriteConfig(
      "ef.yaml", "content:\n  topic: items\nredis:\n  cluster: \"false\"\nlog:\n  level: debug\n");
  stack.redis().Stop();
  Process cmd({EF_BINARY, "content", "-c", config, "--set", "content.group_id=term"},
              stack.dir().File("content.log"));
  REQUIRE(WaitFor([&] { return cmd.Output().find("content: retry 1 failed") != std::string::npos; },
                  std::chrono::seconds(30)));
  cmd.Signal(SIGTERM);
  const auto code = cmd.Wait(std::chrono::seconds(15));  // the grace is 10 s
  INFO(cmd.Output());
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  CHECK(cmd.Output().find("1 item(s) not assigned; their offsets are not committed") !=
        std::string::npos);
  for (int64_t committed : Committed(stack, "term")) CHECK(committed == -1);
}

TEST_CASE(
    "items topic: content's /readyz answers 503 naming Redis while assignments fail and 200 once "
    "they succeed again",
    "[content]") {
  // Before the fix its /readyz answered 200 whatever happened.
  Stack stack(1, "items");
  stack.ProduceRaw({R"({"item_id": "a", "simhash": 1})"});
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "content:\n  topic: items\n  listen: 127.0.0.1:" + std::to_string(port) +
                     "\nredis:\n  cluster: \"false\"\n");
  stack.redis().Stop();
  Process cmd({EF_BINARY, "content", "-c", config, "--set", "content.group_id=ready", "--set",
               "pipeline.commit_interval=100ms"},
              stack.dir().File("content.log"));
  HttpReply r;
  const bool not_ready = WaitFor(
      [&] {
        r = HttpGet(port, "/readyz");
        return !cmd.Running() || r.status == 503;
      },
      std::chrono::seconds(30));
  INFO(cmd.Output());
  REQUIRE(not_ready);
  REQUIRE(cmd.Running());
  CHECK(r.body.find("assigning items in Redis fails for") != std::string::npos);
  CHECK(HttpGet(port, "/healthz").status == 200);  // alive: not a reason to restart

  stack.redis().Start();
  CHECK(WaitFor([&] { return HttpGet(port, "/readyz").status == 200; }, std::chrono::seconds(30)));
  CHECK(WaitFor([&] { return GroupCaughtUp(stack, "ready"); }, std::chrono::seconds(30)));
  cmd.Signal(SIGTERM);
  CHECK(cmd.Wait(std::chrono::seconds(15)) == std::optional<int>(0));
}

TEST_CASE(
    "items topic: content's redis_up is 1 once Redis answers, before any item (an idle index is "
    "not Redis down)",
    "[content]") {
  // Before the fix the gauge stayed 0 until a first batch of items was assigned,
  // so ExposureFilterContentRedisDown (config/alerts.yml) fired on a quiet topic.
  Stack stack(1, "items");  // no message: nothing to assign
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "content:\n  topic: items\n  listen: 127.0.0.1:" + std::to_string(port) + "\n");
  Process cmd({EF_BINARY, "content", "-c", config, "--set", "content.group_id=idle"},
              stack.dir().File("content.log"));
  double up = -1;
  const bool answered = WaitFor(
      [&] {
        up = MetricSum(ScrapeText(port), "exposure_filter_content_redis_up");
        return !cmd.Running() || up == 1;
      },
      std::chrono::seconds(30));
  INFO(cmd.Output());
  INFO("exposure_filter_content_redis_up " << up);
  CHECK(answered);
  CHECK(cmd.Running());

  // The alerts' unit tests (tests/promtool/alerts_test.yml) use content's series
  // in the shape it exposes: the same label names for each metric.
  const size_t used = CheckAlertTestShapes(ScrapeText(port), [](const std::string& name) {
    return name.rfind("exposure_filter_content_", 0) == 0;
  });
  CHECK(used >= 4);  // redis_up, items, rejected, commits
  cmd.Signal(SIGTERM);
  CHECK(cmd.Wait(std::chrono::seconds(15)) == std::optional<int>(0));
}

TEST_CASE("items topic: SIGTERM commits what was assigned and exits 0", "[content]") {
  Stack stack(2, "items");
  stack.ProduceRaw({R"({"item_id": "a", "simhash": 1})", R"({"item_id": "b", "simhash": 3})"});
  const std::string config = stack.WriteConfig("ef.yaml", "content:\n  topic: items\n");
  Process cmd({EF_BINARY, "content", "-c", config, "--set", "content.group_id=sigterm", "--set",
               "pipeline.commit_interval=100ms"},
              stack.dir().File("content.log"));
  const bool caught_up = WaitFor([&] { return !cmd.Running() || GroupCaughtUp(stack, "sigterm"); },
                                 std::chrono::seconds(30));
  INFO(cmd.Output());
  REQUIRE(caught_up);
  REQUIRE(cmd.Running());  // without --exit-at-end it keeps running
  cmd.Signal(SIGTERM);
  const auto code = cmd.Wait(std::chrono::seconds(15));
  INFO(cmd.Output());
  REQUIRE(code == std::optional<int>(0));
  CHECK(cmd.Output().find("2 items assigned (1 started a cluster, 1 joined one, 0 known)") !=
        std::string::npos);
  CHECK(GroupCaughtUp(stack, "sigterm"));
}

}  // namespace

TEST_CASE(
    "items topic: content serves /metrics on content.listen beside a daemon holding metrics.listen",
    "[content]") {
  Stack stack(1, "items");
  stack.ProduceRaw({R"({"item_id": "a", "simhash": 1})"});
  // The shared config names a metrics.listen that `run` holds on this host.
  const int metrics_port = FreePort();
  const int content_port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "content:\n  topic: items\n  listen: 127.0.0.1:" + std::to_string(content_port) +
                     "\nmetrics:\n  listen: 127.0.0.1:" + std::to_string(metrics_port) + "\n");
  // What the daemon does with metrics.listen: holds it.
  const int held = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(held >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(metrics_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(held, 16) == 0);
  Process cmd({EF_BINARY, "content", "-c", config, "--set", "content.group_id=beside"},
              stack.dir().File("content.log"));
  const bool up =
      WaitFor([&] { return !cmd.Running() || HttpGet(content_port, "/metrics").status == 200; },
              std::chrono::seconds(30));
  INFO(cmd.Output());
  REQUIRE(up);
  REQUIRE(cmd.Running());  // before content.listen it exited 4: metrics.listen in use
  CHECK(HttpGet(content_port, "/metrics").body.find("exposure_filter_build_info") !=
        std::string::npos);
  cmd.Signal(SIGTERM);
  CHECK(cmd.Wait(std::chrono::seconds(15)) == std::optional<int>(0));
  close(held);
}

}  // namespace ef::test
