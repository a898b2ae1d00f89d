// What goes wrong over days of operation (issue 26), end to end on the real
// binary: `serve` across a `layout upgrade` (item 1), a replica without the
// module attached while the daemon writes with EF.SETBITS (item 2), a batch
// held past its bucket's expiry (item 4), the lag seconds of a quiet partition
// during a Redis outage (item 9).
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "read/bloom_reader.h"
#include "redis/meta.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/serve_client.h"
#include "support/shifted_clock.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() /
         1000.0;
}

// The value of the sample `name` (no labels) or `name{...}` whose labels contain
// `label`, from the /metrics of a daemon on `port`; -1 if absent or unreachable.
double Scrape(int port, const std::string& name, const std::string& label = "") {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    const bool plain = label.empty() && line.rfind(name + " ", 0) == 0;
    const bool labelled = line.rfind(name + "{", 0) == 0 && Contains(line, label);
    if (plain || labelled) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// Layout of a config with these filter.* values (the rest default).
Layout TestLayout(int64_t items_per_bucket, int64_t bucket_seconds = 86400,
                  int64_t window_seconds = 30 * 86400, uint32_t layout_version = 3) {
  FilterConfig f;
  f.layout_version = layout_version;
  f.items_per_bucket = items_per_bucket;
  f.bucket_seconds = bucket_seconds;
  f.window_seconds = window_seconds;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return l.value();
}

// The largest N of "lag N s" in a /readyz body (a partition's lag in seconds
// above the freshness target); -1 if none.
int ReadyzLagSeconds(const std::string& body) {
  int out = -1;
  for (size_t at = body.find("lag "); at != std::string::npos; at = body.find("lag ", at + 1)) {
    size_t end = at + 4;
    while (end < body.size() && std::isdigit(static_cast<unsigned char>(body[end]))) ++end;
    if (end > at + 4 && body.compare(end, 2, " s") == 0)
      out = std::max(out, std::atoi(body.c_str() + at + 4));
  }
  return out;
}

#ifdef EF_REDIS_MODULE_PATH
// A redis-server that loads our module (as tests/module/module_support.h), with
// `env` ("NAME=value") set in its environment only.
std::unique_ptr<RedisServer> ServerWithModule(const std::vector<std::string>& env = {}) {
  return StartRedisWithEnv(
      env, {"--loadmodule", EF_REDIS_MODULE_PATH, "--repl-diskless-sync-delay", "0"});
}
#endif

}  // namespace

// Issue 26 item 1: after `layout upgrade` a running `serve` kept reading with the
// version-1 layout it had read at start: items the daemon then put in stages 1+
// were answered unseen for minutes.
TEST_CASE("days: serve answers with the upgraded layout as soon as values outgrow the old one",
          "[robustness][days]") {
  Stack stack(1);
  const Layout layout = TestLayout(10, 86400, 30 * 86400, 2);  // a v1 -> v2 upgrade
  REQUIRE(layout.version() == 2);
  {
    Layout effective;
    auto conn = stack.redis().Connect();
    REQUIRE(EnsureMeta(*conn, layout.SingleStage(), &effective).ok());
    REQUIRE(effective.version() == 1);
  }
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  items_per_bucket: 10\n");
  // One heavy user: 300 items in one day bucket, 30 events of 10.
  const std::string user = "heavy";
  const int64_t now = SystemClock().NowMs();
  std::vector<TestEvent> events;
  std::vector<std::string> items;
  for (int e = 0; e < 30; ++e) {
    TestEvent ev{user, {}, now};
    for (int i = 0; i < 10; ++i) ev.items.push_back("heavy-i" + std::to_string(e * 10 + i));
    items.insert(items.end(), ev.items.begin(), ev.items.end());
    events.push_back(std::move(ev));
  }
  stack.Produce(events);

  const int port = FreePort();
  auto serve = StartServe(stack, config, port);
  httplib::Client http("127.0.0.1", port);
  http.set_keep_alive(true);
  http.set_read_timeout(10, 0);
  // serve has read the version-1 meta: nothing is seen yet.
  const auto before = ServeUnseen(http, user, items);
  REQUIRE(before.has_value());
  REQUIRE(before->size() == items.size());
  const auto served_v1 = Clock::now();

  const auto upgrade = RunCommand({EF_BINARY, "layout", "upgrade", "--to", "2", "-c", config});
  INFO("layout upgrade: " << upgrade.out);
  REQUIRE(upgrade.code == 0);
  REQUIRE(stack.redis().Command({"HGET", "ef:meta", "version"}).str == "2");

  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  // The heavy user's value is longer than the version-1 layout allows.
  const std::string key = MakeKey("ef:", user, BucketStart(now / 1000, 86400), 86400);
  const int64_t bytes = stack.redis().Command({"STRLEN", key}).integer;
  const int64_t v1_bytes = (layout.m + 7) / 8;
  REQUIRE(bytes > v1_bytes);

  const auto ingested = Clock::now();
  const auto first = ServeUnseen(http, user, items);
  REQUIRE(first.has_value());
  size_t last_unseen = first->size();
  const bool all_seen = WaitFor(
      [&] {
        const auto u = ServeUnseen(http, user, items);
        if (u) last_unseen = u->size();
        return u && u->empty();
      },
      5s, 100ms);
  const double took = SecondsSince(ingested);
  std::printf(
      "days/layout-upgrade: injected layout upgrade v1->v2 under a running serve, then 300 items "
      "of one user in stages 0+ (value %lld bytes, v1 allows %lld); first answer %.1f s after "
      "serve's v1 read: %zu of %zu unseen; all seen after %.2f s: %s (%zu unseen)\n",
      static_cast<long long>(bytes), static_cast<long long>(v1_bytes),
      std::chrono::duration_cast<std::chrono::milliseconds>(ingested - served_v1).count() / 1000.0,
      first->size(), items.size(), took, all_seen ? "yes" : "no", last_unseen);
  INFO("serve output:\n" << serve->Output());
  CHECK(all_seen);
  CHECK(last_unseen == 0);
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
  CHECK(serve->Stop(SIGTERM, 30s) == 0);
}

#ifdef EF_REDIS_MODULE_PATH

// Issue 26 item 2: a replica without the module attached while the daemon wrote
// with EF.SETBITS refused every EF.SETBITS replicated to it, silently: the
// replica lacked those keys while WAIT still counted it.
TEST_CASE("days: a replica without the module attached during module writes misses nothing",
          "[robustness][days][module]") {
  auto master = ServerWithModule();
  Stack stack(4);
  RedisServer& replica = stack.redis();  // a plain redis-server: no module
  const std::string config = stack.WriteConfig(
      "ef.yaml", "redis:\n  address: \"" + master->address() + "\"\n  write_mode: auto\n");
  const int64_t now = SystemClock().NowMs();
  const auto first = MakeEvents("rep1", 40, 3, 1, now, 261);
  stack.Produce(first);
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(Contains(daemon->Output(), "writing with EF.SETBITS"));

  replica.ReplicaOf(master.get());
  REQUIRE(replica.AwaitInSync(*master, 30s));
  const auto second = MakeEvents("rep2", 40, 3, 1, now, 262);
  stack.Produce(second);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(replica.AwaitInSync(*master, 30s));
  const bool healed = Contains(daemon->Output(), "its replicas changed");
  // The write after the one that noticed the replica probes it again: auto mode
  // goes on without the module.
  const auto third = MakeEvents("rep3", 40, 3, 1, now, 263);
  stack.Produce(third);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(replica.AwaitInSync(*master, 30s));

  std::vector<TestEvent> all = first;
  all.insert(all.end(), second.begin(), second.end());
  all.insert(all.end(), third.begin(), third.end());
  const Layout layout = DefaultTestLayout();
  const auto on_master = MissingItems(*master->Connect(), layout, all);
  const auto on_replica = MissingItems(*replica.Connect(), layout, all);
  const std::string log = daemon->Output();
  const bool switched = Contains(log, "writing with plain Redis");
  std::printf(
      "days/replica-no-module: injected a module-less replica attached after %zu events written "
      "with EF.SETBITS, then %zu + %zu more events; false negatives: %zu on the master, %zu on "
      "the replica; writer noticed the replica after the next batch: %s, then switched to plain "
      "Redis: %s\n",
      first.size(), second.size(), third.size(), on_master.size(), on_replica.size(),
      healed ? "yes" : "no", switched ? "yes" : "no");
  INFO("daemon log:\n" << log);
  INFO("first missing on the replica: " << (on_replica.empty() ? "" : on_replica[0]));
  CHECK(on_master.empty());
  CHECK(on_replica.empty());
  CHECK(healed);
  CHECK(switched);
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

#endif  // EF_REDIS_MODULE_PATH

#if defined(EF_REDIS_MODULE_PATH) && defined(EF_CLOCK_SHIFT_LIB)

// Issue 26 item 4: a key whose bucket expired while its batch was held (Redis
// writes paused across the bucket's end + window) was retried for ever (EF.SETBITS
// "expireat ... is not in the future"): the pipeline stalled until a restart.
// Buckets end on whole UTC hours: the daemon and its redis-server share a wall
// clock shifted (EF_CLOCK_SHIFT_LIB) to 20 s before an hour's end.
TEST_CASE(
    "days: a batch held past its bucket's expiry is dropped and counted and the pipeline goes on",
    "[robustness][days][module]") {
  const int64_t real_start = SystemClock().NowMs();
  const ShiftedClock clock(EF_CLOCK_SHIFT_LIB, 20000);  // 20 s before the hour's end
  const int64_t hour_end_s = clock.hour_end_s;
  const int64_t shift_ms = clock.shift_ms;
  auto shifted_now_ms = [&] { return clock.NowMs(); };

  auto redis = ServerWithModule(clock.env);
  {
    const RedisReply t = redis->Command({"TIME"});
    REQUIRE(t.elements.size() == 2);
    const int64_t redis_ms = std::stoll(t.elements[0].str) * 1000;
    INFO("redis TIME " << redis_ms << ", expected about " << shifted_now_ms());
    REQUIRE(std::abs(redis_ms - shifted_now_ms()) < 2000);  // the shift took
  }
  Stack stack(1);
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "filter:\n  bucket: 1h\n  window: 1h\nredis:\n  address: \"" + redis->address() +
                     "\"\n  write_mode: module\nmetrics:\n  listen: \"127.0.0.1:" +
                     std::to_string(port) + "\"\n");
  Process daemon(
      clock.Wrap({EF_BINARY, "run", "-c", config, "--set", "pipeline.commit_interval=200ms"}),
      stack.dir().File("daemon.log"));
  stack.Produce({{"warm", {"warm-0"}, shifted_now_ms()}});
  REQUIRE(stack.AwaitCommitted(daemon, 30s));
  {
    // The daemon's clock is shifted too: its log's first time stamp.
    const std::string log = daemon.Output();
    auto logged = ParseTimeArg(log.substr(0, 19) + "Z", 0);
    INFO("daemon log:\n" << log);
    REQUIRE(logged.ok());
    REQUIRE(std::abs(*logged - (real_start + shift_ms)) < 30000);
  }

  // An event of the oldest live bucket: its key expires at the hour's end.
  const int64_t remaining_ms = hour_end_s * 1000 - shifted_now_ms();
  INFO("ms left to the hour's end after the warm-up: " << remaining_ms);
  REQUIRE(remaining_ms > 2000);
  const int64_t pause_ms = remaining_ms + 3000;
  const std::string stale_key = MakeKey("ef:", "stale", hour_end_s - 7200, 3600);
  REQUIRE(redis->Command({"CLIENT", "PAUSE", std::to_string(pause_ms), "WRITE"}).str == "OK");
  const auto paused = Clock::now();
  stack.Produce({{"stale", {"stale-0"}, (hour_end_s - 7200 + 60) * 1000}});
  const bool counted =
      WaitFor([&] { return Scrape(port, "exposure_filter_keys_expired_total") >= 1; },
              std::chrono::milliseconds(pause_ms + 15000), 100ms);
  const double counted_after = SecondsSince(paused);
  const double expired = Scrape(port, "exposure_filter_keys_expired_total");
  const double too_old = Scrape(port, "exposure_filter_events_rejected_total", "too_old");

  stack.Produce({{"fresh", {"fresh-0"}, shifted_now_ms()}});
  const bool committed = stack.AwaitCommitted(daemon, 20s);
  auto conn = redis->Connect();
  const int64_t stale_exists = redis->Command({"EXISTS", stale_key}).integer;
  BloomReader reader(*conn, TestLayout(200, 3600, 3600));
  auto fresh = reader.Check("fresh", {"fresh-0"}, shifted_now_ms() / 1000);
  REQUIRE(fresh.ok());
  std::printf(
      "days/expired-batch: injected CLIENT PAUSE %lld ms WRITE, an event whose 1h bucket expired "
      "%lld ms into it (daemon and Redis clocks shifted %+lld s); "
      "keys_expired_total %.0f after %.1f s (too_old rejects %.0f), stale key exists %lld, fresh "
      "event committed: %s, seen: %s\n",
      static_cast<long long>(pause_ms), static_cast<long long>(remaining_ms),
      static_cast<long long>(shift_ms / 1000), expired, counted_after, too_old,
      static_cast<long long>(stale_exists), committed ? "yes" : "no",
      fresh->seen[0] ? "yes" : "no");
  INFO("daemon log:\n" << daemon.Output());
  CHECK(counted);
  CHECK(expired >= 1);
  CHECK(stale_exists == 0);
  CHECK(committed);
  CHECK(fresh->seen[0]);
  CHECK(daemon.Stop(SIGTERM, 30s) == 0);
}

#endif  // EF_REDIS_MODULE_PATH && EF_CLOCK_SHIFT_LIB

// Issue 26 item 9: 5 s into a Redis outage a quiet partition read "lag 50 s" (the
// age of its last event written), a false ERR and /readyz 503.
TEST_CASE("days: the lag seconds of a quiet partition during a Redis outage count from now",
          "[robustness][days]") {
  Stack stack(1);
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "metrics:\n  listen: \"127.0.0.1:" + std::to_string(port) + "\"\n");
  // The newest event written is 50 s old.
  stack.Produce({{"quiet", {"quiet-old"}, SystemClock().NowMs() - 50000}});
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));

  stack.redis().Stop();
  stack.Produce({{"quiet", {"quiet-new"}, SystemClock().NowMs()}});
  const auto down = Clock::now();
  REQUIRE(WaitFor([&] { return Contains(daemon->Output(), "pausing consumption"); }, 30s));
  // Samples over the next 5 s (a measurement period, not a synchronisation).
  double max_lag_s = -1, max_lag_messages = -1;
  int readyz_lag_s = -1;
  std::string readyz_seen;
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(250ms)) {
    max_lag_s = std::max(max_lag_s,
                         Scrape(port, "exposure_filter_partition_lag_seconds", "partition=\"0\""));
    max_lag_messages =
        std::max(max_lag_messages,
                 Scrape(port, "exposure_filter_partition_lag_messages", "partition=\"0\""));
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/readyz");
    if (!r) continue;
    const int lag_s = ReadyzLagSeconds(r->body);
    if (lag_s >= 0) readyz_seen = r->body;
    readyz_lag_s = std::max(readyz_lag_s, lag_s);
  }
  const double sampled_for = SecondsSince(down);
  stack.redis().Start();
  const bool committed = stack.AwaitCommitted(*daemon, 60s);
  std::printf(
      "days/quiet-lag: injected Redis down with the newest written event 50 s old, one new event; "
      "over 5 s (until %.1f s into the outage): lag %.0f message(s), max lag %.1f s, /readyz "
      "%s; all committed after Redis came back: %s\n",
      sampled_for, max_lag_messages, max_lag_s,
      readyz_lag_s < 0 ? "named no lag"
                       : ("said lag " + std::to_string(readyz_lag_s) + " s").c_str(),
      committed ? "yes" : "no");
  INFO("readyz: " << readyz_seen << "\ndaemon log:\n" << daemon->Output());
  REQUIRE(max_lag_messages >= 1);  // the partition was behind while sampled
  CHECK(max_lag_s >= 0);
  CHECK(max_lag_s < 15);
  CHECK(readyz_lag_s < 15);
  CHECK(committed);
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test
