// Layout v4's creation script (write/class_create.h) on a real redis-server: the
// class it chooses from the user's previous buckets (version-3 keys, keys with a
// class, missing or broken ones) is rule 11's, as ChooseClassFrom computes it
// from the C++ estimate (yesterday's class kept when at most one above); an
// existing key is returned untouched; callers racing on two connections to
// create the same keys all get the one value stored.
#include "write/class_create.h"

#include <catch2/catch.hpp>
#include <ctime>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "support/class_rule.h"
#include "support/redis_server.h"

namespace ef::test {
namespace {

constexpr int64_t kDay = 86400;

int64_t Today() { return BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay); }

}  // namespace

TEST_CASE("class creation: the script's class is rule 11's, from the previous buckets",
          "[integration][v4]") {
  RedisServer redis;
  auto conn = redis.Connect();
  const int64_t today = Today();
  // Yesterday's keys have a class; the day before's are version-3 keys.
  const Layout l = V4Layout("cc:", 200, 8, today - kDay);
  std::mt19937_64 rng(53);
  int created_from_history = 0;
  for (int u = 0; u < 80; ++u) {
    const std::string user = "u" + std::to_string(u);
    std::vector<double> estimates;
    std::string values[2];  // yesterday's, the day before's
    for (int back = 1; back <= 2; ++back) {
      const int64_t start = today - back * kDay;
      const int kind = static_cast<int>(rng() % 5);  // 0: missing
      if (kind == 0) continue;
      std::string value;
      if (l.HasClass(start)) {
        const auto c = static_cast<uint32_t>(rng() % 30);
        value = Filled(l.class_tables[c], static_cast<int>(c) + 1, static_cast<int>(rng() % 4000),
                       rng());
        if (kind == 4) value[0] = 0;  // a header naming no class: no estimate
      } else {
        value = Filled(l.stage_table, 0, static_cast<int>(rng() % 3000), rng());
      }
      REQUIRE(conn->Command({"SET", MakeKey(l.prefix, user, start, kDay), value})->str == "OK");
      values[back - 1] = value;
      const std::vector<Stage>* table = l.TableFor(value, start);
      // A missing key and an empty value (an empty filter) give no estimate.
      if (table != nullptr && !value.empty()) estimates.push_back(EstimateItems(value, *table));
    }
    std::optional<double> estimate;
    for (double e : estimates) estimate = estimate ? std::min(*estimate, e) : e;
    const uint32_t want = ChooseClassFrom(l, today, values[0], values[1]);
    created_from_history += estimate ? 1 : 0;

    auto reply = conn->Command(CreateClassKeyArgs(l, user, today));
    REQUIRE(reply.ok());
    INFO("user " << user << ", estimate " << (estimate ? *estimate : -1) << ": " << reply->str);
    REQUIRE(reply->type == RedisReply::Type::kString);
    const std::string& v = reply->str;
    REQUIRE_FALSE(v.empty());
    CHECK(static_cast<unsigned char>(v[0]) == want + 1);
    CHECK(v.size() == SizeClassBytes(want) - 16);
    CHECK(v.find_first_not_of('\0', 1) == std::string::npos);
    const std::string key = MakeKey(l.prefix, user, today, kDay);
    CHECK(conn->Command({"GET", key})->str == v);
    CHECK(conn->Command({"EXPIRETIME", key})->integer == ExpireAt(today, kDay, l.window_seconds));
  }
  CHECK(created_from_history > 40);  // most users had some history

  // An existing key is returned as stored, and its TTL left alone.
  const std::string key = MakeKey(l.prefix, "u0", today, kDay);
  REQUIRE(conn->Command({"SETRANGE", key, "5", "x"})->integer > 0);
  REQUIRE(conn->Command({"EXPIREAT", key, "4000000000"})->integer == 1);
  const std::string stored = conn->Command({"GET", key})->str;
  CHECK(conn->Command(CreateClassKeyArgs(l, "u0", today))->str == stored);
  CHECK(conn->Command({"EXPIRETIME", key})->integer == 4000000000);
}

TEST_CASE(
    "class creation: yesterday's class is kept when it is at most one above the estimate's, "
    "else the estimate's",
    "[integration][v4]") {
  RedisServer redis;
  auto conn = redis.Connect();
  const int64_t today = Today();
  const Layout l = V4Layout("cc:", 200, 8, 0);
  const StageParams p = l.Params();
  const auto count = static_cast<uint32_t>(l.class_tables.size());
  int kept = 0, chosen = 0;
  for (uint32_t c = 4; c < 24; ++c) {
    // Yesterday's key: n items in class c, n the most whose estimate chooses
    // class c - 1 by itself (found by halving the step).
    int n = 0;
    for (int step = 1 << 14; step > 0; step /= 2) {
      const std::string v = Filled(l.class_tables[c], static_cast<int>(c) + 1, n + step, c);
      if (ChooseClass(p, count, EstimateItems(v, l.class_tables[c])) < c) n += step;
    }
    const std::string yesterday = Filled(l.class_tables[c], static_cast<int>(c) + 1, n, c);
    const uint32_t by_estimate = ChooseClass(p, count, EstimateItems(yesterday, l.class_tables[c]));
    REQUIRE(by_estimate == c - 1);
    // Class c's key (one above the estimate's class: kept), and the same bits
    // under the headers of classes c - 1 and c - 2 (read with that class's table:
    // another estimate, mostly choosing a class above the header's: not kept).
    for (uint32_t header : {c + 1, c, c - 1}) {
      const std::string user = "h" + std::to_string(c) + "-" + std::to_string(header);
      std::string v = yesterday;
      v[0] = static_cast<char>(header);
      REQUIRE(conn->Command({"SET", MakeKey(l.prefix, user, today - kDay, kDay), v})->str == "OK");
      const uint32_t want = ChooseClassFrom(l, today, v, "");
      const std::vector<Stage>& t = l.class_tables[header - 1];
      const uint32_t own = ChooseClass(p, count, EstimateItems(v, t));
      INFO("class " << c << ", header " << header << ", the estimate's class " << own);
      // The rule: the previous class when own <= it <= own + 1.
      CHECK(want == (own <= header - 1 && header - 1 <= own + 1 ? header - 1 : own));
      kept += want == header - 1 && want != own ? 1 : 0;
      chosen += want == own && want != header - 1 ? 1 : 0;
      auto reply = conn->Command(CreateClassKeyArgs(l, user, today));
      REQUIRE(reply.ok());
      REQUIRE_FALSE(reply->str.empty());
      CHECK(static_cast<unsigned char>(reply->str[0]) == want + 1);
    }
  }
  CHECK(kept >= 10);    // yesterday's class one above the estimate's: kept
  CHECK(chosen >= 10);  // two above, or below: the estimate's
}

TEST_CASE("class creation: writers racing on two connections agree on every key",
          "[integration][v4]") {
  RedisServer redis;
  const int64_t today = Today();
  const Layout l = V4Layout("cc:", 200, 8, 0);
  {
    auto conn = redis.Connect();
    for (int u = 0; u < 300; ++u)  // yesterday's keys of several classes
      REQUIRE(conn->Command({"SET", MakeKey(l.prefix, "r" + std::to_string(u), today - kDay, kDay),
                             Filled(l.class_tables[u % 20], u % 20 + 1, 50 * (u % 40), u)})
                  ->str == "OK");
  }
  std::vector<std::vector<std::string>> got(2);
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      auto conn = redis.Connect();
      std::vector<std::vector<std::string>> cmds;
      for (int u = 0; u < 300; ++u) {
        const int user = w == 0 ? u : 299 - u;  // opposite orders
        cmds.push_back(CreateClassKeyArgs(l, "r" + std::to_string(user), today));
      }
      std::vector<RedisReply> replies;
      if (!conn->Commands(cmds, &replies).ok()) return;
      got[w].resize(300);
      for (int u = 0; u < 300; ++u) got[w][w == 0 ? u : 299 - u] = replies[u].str;
    });
  }
  for (auto& t : writers) t.join();
  REQUIRE(got[0].size() == 300);
  REQUIRE(got[1].size() == 300);
  auto conn = redis.Connect();
  std::set<int> classes;
  for (int u = 0; u < 300; ++u) {
    INFO("user r" << u);
    const std::string stored =
        conn->Command({"GET", MakeKey(l.prefix, "r" + std::to_string(u), today, kDay)})->str;
    CHECK(got[0][u] == stored);
    CHECK(got[1][u] == stored);
    REQUIRE_FALSE(stored.empty());
    classes.insert(static_cast<unsigned char>(stored[0]));
  }
  CHECK(classes.size() > 5);  // the keys really differ in size
}

}  // namespace ef::test
