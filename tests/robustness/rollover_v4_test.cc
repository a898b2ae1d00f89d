// Issue 53 item 3: a version-3 deployment upgraded to layout version 4 in place
// (`layout upgrade --to 4`), under a running daemon and a running `serve`, across
// the switch bucket. The daemon, serve, the commands and their redis-server share
// a wall clock shifted (EF_CLOCK_SHIFT_LIB) to shortly before an hour's end, so
// the switch bucket (1 h buckets) begins within a minute.
//
// Checked: the running daemon and serve take the new meta; keys before v4_from
// have no class and keys from it on have one (a heavy user's larger than a light
// one's, chosen from their version-3 keys); no false negative through serve,
// through the C++ reader and through the FORMAT.md Python reference.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "redis/meta.h"
#include "robustness/rollover_rig.h"
#include "support/wait.h"

#if defined(EF_CLOCK_SHIFT_LIB)

namespace ef::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "rollover: a layout upgrade to version 4 under a running daemon and serve, across the switch "
    "bucket: classes from v4_from on, chosen from version-3 history, no false negative",
    "[robustness][rollover][v4]") {
  // A version-3 deployment (the default).
  RolloverRig rig(EF_CLOCK_SHIFT_LIB, "");
  const int64_t hour_end_s = rig.clock.hour_end_s;
  Stack& stack = rig.stack;
  Process& daemon = rig.daemon;
  auto& redis = rig.redis;
  const std::string& config = rig.config;
  auto now_ms = [&] { return rig.NowMs(); };
  auto shifted = [&](const std::vector<std::string>& argv) { return rig.Shifted(argv); };
  // users u0..u<users-1>, per_user items each (u0: heavy_items), at ts_ms.
  auto batch = [&](const std::string& tag, int users, int per_user, int heavy_items,
                   int64_t ts_ms) {
    std::vector<TestEvent> out;
    for (int u = 0; u < users; ++u) {
      const int n = u == 0 ? heavy_items : per_user;
      for (int i = 0; i < n;) {
        TestEvent e{"u" + std::to_string(u), {}, ts_ms};
        for (int j = 0; j < 20 && i < n; ++j, ++i)
          e.items.push_back(tag + "-u" + std::to_string(u) + "-i" + std::to_string(i));
        out.push_back(std::move(e));
      }
    }
    return out;
  };

  // The hour before the switch: u0 at 3x the design load, the others light.
  rig.Produce(batch("before", 12, 4, 600, now_ms()));
  {
    INFO("daemon log:\n" << daemon.Output());
    REQUIRE(stack.AwaitCommitted(daemon, 30s));
  }
  REQUIRE(redis->Command({"HGET", "ef:meta", "version"}).str == "3");
  REQUIRE(WaitFor([&] { return ServeUnseen(rig.http, "u0", {"x"}).has_value(); }, 30s));

  const int64_t left_ms = hour_end_s * 1000 - now_ms();
  INFO("ms left to the hour's end before the upgrade: " << left_ms);
  REQUIRE(left_ms > 22000);
  const auto up = RunCommand(
      shifted({EF_BINARY, "layout", "upgrade", "--to", "4", "--lead", "20", "-c", config}), "",
      true);
  INFO("layout upgrade: " << up.out);
  REQUIRE(up.code == 0);
  CHECK(Contains(up.out, "upgraded ef:meta to version 4"));
  REQUIRE(redis->Command({"HGET", "ef:meta", "version"}).str == "4");
  REQUIRE(redis->Command({"HGET", "ef:meta", "v4_from"}).str == std::to_string(hour_end_s));
  CHECK(redis->Command({"HGET", "ef:meta", "v3_from"}).str == "0");
  CHECK(Contains(up.out, "rollover scheduled: buckets from"));

  // Light traffic through the switch: one event a user every ~0.4 s.
  rig.Trickle(1);
  rig.Produce(batch("after", 12, 4, 30, now_ms()));
  {
    INFO("daemon log:\n" << daemon.Output());
    REQUIRE(stack.AwaitCommitted(daemon, 30s));
  }
  CHECK(Contains(daemon.Output(), "is version 4 now"));
  REQUIRE(daemon.Stop(SIGTERM, 30s) == 0);

  const int64_t now_s = now_ms() / 1000;
  auto conn = redis->Connect();
  FilterConfig f;
  f.bucket_seconds = 3600;
  f.window_seconds = 86400;
  f.items_per_bucket = 200;
  auto configured = LayoutFromConfig(f);
  REQUIRE(configured.ok());
  Layout stored;
  bool found = false;
  REQUIRE(ReadLayout(*conn, *configured, &stored, &found).ok());
  REQUIRE(found);
  REQUIRE(stored.version() == 4);

  // Keys before the switch: no class (version 3's length); from it on: a class.
  const int64_t before = hour_end_s - 3600;
  CHECK_FALSE(stored.HasClass(before));
  CHECK(stored.HasClass(hour_end_s));
  size_t classed = 0;
  for (int u = 0; u < 12; ++u) {
    const std::string user = "u" + std::to_string(u);
    const std::string old_value = redis->Command({"GET", MakeKey("ef:", user, before, 3600)}).str;
    INFO("user " << user);
    CHECK(!old_value.empty());  // written by version 3's rules (no header)
    const std::string value = redis->Command({"GET", MakeKey("ef:", user, hour_end_s, 3600)}).str;
    REQUIRE(!value.empty());
    CHECK(stored.TableFor(value, hour_end_s) != nullptr);
    classed += stored.TableFor(value, hour_end_s) != nullptr;
  }
  CHECK(classed == 12);
  // The heavy user's class, from its 600 items before, is larger than a light one's.
  const std::string heavy = redis->Command({"GET", MakeKey("ef:", "u0", hour_end_s, 3600)}).str;
  const std::string light = redis->Command({"GET", MakeKey("ef:", "u2", hour_end_s, 3600)}).str;
  REQUIRE(!heavy.empty());
  REQUIRE(!light.empty());
  CHECK(static_cast<uint8_t>(heavy[0]) > static_cast<uint8_t>(light[0]));

  // No false negative: the C++ reader, serve (which read the version-3 meta at
  // start) and the Python reference of FORMAT.md.
  const RolloverRig::Missing missing = rig.CountMissing(stored, now_s);
  const auto show = RunCommand(shifted({EF_BINARY, "layout", "show", "-c", config}), "", true);
  std::printf(
      "rollover: v3 -> v4 under a running daemon and serve, switch at %lld (shifted clock); "
      "classes: heavy user %d, light user %d; %zu items written: false negatives %zu (C++ "
      "reader), %zu (serve), %zu (Python reference)\n",
      static_cast<long long>(hour_end_s), static_cast<uint8_t>(heavy[0]) - 1,
      static_cast<uint8_t>(light[0]) - 1, missing.items, missing.cpp, missing.serve,
      missing.python);
  INFO("serve log:\n" << rig.serve.Output());
  CHECK(missing.cpp == 0);
  CHECK(missing.serve == 0);
  CHECK(missing.python == 0);
  INFO("layout show:\n" << show.out);
  CHECK(Contains(show.out, "rollover in progress: buckets from"));
  CHECK(Contains(show.out, "have keys with a size class"));
  CHECK(rig.serve.Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test

#endif  // EF_CLOCK_SHIFT_LIB
