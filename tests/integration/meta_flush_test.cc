// `<prefix>meta` after a FLUSHDB (issue 27): the daemon stores it again with its
// first write of any key, not only once it rewrites a key it wrote before, so
// readers (which refuse to start without a stored layout) work at once.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "exposure_filter/client.h"
#include "redis/meta.h"
#include "support/process.h"
#include "support/stack.h"
#include "support/wait.h"

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
  // The start log names what to restore (docs/OPERATING.md "A lost meta").
  CHECK(daemon->Output().find("layout stored at mf:meta: version 3, v3_from 0, "
                              "founder_marks_from 0") != std::string::npos);

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

// Issue 47 item 1: a default (v3) binary running on a stored v2 layout stored
// "version 3, v3_from 0" after a DEL of the meta, built from its config: `check`
// then answered items written before as unseen, and readers switched to the
// configured layout too. Before the fix the meta came back as version 3 and the
// client read item a1 as unseen.
TEST_CASE(
    "meta: a lost meta comes back as last read (a v2 layout under a v3 config), readers "
    "keep it, and a cold start with orphan buckets refuses",
    "[integration][meta]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  key_prefix: \"ml:\"\n");
  const std::string meta_key = "ml:meta";
  // The v2 deployment's meta: the same filter, layout_version 2.
  FilterConfig f;
  f.key_prefix = "ml:";
  f.layout_version = 2;
  auto v2 = LayoutFromConfig(f);
  REQUIRE(v2.ok());
  REQUIRE(v2->version() == 2);
  {
    auto conn = stack.redis().Connect();
    Layout effective;
    REQUIRE(EnsureMeta(*conn, *v2, &effective).ok());
  }
  const auto before = Meta(stack.redis(), meta_key);
  REQUIRE(before.at("version") == "2");
  auto daemon = stack.StartDaemon(config);
  const int64_t now = SystemClock().NowMs();
  stack.Produce({{"u1", {"a1", "a2"}, now}});
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));

  // A reader that re-reads the meta often.
  exposure_filter::ClientOptions o;
  o.config_path = config;
  o.layout_recheck = std::chrono::milliseconds(100);
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO("client: " << error);
  REQUIRE(client);
  REQUIRE(client->layout().version == 2);
  REQUIRE(client->Seen("u1", {"a1"}).seen == std::vector<bool>{true});

  REQUIRE(stack.redis().Command({"DEL", meta_key}).integer == 1);
  // The reader keeps the last stored layout while the meta is missing.
  REQUIRE(WaitFor(
      [&] {
        client->Seen("u1", {"a1"});
        return client->layout().lost;
      },
      10s));
  CHECK(client->layout().version == 2);
  CHECK_FALSE(client->layout().stored);
  CHECK(client->Seen("u1", {"a1", "a2"}).seen == std::vector<bool>{true, true});

  // One more event: the writer stores the meta again, as it last read it.
  stack.Produce({{"u2", {"b1"}, now}});
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  INFO("daemon log:\n" << daemon->Output());
  CHECK(Meta(stack.redis(), meta_key) == before);
  CHECK(daemon->Output().find("storing the layout last read (version 2) again") !=
        std::string::npos);
  REQUIRE(WaitFor(
      [&] {
        client->Seen("u1", {"a1"});
        return client->layout().stored;
      },
      10s));
  CHECK_FALSE(client->layout().lost);
  CHECK(client->Seen("u1", {"a1", "a2"}).seen == std::vector<bool>{true, true});
  CHECK(client->Seen("u2", {"b1"}).seen == std::vector<bool>{true});
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  // A cold start that finds bucket keys but no meta refuses (exit 5), names a
  // key and how to restore the meta, and stores nothing.
  REQUIRE(stack.redis().Command({"DEL", meta_key}).integer == 1);
  auto cold = stack.StartDaemon(config);
  const std::optional<int> code = cold->Wait(60s);
  INFO("cold start:\n" << cold->Output());
  REQUIRE(code.has_value());
  CHECK(*code == 5);
  CHECK(cold->Output().find("ml:meta is missing but bucket keys of the prefix exist (ml:{u") !=
        std::string::npos);
  CHECK(cold->Output().find("HSET ml:meta") != std::string::npos);
  CHECK(Meta(stack.redis(), meta_key).empty());
}

// Issue 47 "Smaller": `layout upgrade`'s --to followed 2 whatever the config said,
// so on a stored v2 meta under the default (v3) config it did nothing. Before
// the fix the dry run said "is version 2 already: nothing to do".
TEST_CASE("meta: layout upgrade --to defaults to filter.layout_version", "[integration][meta]") {
  RedisServer redis({"--appendonly", "no"});
  FilterConfig f;
  f.layout_version = 2;
  auto v2 = LayoutFromConfig(f);
  REQUIRE(v2.ok());
  {
    auto conn = redis.Connect();
    Layout effective;
    REQUIRE(EnsureMeta(*conn, *v2, &effective).ok());
  }
  const std::string at = "redis.address=" + redis.address();
  RunResult dry = RunCommand({EF_BINARY, "layout", "upgrade", "--dry-run", "--set", at}, "", true);
  INFO(dry.out);
  CHECK(dry.code == 0);
  CHECK(dry.out.find("would replace the version-2 meta with version 3") != std::string::npos);
  RunResult two = RunCommand({EF_BINARY, "layout", "upgrade", "--dry-run", "--set", at, "--set",
                              "filter.layout_version=2"},
                             "", true);
  INFO(two.out);
  CHECK(two.code == 0);
  CHECK(two.out.find("is version 2 already: nothing to do") != std::string::npos);
}

// Issue 53: `layout upgrade --to 4` takes a version-1 or 2 meta to version 4 with
// v3_from = v4_from, the first bucket at least --lead ahead; a version-3 meta
// keeps its v3_from.
TEST_CASE("meta: layout upgrade --to 4 from versions 1, 2 and 3", "[integration][meta][v4]") {
  for (const int from : {1, 2, 3}) {
    INFO("from version " << from);
    RedisServer redis({"--appendonly", "no"});
    FilterConfig f;
    f.layout_version = static_cast<uint32_t>(std::max(from, 2));
    if (from == 1) f.stages = 1;  // version 1: the default layout's stage 0
    auto stored = LayoutFromConfig(f);
    REQUIRE(stored.ok());
    {
      auto conn = redis.Connect();
      Layout effective;
      REQUIRE(EnsureMeta(*conn, *stored, &effective).ok());
    }
    const std::string at = "redis.address=" + redis.address();
    const int64_t now_s = SystemClock().NowMs() / 1000;
    RunResult dry = RunCommand(
        {EF_BINARY, "layout", "upgrade", "--to", "4", "--dry-run", "--set", at}, "", true);
    INFO(dry.out);
    CHECK(dry.code == 0);
    CHECK(dry.out.find("would replace the version-" + std::to_string(from) +
                       " meta with version 4") != std::string::npos);
    CHECK(redis.Command({"HGET", "ef:meta", "version"}).str == std::to_string(from));
    RunResult up = RunCommand({EF_BINARY, "layout", "upgrade", "--to", "4", "--set", at}, "", true);
    INFO(up.out);
    REQUIRE(up.code == 0);
    CHECK(up.out.find("upgraded ef:meta to version 4") != std::string::npos);
    CHECK(redis.Command({"HGET", "ef:meta", "version"}).str == "4");
    const int64_t v4_from = std::stoll(redis.Command({"HGET", "ef:meta", "v4_from"}).str);
    // The first bucket that begins at least 60 s (the default --lead) after the
    // command ran (within seconds of now_s).
    CHECK((v4_from == V3FromAfter(now_s, 60, 86400) ||
           v4_from == V3FromAfter(now_s + 10, 60, 86400)));
    CHECK(redis.Command({"HGET", "ef:meta", "v3_from"}).str ==
          (from < 3 ? std::to_string(v4_from) : "0"));
  }
}

}  // namespace ef::test
