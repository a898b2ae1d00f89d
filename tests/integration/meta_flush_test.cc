// `<prefix>meta` after a FLUSHDB (issue 27): the daemon stores it again with its
// first write of any key, not only once it rewrites a key it wrote before, so
// readers (which refuse to start without a stored layout) work at once.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>

#include "common/clock.h"
#include "exposure_filter/client.h"
#include "support/stack.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string> Meta(RedisServer& redis, const std::string& key) {
  const RedisReply r = redis.Command({"HGETALL", key});
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2)
    fields[r.elements[i].str] = r.elements[i + 1].str;
  return fields;
}

}  // namespace

TEST_CASE("meta: a FLUSHDB's lost meta is stored again by the next write, of a new user too",
          "[integration][meta]") {
  Stack stack(1);
  // A prefix of the test's own: the key is the configured one, not a default.
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  key_prefix: \"mf:\"\n");
  const std::string meta_key = "mf:meta";
  auto daemon = stack.StartDaemon(config);
  const int64_t now = SystemClock().NowMs();
  stack.Produce({{"old-user", {"a1", "a2"}, now}});
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  const auto before = Meta(stack.redis(), meta_key);
  REQUIRE(before.count("m") == 1);

  REQUIRE(stack.redis().Command({"FLUSHDB"}).str == "OK");
  REQUIRE(Meta(stack.redis(), meta_key).empty());
  // One event of a user the daemon never wrote: a key new to its expire cache.
  stack.Produce({{"new-user", {"b1"}, now}});
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  // Committed means written and acknowledged: the meta is back by then.
  INFO("daemon log:\n" << daemon->Output());
  CHECK(Meta(stack.redis(), meta_key) == before);

  // A reader starts (it refuses to without a stored layout) and sees the item.
  exposure_filter::ClientOptions o;
  o.config_path = config;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO("client: " << error);
  REQUIRE(client);
  const exposure_filter::Result r = client->Seen("new-user", {"b1", "never-shown"});
  REQUIRE(r.ok);
  CHECK(r.seen == std::vector<bool>{true, false});
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test
