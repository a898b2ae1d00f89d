// 10% malformed messages mixed into a stream, with a dead-letter topic: every
// good event is written, every bad one is counted by its reason in /metrics
// and copied to the dead-letter topic with its reason (issue 9, part 2).
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "common/clock.h"
#include "support/fault_stream.h"
#include "support/kafka_reader.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

struct Bad {
  std::string payload;
  std::string reason;  // the reason label it must be counted under
};

// One malformed message of kind `kind` (0..9), unique by `n`.
Bad MakeBad(int kind, int n, int64_t now_ms, std::mt19937_64& rng) {
  const std::string u = "\"user_id\":\"bad-u" + std::to_string(n) + "\"";
  const std::string ts = ",\"ts\":" + std::to_string(now_ms);
  switch (kind) {
    case 0: {  // binary garbage
      std::string g(64 + n % 64, '\0');
      for (auto& c : g) c = static_cast<char>(rng() & 0xff);
      g[0] = '\x01';  // never valid JSON
      return {g, "not_json"};
    }
    case 1:  // truncated JSON
      return {"{" + u + ",\"item_id\":\"x" + std::to_string(n) + "\",\"ts\":", "not_json"};
    case 2:  // huge user ID (> events.max_id_bytes 256)
      return {"{\"user_id\":\"" + std::string(5000, 'u') + std::to_string(n) +
                  "\",\"item_id\":\"x\"" + ts + "}",
              "id_too_long"};
    case 3: {  // huge list (> events.max_items_per_event 1000)
      std::string items;
      for (int i = 0; i < 5000; ++i) items += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
      return {"{" + u + ",\"items\":[" + items + "]" + ts + "}", "too_many_items"};
    }
    case 4:  // user of the wrong type (integers are valid IDs, booleans are not)
      return {"{\"user_id\":true,\"item_id\":\"x" + std::to_string(n) + "\"" + ts + "}",
              "missing_user"};
    case 5:  // item of the wrong type
      return {"{" + u + ",\"item_id\":{\"id\":1}" + ts + "}", "missing_item"};
    case 6:  // timestamp of the wrong type
      return {"{" + u + ",\"item_id\":\"x\",\"ts\":\"yesterday\"}", "bad_timestamp"};
    case 7:  // far future: 10 days ahead (> events.max_future 1h)
      return {
          "{" + u + ",\"item_id\":\"x\",\"ts\":" + std::to_string(now_ms + 10 * 86400000LL) + "}",
          "future_timestamp"};
    case 8:  // ancient: 400 days old (> the 30-day window)
      return {
          "{" + u + ",\"item_id\":\"x\",\"ts\":" + std::to_string(now_ms - 400 * 86400000LL) + "}",
          "too_old"};
    default:  // empty item list
      return {"{" + u + ",\"items\":[]" + ts + "}", "empty_item"};
  }
}

std::string Scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

// The value of `name{reason="<reason>"}` in Prometheus text; -1 if absent.
double ReasonCount(const std::string& text, const std::string& name, const std::string& reason) {
  const std::string key = name + "{reason=\"" + reason + "\"}";
  auto pos = text.find("\n" + key + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + key.size() + 2));
}

}  // namespace

TEST_CASE("malformed: 10% bad messages are counted by reason and dead-lettered, all good written",
          "[robustness][malformed]") {
  Stack stack(4);
  const std::string dlq = "exposures-dlq";
  REQUIRE(stack.kafka().CreateTopic(dlq, 2).ok());
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "kafka:\n  dead_letter_topic: " + dlq +
                     "\nmetrics:\n  listen: \"127.0.0.1:" + std::to_string(port) + "\"\n");
  auto daemon = stack.StartDaemon(config);
  std::mt19937_64 rng(9);
  std::vector<TestEvent> good;
  std::vector<Bad> bad;
  std::map<std::string, int> expected;
  // 300 ticks of 9 good events and 1 bad one, produced while the daemon runs.
  for (int t = 0; t < 300; ++t) {
    const int64_t now = SystemClock().NowMs();
    std::vector<TestEvent> tick;
    for (int i = 0; i < 9; ++i) {
      const int n = t * 9 + i;
      tick.push_back({"mal-u" + std::to_string(n % 53), {"mal-i" + std::to_string(n)}, now});
    }
    Bad b = MakeBad(t % 10, t, now, rng);
    stack.Produce(tick);
    stack.ProduceRaw({b.payload});
    good.insert(good.end(), tick.begin(), tick.end());
    ++expected[b.reason];
    bad.push_back(std::move(b));
    std::this_thread::sleep_for(5ms);  // pacing the stream
  }
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  const std::string metrics = Scrape(port);
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), good);

  std::string counted;
  for (const auto& [reason, n] : expected) {
    const double got = ReasonCount(metrics, "exposure_filter_events_rejected_total", reason);
    counted += " " + reason + "=" + std::to_string(static_cast<int>(got)) + "/" + std::to_string(n);
    INFO("reason " << reason);
    CHECK(got == n);
  }
  // Every bad message is in the dead-letter topic, with its reason.
  const auto copies = ReadTopic(stack.kafka().bootstrap_servers(), dlq);
  std::multimap<std::string, std::string> want, got;
  for (const auto& b : bad) want.emplace(b.payload, b.reason);
  for (const auto& c : copies)
    got.emplace(c.payload, c.Header("exposure-filter-reason").value_or("(no reason header)"));
  std::printf(
      "malformed: injected %zu bad messages among %zu good events (10 kinds: garbage, "
      "truncated JSON, 5 kB ID, 5000-item list, wrong types x3, +10 d, -400 d, empty list)\n",
      bad.size(), good.size());
  std::printf(
      "malformed: counted by reason (got/expected):%s; %zu copies in %s; %zu false "
      "negatives\n",
      counted.c_str(), copies.size(), dlq.c_str(), missing.size());
  CHECK(copies.size() == bad.size());
  CHECK(got == want);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
