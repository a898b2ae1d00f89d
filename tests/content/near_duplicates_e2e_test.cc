// Issue 31's "done when", end to end on a real redis-server and the librdkafka
// mock cluster: a story and its re-post arrive in the items topic and
// `exposure-filter content` clusters them; exposures arrive in the exposures
// topic and `run` with filter.near_duplicates writes each exposed item's cluster
// mark (docs/CONTENT.md rule 5, revision 2: the founder's item ID); `check` then
// answers near_duplicate for the re-post to the user who saw the original, seen
// for the original to the user who saw the re-post (the re-post's exposure
// marked it), and unseen to a user who saw an unrelated story.
#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "content/stories.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string Item(const std::string& id, const std::string& text) {
  return json{{"item_id", id}, {"text", text}}.dump();
}

std::string Exposure(const std::string& user, const std::string& item, int64_t ts_ms) {
  return json{{"user_id", user}, {"item_id", item}, {"ts", ts_ms}}.dump();
}

json Check(const std::string& config, const std::string& user,
           const std::vector<std::string>& items) {
  std::vector<std::string> argv = {EF_BINARY, "check", "-c", config, "-u", user, "--json"};
  argv.insert(argv.end(), items.begin(), items.end());
  const SplitRunResult r = RunCommandWithEnv(argv, {});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

TEST_CASE(
    "near duplicates end to end: a re-post in the items topic is filtered for a user who saw "
    "the original, through content, run and check",
    "[content][near_duplicates]") {
  const content::stories::Texts texts = content::stories::MakeTexts();
  Stack stack(2);  // the exposures topic
  REQUIRE(stack.kafka().CreateTopic("items", 1, 1).ok());
  stack.ProduceRawTo("items", {Item("story-1", texts.original), Item("repost-1", texts.repost),
                               Item("other-1", texts.unrelated)});
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\ncontent:\n  topic: items\n");
  const SplitRunResult indexed =
      RunCommandWithEnv({EF_BINARY, "content", "-c", config, "--exit-at-end"}, {});
  INFO(indexed.err);
  REQUIRE(indexed.code == 0);
  REQUIRE(indexed.err.find("3 items assigned (2 started a cluster, 1 joined one") !=
          std::string::npos);

  const int64_t now = SystemClock().NowMs();
  stack.ProduceRaw({Exposure("alice", "story-1", now), Exposure("bob", "repost-1", now),
                    Exposure("carol", "other-1", now), Exposure("dave", "never-indexed", now)});
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const std::string log = daemon->Output();
  INFO(log);
  CHECK(log.find("near-duplicates: exposures also set their content cluster") != std::string::npos);
  // Bob's re-post is the one item that is not its cluster's first; dave's was
  // never indexed.
  CHECK(log.find("near-duplicates: 1 cluster mark(s) written, 4 item(s) looked up in the "
                 "content map, 1 exposed item(s) with no known cluster") != std::string::npos);

  const std::vector<std::string> candidates = {"story-1", "repost-1", "other-1"};
  // Alice saw the original: the re-post is its near duplicate.
  json a = Check(config, "alice", candidates);
  CHECK(a.at("seen") == json::array({"story-1"}));
  CHECK(a.at("near_duplicates") == json::parse(R"([{"item": "repost-1", "cluster": "story-1"}])"));
  CHECK(a.at("unseen") == json::array({"other-1"}));
  // Bob saw the re-post: its exposure marked the cluster by its founder's ID, so
  // the original is filtered too, answered seen.
  json b = Check(config, "bob", candidates);
  CHECK(b.at("seen") == json::array({"story-1", "repost-1"}));
  CHECK(b.value("near_duplicates", json::array()).empty());
  CHECK(b.at("unseen") == json::array({"other-1"}));
  // Carol saw an unrelated story: nothing of the cluster is filtered.
  json c = Check(config, "carol", candidates);
  CHECK(c.at("seen") == json::array({"other-1"}));
  CHECK(c.value("near_duplicates", json::array()).empty());
  CHECK(c.at("unseen") == json::array({"story-1", "repost-1"}));
  // Dave's item was never indexed: written by item ID alone, and counted.
  json d = Check(config, "dave", {"never-indexed", "story-1"});
  CHECK(d.at("seen") == json::array({"never-indexed"}));
  CHECK(d.at("unseen") == json::array({"story-1"}));

  // replay honours it: with the users' keys gone (the content map kept), a
  // replay of the exposures topic writes the marks again.
  const RedisReply keys = stack.redis().Command({"KEYS", "ef:{*}:*"});
  REQUIRE(keys.elements.size() >= 4);
  for (const RedisReply& k : keys.elements) stack.redis().Command({"DEL", k.str});
  REQUIRE(Check(config, "bob", candidates).at("unseen").size() == 3);
  const SplitRunResult replayed = RunCommandWithEnv(
      {EF_BINARY, "replay", "-c", config, "--since", "1h", "--timeout", "60s"}, {});
  INFO(replayed.err);
  REQUIRE(replayed.code == 0);
  b = Check(config, "bob", candidates);
  CHECK(b.at("seen") == json::array({"story-1", "repost-1"}));
  CHECK(b.value("near_duplicates", json::array()).empty());
}

// Issue 47 item 5, the review's reproducer: `SET ef:cm{X} garbage`, then events
// for X, Y and Z. Before the fix ingestion stopped on every partition for good
// (no bucket key 45 s later, no commit): the content index failed each lookup
// with kInternal, and the batch was retried without end.
TEST_CASE("near duplicates end to end: a bad content-map value holds no partition back (issue 47)",
          "[content][near_duplicates]") {
  Stack stack(2);
  stack.redis().Command({"SET", "ef:cm{X}", "garbage"});
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  near_duplicates: true\n");
  const int64_t now = SystemClock().NowMs();
  stack.ProduceRaw({Exposure("u1", "X", now), Exposure("u2", "Y", now), Exposure("u3", "Z", now)});
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const std::string log = daemon->Output();
  INFO(log);
  CHECK(log.find("content map: ef:cm{X} holds no map entry") != std::string::npos);
  CHECK(Check(config, "u1", {"X"}).at("seen") == json::array({"X"}));
  CHECK(Check(config, "u2", {"Y"}).at("seen") == json::array({"Y"}));
  CHECK(Check(config, "u3", {"Z"}).at("seen") == json::array({"Z"}));
}

}  // namespace
}  // namespace ef::test
