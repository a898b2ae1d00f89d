// Issue 29 item 2: a version-2 deployment upgraded to layout version 3 in place,
// under a running daemon and a running `serve`, across the switch bucket; then a
// `replay` into a bucket before the switch. The daemon, serve, the commands and
// their redis-server share a wall clock shifted (EF_CLOCK_SHIFT_LIB) to shortly
// before an hour's end, so the switch bucket (1 h buckets) begins within a minute.
//
// Checked: no false negative through serve, through the C++ reader and through
// the FORMAT.md Python reference; and every key holds the bits of one rule only,
// its bucket's: a key's value is exactly the union of its items' positions by
// that rule (the users stay below the design load, 200 items a bucket: stage 0
// alone).
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "common/clock.h"
#include "config/loader.h"
#include "read/bloom_reader.h"
#include "redis/meta.h"
#include "robustness/rollover_rig.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/serve_client.h"
#include "support/shifted_clock.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

#if defined(EF_CLOCK_SHIFT_LIB)

namespace ef::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The set bits of a Redis string value (bit 0 = the high bit of byte 0).
std::set<uint32_t> Bits(const std::string& value) {
  std::set<uint32_t> out;
  for (size_t i = 0; i < value.size(); ++i)
    for (int b = 0; b < 8; ++b)
      if ((static_cast<unsigned char>(value[i]) >> (7 - b)) & 1)
        out.insert(static_cast<uint32_t>(i * 8 + b));
  return out;
}

}  // namespace

TEST_CASE(
    "rollover: a layout upgrade to version 3 under a running daemon and serve, across the switch "
    "bucket, then a replay into the bucket before it: no false negative, one rule per key",
    "[robustness][rollover][v3]") {
  // A version-2 deployment (its other readers not on version 3 yet).
  RolloverRig rig(EF_CLOCK_SHIFT_LIB, "  layout_version: 2\n");
  const int64_t hour_end_s = rig.clock.hour_end_s;
  Stack& stack = rig.stack;
  Process& daemon = rig.daemon;
  auto& redis = rig.redis;
  const std::string& config = rig.config;
  auto now_ms = [&] { return rig.NowMs(); };
  auto shifted = [&](const std::vector<std::string>& argv) { return rig.Shifted(argv); };
  auto produce = [&](const std::vector<TestEvent>& events) { rig.Produce(events); };
  auto batch = [&](const std::string& tag, int users, int per_user, int64_t ts_ms) {
    std::vector<TestEvent> out;
    for (int u = 0; u < users; ++u) {
      TestEvent e{"u" + std::to_string(u), {}, ts_ms};
      for (int i = 0; i < per_user; ++i)
        e.items.push_back(tag + "-u" + std::to_string(u) + "-i" + std::to_string(i));
      out.push_back(std::move(e));
    }
    return out;
  };

  produce(batch("before", 12, 4, now_ms()));
  {
    INFO("daemon log:\n" << daemon.Output());
    REQUIRE(stack.AwaitCommitted(daemon, 30s));
  }
  REQUIRE(redis->Command({"HGET", "ef:meta", "version"}).str == "2");
  REQUIRE(WaitFor([&] { return ServeUnseen(rig.http, "u0", {"x"}).has_value(); }, 30s));

  // The upgrade, with 20 s of lead: v3_from must be the coming hour.
  const int64_t left_ms = hour_end_s * 1000 - now_ms();
  INFO("ms left to the hour's end before the upgrade: " << left_ms);
  REQUIRE(left_ms > 22000);
  const auto up = RunCommand(
      shifted({EF_BINARY, "layout", "upgrade", "--to", "3", "--lead", "20", "-c", config}), "",
      true);
  INFO("layout upgrade: " << up.out);
  REQUIRE(up.code == 0);
  REQUIRE(redis->Command({"HGET", "ef:meta", "version"}).str == "3");
  REQUIRE(redis->Command({"HGET", "ef:meta", "v3_from"}).str == std::to_string(hour_end_s));
  CHECK(Contains(up.out, "rollover scheduled"));

  // Light traffic through the switch: one event a user every ~0.4 s.
  rig.Trickle(0);
  produce(batch("after", 12, 4, now_ms()));
  {
    INFO("daemon log:\n" << daemon.Output());
    REQUIRE(stack.AwaitCommitted(daemon, 30s));
  }
  CHECK(Contains(daemon.Output(), "is version 3 now"));
  REQUIRE(daemon.Stop(SIGTERM, 30s) == 0);

  // Late events of the bucket before the switch, written by `replay` after it.
  produce(batch("late", 12, 3, (hour_end_s - 600) * 1000));
  const auto replay =
      RunCommand(shifted({EF_BINARY, "replay", "-c", config, "--since", "1d"}), "", true);
  INFO("replay: " << replay.out);
  REQUIRE(replay.code == 0);

  const int64_t now_s = now_ms() / 1000;
  auto conn = redis->Connect();
  Layout stored;
  bool found = false;
  FilterConfig f;
  f.bucket_seconds = 3600;
  f.window_seconds = 86400;
  f.items_per_bucket = 200;
  auto configured = LayoutFromConfig(f);
  REQUIRE(configured.ok());
  REQUIRE(ReadLayout(*conn, *configured, &stored, &found).ok());
  REQUIRE(found);
  REQUIRE(stored.v3);
  REQUIRE(stored.v3_from == hour_end_s);

  // Which bucket each user's items went to (the bucket of the event time).
  std::map<std::pair<std::string, int64_t>, std::vector<std::string>> written;
  for (const auto& e : rig.all) {
    auto& items = written[{e.user, BucketStart(e.ts_ms / 1000, 3600)}];
    items.insert(items.end(), e.items.begin(), e.items.end());
  }

  // Every key holds exactly its items' positions by its bucket's rule.
  size_t keys_rule2 = 0, keys_rule9 = 0, keys_wrong = 0;
  for (const auto& [key_of, items] : written) {
    const auto& [user, bucket] = key_of;
    const PositionRule rule = stored.RuleFor(bucket);
    std::set<uint32_t> want;
    std::vector<uint32_t> pos(stored.k);
    for (const auto& item : items) {
      ComputePositions(HashItem(item, stored.seed), stored.m, stored.k, rule, pos.data());
      want.insert(pos.begin(), pos.end());
    }
    const std::string key = MakeKey("ef:", user, bucket, 3600);
    const std::set<uint32_t> got = Bits(redis->Command({"GET", key}).str);
    INFO("key " << key << " (rule " << (rule == PositionRule::kRemix ? 9 : 2) << ")");
    CHECK(got == want);
    keys_wrong += got != want;
    (rule == PositionRule::kRemix ? keys_rule9 : keys_rule2) += 1;
  }
  CHECK(keys_rule2 >= 12);  // both sides of the switch hold keys
  CHECK(keys_rule9 >= 12);

  // No false negative: the C++ reader, serve (which read the version-2 meta at
  // start) and the Python reference of FORMAT.md.
  const RolloverRig::Missing missing = rig.CountMissing(stored, now_s);
  const auto show = RunCommand(shifted({EF_BINARY, "layout", "show", "-c", config}), "", true);
  std::printf(
      "rollover: v2 -> v3 under a running daemon and serve, switch at %lld (shifted clock); "
      "%zu keys by rule 2, %zu by rule 9, %zu keys not exactly their rule's bits; %zu items "
      "written: false negatives %zu (C++ reader), %zu (serve), %zu (Python reference)\n",
      static_cast<long long>(hour_end_s), keys_rule2, keys_rule9, keys_wrong, missing.items,
      missing.cpp, missing.serve, missing.python);
  INFO("serve log:\n" << rig.serve.Output());
  CHECK(missing.cpp == 0);
  CHECK(missing.serve == 0);
  CHECK(missing.python == 0);
  CHECK(keys_wrong == 0);
  CHECK(Contains(show.out, "rollover in progress"));
  CHECK(rig.serve.Stop(SIGTERM, 30s) == 0);
}

// docs/DESIGN.md, FORMAT.md: v3_from is the first bucket that begins at least
// --lead seconds later, --lead at least 20 (60 by default). The command runs on a
// clock 40 s before an hour's end (1 h buckets): a lead of 20 s picks the coming
// hour, the default 60 s the one after.
TEST_CASE("rollover: layout upgrade --to 3 takes a --lead of at least 20 s, 60 s by default",
          "[robustness][rollover][v3][cli]") {
  const ShiftedClock clock(EF_CLOCK_SHIFT_LIB, 40000);  // 40 s before the hour's end
  const int64_t hour_end_s = clock.hour_end_s;
  RedisServer redis;
  TempDir dir;
  dir.Write("ef.yaml",
            "filter:\n  bucket: 1h\n  window: 1d\n  items_per_bucket: 200\n"
            "  layout_version: 2\nredis:\n  address: \"" +
                redis.address() + "\"\n");
  const std::string config = dir.File("ef.yaml");
  {  // A version-2 deployment: its meta stored.
    StatusOr<Config> c = LoadConfig(config, {});
    REQUIRE(c.ok());
    StatusOr<Layout> layout = LayoutFromConfig(c->filter);
    REQUIRE(layout.ok());
    REQUIRE(layout->version() == 2);
    auto conn = redis.Connect();
    Layout effective;
    REQUIRE(EnsureMeta(*conn, *layout, &effective).ok());
  }
  std::vector<std::string> env = clock.env;
  env.push_back(clock.asan_env);
  auto upgrade = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"layout", "upgrade", "--to", "3", "-c", config};
    args.insert(args.end(), extra.begin(), extra.end());
    return Ef(args, env);
  };
  // The lead-20 answer below needs now + 20 s before the hour's end.
  const int64_t left_ms = hour_end_s * 1000 - clock.NowMs();
  INFO("ms left to the hour's end: " << left_ms);
  REQUIRE(left_ms > 25000);

  // --lead 19: a usage error naming --lead; nothing changed.
  const SplitRunResult low = upgrade({"--lead", "19"});
  INFO("low: exit " << low.code << "\nstdout: " << low.out << "\nstderr: " << low.err);
  CHECK(low.code == app::kExitUsage);
  CHECK(low.out.empty());
  CHECK(Contains(low.err, "--lead"));
  CHECK(Contains(low.err, "19"));
  CHECK(redis.Command({"HGET", "ef:meta", "version"}).str == "2");
  // No --lead: 60 s, past the hour's end, so the bucket after the coming one.
  const SplitRunResult by_default = upgrade({"--dry-run"});
  INFO("by_default: exit " << by_default.code << "\nstdout: " << by_default.out
                           << "\nstderr: " << by_default.err);
  CHECK(by_default.code == 0);
  CHECK(Contains(by_default.out, "v3_from " + std::to_string(hour_end_s + 3600) + " "));
  // --lead 20: accepted, the coming hour.
  const SplitRunResult dry = upgrade({"--dry-run", "--lead", "20"});
  INFO("dry: exit " << dry.code << "\nstdout: " << dry.out << "\nstderr: " << dry.err);
  CHECK(dry.code == 0);
  CHECK(Contains(dry.out, "v3_from " + std::to_string(hour_end_s) + " "));
  CHECK(redis.Command({"HGET", "ef:meta", "version"}).str == "2");
  const SplitRunResult up = upgrade({"--lead", "20"});
  INFO("up: exit " << up.code << "\nstdout: " << up.out << "\nstderr: " << up.err);
  REQUIRE(up.code == 0);
  CHECK(redis.Command({"HGET", "ef:meta", "version"}).str == "3");
  CHECK(redis.Command({"HGET", "ef:meta", "v3_from"}).str == std::to_string(hour_end_s));
}

}  // namespace ef::test

#endif  // EF_CLOCK_SHIFT_LIB
