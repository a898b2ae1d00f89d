// The outage drill of issue 4 on real parts: lose a range of Redis keys, replay it.
#include <signal.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "kafka/offsets_for_time.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

std::string Rfc3339(int64_t ms) { return FormatTimeRfc3339(ms); }

}  // namespace

TEST_CASE("replay restores exactly a lost time range, and leaves the live group alone",
          "[integration][replay]") {
  Stack stack(2);
  // The events are anchored 1 min 25 s after a midnight (UTC, in the past), so that
  // the event replayed past --until for the skew bound (below) is always in the next
  // day's bucket: the case that failed a fresh-clone run started at 00:01:25.
  const int64_t wall = SystemClock().NowMs();
  int64_t now = wall / 86400000 * 86400000 + 85000;
  if (now > wall - 1000) now -= 86400000;
  // One event every 10 minutes over 3 days, in time order (so per partition too).
  std::vector<TestEvent> events;
  const int64_t step = 10 * 60 * 1000;
  for (int i = 0; i < 3 * 144; ++i) {
    const int64_t ts = now - 3 * 86400000LL + i * step;
    events.push_back({"r-u" + std::to_string(i % 7),
                      {"r-i" + std::to_string(i) + "a", "r-i" + std::to_string(i) + "b"},
                      ts});
  }
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  auto committed_before = stack.Offsets();

  // Simulated data loss: every filter key is gone (the layout stays).
  auto del = stack.redis().Command({"EVAL",
                                    "local n=0 for _,k in ipairs(redis.call('KEYS','ef:{*')) do "
                                    "redis.call('DEL',k) n=n+1 end return n",
                                    "0"});
  REQUIRE(del.integer > 0);

  const int64_t since = now - 2 * 86400000LL + 7 * 60 * 1000;
  const int64_t until = now - 1 * 86400000LL - 3 * 60 * 1000;
  auto dry = RunCommand({EF_BINARY, "replay", "-c", config, "--since", Rfc3339(since), "--until",
                         Rfc3339(until), "--dry-run"});
  INFO(dry.out);
  REQUIRE(dry.code == 0);
  CHECK(dry.out.find("offsets") != std::string::npos);
  CHECK(stack.redis().Command({"DBSIZE"}).integer == 1);  // only ef:meta: dry run wrote nothing

  // While `run` is still running.
  auto r = RunCommand(
      {EF_BINARY, "replay", "-c", config, "--since", Rfc3339(since), "--until", Rfc3339(until)}, "",
      /*stdout_only=*/true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  // stdout: JSON progress lines, the final summary last.
  std::string last = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') + 1);
  auto summary = nlohmann::json::parse(last);
  CHECK(summary["complete"] == true);

  // Second-precision bounds, as given on the command line.
  const int64_t since_s = since / 1000 * 1000, until_s = until / 1000 * 1000 + 999;
  std::vector<TestEvent> in_range, outside;
  for (const auto& e : events)
    (e.ts_ms >= since_s && e.ts_ms <= until_s ? in_range : outside).push_back(e);
  REQUIRE(in_range.size() > 100);
  CHECK(summary["events_written"].get<size_t>() >= in_range.size());
  CHECK(summary["events_written"].get<size_t>() <= in_range.size() + 1);  // 5-min skew lookback

  FilterConfig f;
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  auto conn = stack.redis().Connect();
  CHECK(MissingItems(*conn, *layout, in_range).empty());  // zero false negatives in range
  // No bits for events outside the range: keys of buckets wholly outside it do not exist,
  // and the ones that exist expire at bucket end + window, like `run` writes them.
  // "The range" includes replay's skew bound (kafka/offsets_for_time.h, 5 minutes):
  // on these time-ordered partitions it also replays the messages stamped up to 5
  // minutes before --since and after --until. The event 3 minutes after --until is
  // always one of them, and its bucket is the next one when a midnight falls between
  // (the test then failed when run from 00:00 to 00:03 UTC).
  const int64_t skew_ms = TimeSeekOptions{}.max_skew_ms;
  const int64_t first_bucket = BucketStart((since_s - skew_ms) / 1000, layout->bucket_seconds);
  const int64_t last_bucket = BucketStart((until_s + skew_ms) / 1000, layout->bucket_seconds);
  size_t checked = 0;
  for (const auto& e : outside) {
    const int64_t b = BucketStart(e.ts_ms / 1000, layout->bucket_seconds);
    const std::string key = MakeKey("ef:", e.user, b, layout->bucket_seconds);
    if (b < first_bucket || b > last_bucket) {
      CHECK(stack.redis().Command({"EXISTS", key}).integer == 0);
      ++checked;
    }
  }
  CHECK(checked > 0);
  for (const auto& e : in_range) {
    const int64_t b = BucketStart(e.ts_ms / 1000, layout->bucket_seconds);
    const std::string key = MakeKey("ef:", e.user, b, layout->bucket_seconds);
    CHECK(stack.redis().Command({"EXPIRETIME", key}).integer ==
          ExpireAt(b, layout->bucket_seconds, layout->window_seconds));
  }

  // The live group's offsets did not move, and the daemon is still fine.
  auto committed_after = stack.Offsets();
  REQUIRE(committed_after.size() == committed_before.size());
  for (size_t i = 0; i < committed_after.size(); ++i)
    CHECK(committed_after[i].committed == committed_before[i].committed);
  CHECK(daemon->Running());
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
}

TEST_CASE("replay: bad time arguments are usage errors", "[integration][replay]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  auto r = RunCommand({EF_BINARY, "replay", "-c", config, "--since", "yesterday"});
  CHECK(r.code == 2);
  CHECK(r.out.find("--since") != std::string::npos);
  auto r2 = RunCommand({EF_BINARY, "replay", "-c", config, "--since", "1h", "--until", "2h"});
  CHECK(r2.code == 2);
  CHECK(r2.out.find("--until is before --since") != std::string::npos);
}

}  // namespace ef::test
