// Layout version 4 (docs/FORMAT.md rule 11) on the read side, against a real
// redis-server: a version-4 meta whose keys from v4_from on carry size classes
// of several sizes, and older version-3 keys, all read in one MGET by the client
// library and `check`, and by FORMAT.md's Python reference (format_ref.py check)
// with the same answers; a key whose header names no class is left out, the others
// still answer. (The writers: tests/integration/layout_v4_write_test.cc,
// tests/module/write_modes_v4_test.cc.)
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "exposure_filter/client.h"
#include "support/format_ref.h"
#include "support/items_key.h"
#include "support/process.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kDay = 86400;

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

// The default layout under `prefix` as a version-4 meta whose keys carry a class
// from the bucket `v4_days_ago` days back on (rule 9 everywhere).
Layout V4Layout(const std::string& prefix, int v4_days_ago) {
  FilterConfig f;
  f.key_prefix = prefix;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  l->v4 = true;
  l->v4_from = BucketStart(Now() - v4_days_ago * kDay, kDay);
  REQUIRE(l->Finish().ok());
  return *l;
}

void StoreMeta(RedisServer& redis, const Layout& l) {
  std::vector<std::string> args = {"HSET", MetaKey(l.prefix)};
  for (const auto& [f, v] : l.ToFields()) args.insert(args.end(), {f, v});
  args.insert(args.end(), {"founder_marks_from", "0"});
  REQUIRE(redis.Command(args).type == RedisReply::Type::kInteger);
}

// Writes the items into stage 0 of the user's key `days_ago` back, by rule 11:
// a key with a class (created as a writer creates it: header and S_c - 17 zero
// bytes) from v4_from on, a version-3 key before. Returns the key.
std::string Put(RedisServer& redis, const Layout& l, const std::string& user, int days_ago,
                uint32_t cls, const std::vector<std::string>& items) {
  const int64_t start = BucketStart(Now() - days_ago * kDay, kDay);
  std::string value;
  if (l.HasClass(start)) {
    value.assign(SizeClassBytes(cls) - 16, '\0');
    value[0] = static_cast<char>(cls + 1);
  }
  const std::vector<Stage>* table = l.TableFor(value, start);
  REQUIRE(table != nullptr);
  const Stage& st = (*table)[0];
  std::vector<uint32_t> pos(st.k);
  for (const auto& item : items) {
    ComputeStagePositions(HashItem(item, l.seed), st, l.RuleFor(start), pos.data());
    for (uint32_t p : pos) {
      if (value.size() <= p / 8) value.resize(p / 8 + 1, '\0');
      value[p / 8] = static_cast<char>(value[p / 8] | (0x80 >> (p % 8)));
    }
  }
  const std::string key = MakeKey(l.prefix, user, start, kDay);
  REQUIRE(redis.Command({"SET", key, value}).str == "OK");
  return key;
}

}  // namespace

TEST_CASE("layout v4: the client and check read keys of several classes and version-3 keys",
          "[integration][v4]") {
  RedisServer redis;
  const Layout l = V4Layout("v4:", 3);
  StoreMeta(redis, l);
  // Version-3 keys 10 and 5 days back; keys with classes 2 (96 B), 11 (the
  // default's size) and 20 (1,536 B) 3, 1 and 0 days back.
  Put(redis, l, "u1", 10, 0, Items("d10", 40));
  Put(redis, l, "u1", 5, 0, Items("d5", 40));
  Put(redis, l, "u1", 3, 2, Items("d3", 20));
  const std::string bad_key = Put(redis, l, "u1", 1, 11, Items("d1", 100));
  Put(redis, l, "u1", 0, 20, Items("d0", 300));

  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + redis.address(), "filter.key_prefix=v4:"};
  o.timeout = 1000ms;
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  INFO(error);
  REQUIRE(client);
  CHECK(client->layout().version == 4);

  std::vector<std::string> written;
  for (const char* tag : {"d10", "d5", "d3", "d1", "d0"}) {
    const auto items = Items(tag, std::string(tag) == "d0" ? 300 : 20);
    written.insert(written.end(), items.begin(), items.end());
  }
  const auto fresh = Items("new", 500);
  auto r = client->Seen("u1", written);
  REQUIRE(r.ok);
  CHECK(r.buckets_present == 5);
  CHECK(r.seen_count == written.size());  // no false negatives, in any class
  r = client->Seen("u1", fresh);
  REQUIRE(r.ok);
  CHECK(r.seen_count < 10);  // within the layout's rate (p_b per key, 5 keys)

  // The Python reference of FORMAT.md (tests/interop/format_ref.py) answers the same.
  {
    std::vector<std::string> probe = {"d10-0", "d5-19", "d3-7", "d1-99", "d0-150"};
    const auto some_fresh = Items("new", 40);
    probe.insert(probe.end(), some_fresh.begin(), some_fresh.end());
    const RefCheck ref = FormatRefCheck(redis.port(), "v4:", "u1", probe, Now());
    INFO(ref.out);
    REQUIRE(ref.code == 0);
    const auto c = client->Seen("u1", probe);
    REQUIRE(c.ok);
    std::string expected;
    for (size_t i = 0; i < probe.size(); ++i)
      expected += (c.seen[i] ? "seen " : "unseen ") + probe[i] + "\n";
    CHECK(ref.out == expected);
    CHECK(c.seen_count >= 5);
  }

  // `check` reads the same.
  const RunResult check =
      RunCommand({EF_BINARY, "check", "-u", "u1", "d3-0", "d0-299", "new-0", "--set",
                  "redis.address=" + redis.address(), "--set", "filter.key_prefix=v4:"},
                 "", true);
  INFO(check.out);
  REQUIRE(check.code == 0);
  CHECK(check.out.find("seen    d3-0  (bucket ") != std::string::npos);
  CHECK(check.out.find("seen    d0-299  (bucket ") != std::string::npos);
  CHECK(check.out.find("unseen  new-0\n") != std::string::npos);

  // A header that names no class: that key is left out, the others answer.
  REQUIRE(redis.Command({"SETRANGE", bad_key, "0", std::string(1, '\0')}).type ==
          RedisReply::Type::kInteger);
  r = client->Seen("u1", written);
  REQUIRE(r.ok);
  size_t d1_seen = 0;  // d1's 20 read only in the other keys: false positives at most
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i].rfind("d1-", 0) == 0)
      d1_seen += r.seen[i];
    else
      CHECK(r.seen[i]);
  }
  CHECK(d1_seen <= 2);
  CHECK(client->stats().invalid_keys == 1);
}

}  // namespace ef::test
