// docs/FORMAT.md rule 7's optional meta field `founder_marks_from` (docs/CONTENT.md
// rule 5, revision 2) against a real redis-server: a writer creating the meta
// stores 0, a writer finding a meta without it adds the next bucket's start (the
// buckets before may hold revision-1 tokens), a stored value is kept as it is (by
// later writers and by `layout upgrade`), and a bad value is refused naming it.
#include <catch2/catch.hpp>
#include <cstdint>
#include <ctime>
#include <map>
#include <string>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "redis/meta.h"
#include "support/fault_stream.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

std::map<std::string, std::string> Meta(RedisServer& redis, const std::string& prefix) {
  const RedisReply r = redis.Command({"HGETALL", MetaKey(prefix)});
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2)
    fields[r.elements[i].str] = r.elements[i + 1].str;
  return fields;
}

// Stores `fields` as the meta, as a program of an earlier revision did.
void StoreMeta(RedisServer& redis, const std::string& prefix,
               const std::map<std::string, std::string>& fields) {
  std::vector<std::string> args = {"HSET", MetaKey(prefix)};
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  redis.Command({"DEL", MetaKey(prefix)});
  REQUIRE(redis.Command(args).type == RedisReply::Type::kInteger);
}

}  // namespace

TEST_CASE(
    "meta: founder_marks_from is 0 in a new meta, the next bucket's start in a meta stored "
    "without it, and kept as stored",
    "[integration][meta][near_duplicates]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();
  auto conn = redis.Connect();
  Layout effective;

  SECTION("a new meta: 0 (no bucket before it holds tokens)") {
    REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
    CHECK(Meta(redis, layout.prefix).at("founder_marks_from") == "0");
    CHECK(effective.founder_marks_from == 0);
    CHECK_FALSE(
        effective.ReadsClusterTokens(BucketStart(std::time(nullptr), layout.bucket_seconds)));
  }
  SECTION("a meta of an earlier revision: the next bucket's start, then kept") {
    StoreMeta(redis, layout.prefix, layout.ToFields());
    const int64_t before = std::time(nullptr);
    REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
    const int64_t after = std::time(nullptr);
    const auto stored = Meta(redis, layout.prefix);
    const int64_t from = std::stoll(stored.at("founder_marks_from"));
    CHECK(from % layout.bucket_seconds == 0);
    CHECK(from > before);  // the current bucket may hold tokens: after it
    CHECK(from <= BucketStart(after, layout.bucket_seconds) + layout.bucket_seconds);
    CHECK(effective.founder_marks_from == from);
    // A read from the current bucket tests tokens; one from `from` on does not.
    CHECK(effective.ReadsClusterTokens(BucketStart(after, layout.bucket_seconds)));
    CHECK_FALSE(effective.ReadsClusterTokens(from));
    // The rest of the meta is as it was.
    auto rest = stored;
    rest.erase("founder_marks_from");
    CHECK(rest == layout.ToFields());
    // A later writer (a restart, another replica) keeps the stored value.
    Layout again;
    REQUIRE(EnsureMeta(*conn, layout, &again).ok());
    CHECK(Meta(redis, layout.prefix) == stored);
    CHECK(again.founder_marks_from == from);
  }
  SECTION("a stored value is the meta's, whatever the writer's own") {
    auto fields = layout.ToFields();
    fields["founder_marks_from"] = std::to_string(7 * layout.bucket_seconds);
    StoreMeta(redis, layout.prefix, fields);
    REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
    CHECK(effective.founder_marks_from == 7 * layout.bucket_seconds);
    CHECK(Meta(redis, layout.prefix) == fields);
  }
  SECTION("a bad value is refused, naming the field, and left as it is") {
    for (const std::string bad : {"abc", "-3600", "1", "01"}) {
      INFO("founder_marks_from " << bad);
      auto fields = layout.ToFields();
      fields["founder_marks_from"] = bad;
      StoreMeta(redis, layout.prefix, fields);
      const Status s = EnsureMeta(*conn, layout, &effective);
      REQUIRE_FALSE(s.ok());
      CHECK(s.message().find("founder_marks_from") != std::string::npos);
      CHECK(Meta(redis, layout.prefix) == fields);
    }
  }
}

TEST_CASE(
    "meta: a version-1 meta with founder_marks_from is still upgradable, and layout upgrade "
    "keeps the field",
    "[integration][meta][near_duplicates][upgrade]") {
  RedisServer redis;
  const Layout layout = DefaultTestLayout();  // stages 8, version 3
  REQUIRE(layout.stages > 1);
  auto conn = redis.Connect();
  auto v1 = layout.SingleStage().ToFields();
  const std::string from = std::to_string(3 * layout.bucket_seconds);
  v1["founder_marks_from"] = from;
  StoreMeta(redis, layout.prefix, v1);

  // A writer of the multi-stage layout writes version 1 until the upgrade.
  Layout effective;
  REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
  CHECK(effective.version() == 1);
  CHECK(effective.founder_marks_from == 3 * layout.bucket_seconds);
  CHECK(Meta(redis, layout.prefix) == v1);

  bool changed = false;
  Layout after;
  REQUIRE(UpgradeMeta(*conn, layout, 2, 0, false, &changed, &after).ok());
  CHECK(changed);
  const auto v2 = Meta(redis, layout.prefix);
  CHECK(v2.at("version") == "2");
  CHECK(v2.at("founder_marks_from") == from);
  CHECK(after.founder_marks_from == 3 * layout.bucket_seconds);
  const int64_t v3_from = V3FromAfter(std::time(nullptr), 3600, layout.bucket_seconds);
  REQUIRE(UpgradeMeta(*conn, layout, 3, v3_from, false, &changed, &after).ok());
  CHECK(changed);
  CHECK(Meta(redis, layout.prefix).at("founder_marks_from") == from);
  REQUIRE(EnsureMeta(*conn, layout, &effective).ok());
  CHECK(effective.version() == 3);
  CHECK(effective.founder_marks_from == 3 * layout.bucket_seconds);
}

}  // namespace ef::test
