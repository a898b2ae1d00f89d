// Layout version 4's writer end to end (docs/FORMAT.md rule 11, issue 53): a fresh
// deployment under `filter.layout_version: 4` stores a version-4 meta with
// v4_from 0, and the daemon creates every key with a class chosen from the
// user's previous buckets: a user with a heavy yesterday gets a larger class
// today than a light one, a user without history the default class. The client
// reads every item written (no false negative), as does FORMAT.md's Python
// reference. Two daemons that write the same users' keys at once create each key
// once, with the class the rule chooses, and lose nothing.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "common/clock.h"
#include "config/config.h"
#include "redis/meta.h"
#include "support/format_ref.h"
#include "support/process.h"
#include "support/stack.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kDay = 86400;

// `n` items of `user` at ts_ms, in list events of up to 25.
void AddUser(std::vector<TestEvent>* out, const std::string& user, const std::string& tag, int n,
             int64_t ts_ms) {
  for (int i = 0; i < n;) {
    TestEvent e{user, {}, ts_ms};
    for (int j = 0; j < 25 && i < n; ++j, ++i) e.items.push_back(tag + "-" + std::to_string(i));
    out->push_back(std::move(e));
  }
}

// The tests' layout: the default one under "w4:", version 4 (v4_from 0).
Layout W4Layout() {
  FilterConfig f;
  f.key_prefix = "w4:";
  f.layout_version = 4;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

uint32_t ClassOf(const std::string& value) {
  REQUIRE(!value.empty());
  return static_cast<uint8_t>(value[0]) - 1u;
}

}  // namespace

TEST_CASE("layout v4: a fresh deployment writes keys with classes from their history, all read",
          "[integration][v4]") {
  Stack stack(2);
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  key_prefix: \"w4:\"\n  layout_version: 4\n");
  const int64_t now_ms = SystemClock().NowMs();
  const int64_t today = BucketStart(now_ms / 1000, kDay);
  // Yesterday: "heavy" at 5x the design load of 200 items, "light" at 10 items.
  std::vector<TestEvent> past;
  AddUser(&past, "heavy", "h-past", 1000, (today - kDay) * 1000 + 1000);
  AddUser(&past, "light", "l-past", 10, (today - kDay) * 1000 + 1000);
  stack.Produce(past);
  auto daemon = stack.StartDaemon(config);
  {
    INFO(daemon->Output());
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  }
  // Today: the two, and "new" (no history).
  std::vector<TestEvent> now;
  AddUser(&now, "heavy", "h-now", 300, now_ms);
  AddUser(&now, "light", "l-now", 10, now_ms);
  AddUser(&now, "new", "n-now", 10, now_ms);
  stack.Produce(now);
  {
    INFO(daemon->Output());
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  }
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  RedisServer& redis = stack.redis();
  CHECK(redis.Command({"HGET", "w4:meta", "version"}).str == "4");
  CHECK(redis.Command({"HGET", "w4:meta", "v4_from"}).str == "0");
  const Layout l = W4Layout();
  auto value = [&](const std::string& user, int64_t bucket) {
    return redis.Command({"GET", MakeKey("w4:", user, bucket, kDay)}).str;
  };
  // Today's classes: the rule's choice from the previous days' values (none: the default).
  for (const std::string user : {"heavy", "light", "new"}) {
    INFO("user " << user);
    CHECK(ClassOf(value(user, today)) ==
          ChooseClassFrom(l, today, value(user, today - kDay), value(user, today - 2 * kDay)));
  }
  CHECK(ClassOf(value("heavy", today)) > ClassOf(value("new", today)));
  CHECK(ClassOf(value("new", today)) > ClassOf(value("light", today)));
  CHECK(ClassOf(value("new", today)) == SmallestClassWithBits(l.m));

  // `layout stats` counts the keys by class, with each class's stage table.
  const RunResult stats =
      RunCommand({EF_BINARY, "layout", "stats", "--json", "-c", config}, "", true);
  INFO(stats.out);
  REQUIRE(stats.code == 0);
  const auto j = nlohmann::json::parse(stats.out);
  CHECK(j["version"] == 4);
  CHECK(j["keys"] == 5);
  CHECK(j["keys_without_class"] == 0);
  uint64_t classed_keys = 0;
  for (const auto& [c, n] : j["keys_by_class"].items()) classed_keys += n.get<uint64_t>();
  CHECK(classed_keys == 5);
  CHECK(j["keys_by_class"].contains(std::to_string(ClassOf(value("heavy", today)))));
  CHECK(j["keys_by_class"][std::to_string(ClassOf(value("new", today)))] >= 1);

  // No false negative: the client, and the Python reference of FORMAT.md.
  std::vector<TestEvent> all = past;
  all.insert(all.end(), now.begin(), now.end());
  auto conn = redis.Connect();
  const auto missing = MissingItems(*conn, l, all);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
  std::map<std::string, std::vector<std::string>> by_user;
  for (const auto& e : all)
    by_user[e.user].insert(by_user[e.user].end(), e.items.begin(), e.items.end());
  size_t missing_python = 0;
  for (const auto& [user, list] : by_user) {
    const RefCheck py =
        FormatRefCheck(redis.port(), "w4:", user, list, SystemClock().NowMs() / 1000);
    INFO(py.out.substr(0, 2000));
    REQUIRE(py.code == 0);
    missing_python += py.unseen();
  }
  CHECK(missing_python == 0);
}

TEST_CASE("layout v4: two daemons creating the same keys at once agree on each key's class",
          "[integration][v4][concurrent]") {
  Stack stack(8);
  const std::string config =
      stack.WriteConfig("ef.yaml", "filter:\n  key_prefix: \"w4:\"\n  layout_version: 4\n");
  const int64_t now_ms = SystemClock().NowMs();
  const int64_t today = BucketStart(now_ms / 1000, kDay);
  // Yesterday (one daemon): 24 users from 10 to 1,610 items, so their classes differ.
  std::vector<TestEvent> past, now;
  for (int u = 0; u < 24; ++u)
    AddUser(&past, "r" + std::to_string(u), "past", 10 + 70 * u, (today - kDay) * 1000 + 1000);
  stack.Produce(past);
  {
    auto first = stack.StartDaemon(config, "first.log");
    INFO(first->Output());
    REQUIRE(stack.AwaitCommitted(*first, 60s));
    REQUIRE(first->Stop(SIGTERM, 30s) == 0);
  }
  // Today: keyed by event, not by user, so both daemons write every user's key.
  for (int u = 0; u < 24; ++u) AddUser(&now, "r" + std::to_string(u), "now", 300, now_ms);
  std::vector<std::string> payloads;
  for (const auto& e : now) payloads.push_back(e.Json());
  stack.ProduceRaw(payloads, now_ms);
  auto a = stack.StartDaemon(config, "a.log");
  auto b = stack.StartDaemon(config, "b.log");
  REQUIRE(stack.AwaitCommitted(*a, 120s));
  INFO("daemon a:\n" << a->Output() << "daemon b:\n" << b->Output());
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  for (Process* d : {a.get(), b.get()}) {
    const auto code = d->Wait(30s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
  }
  CHECK(AssignmentsWithPartitions(a->Output()) > 0);
  CHECK(AssignmentsWithPartitions(b->Output()) > 0);

  const Layout l = W4Layout();
  std::set<uint32_t> classes;
  auto value = [&](const std::string& user, int64_t bucket) {
    return stack.redis().Command({"GET", MakeKey("w4:", user, bucket, kDay)}).str;
  };
  for (int u = 0; u < 24; ++u) {
    const std::string user = "r" + std::to_string(u);
    INFO("user " << user);
    const std::string now = value(user, today);
    REQUIRE(l.TableFor(now, today) != nullptr);
    CHECK(ClassOf(now) ==
          ChooseClassFrom(l, today, value(user, today - kDay), value(user, today - 2 * kDay)));
    classes.insert(ClassOf(now));
  }
  CHECK(classes.size() >= 4);
  std::vector<TestEvent> all = past;
  all.insert(all.end(), now.begin(), now.end());
  auto conn = stack.redis().Connect();
  const auto missing = MissingItems(*conn, l, all);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
