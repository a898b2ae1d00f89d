// What goes wrong over days of operation (issue 26): shutdown while everything
// outside the process is down.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/clock.h"
#include "support/process.h"
#include "support/promtool.h"
#include "support/scrape.h"
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

// About 1 KB each: n of them fill the development broker's 5 MiB per partition.
std::vector<std::string> BigEvents(int n, int64_t ts_ms) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string items;
    for (int j = 0; j < 20; ++j) {
      if (j) items += ",";
      items += "\"item-" + std::to_string(i) + "-" + std::to_string(j) +
               "-padding-padding-padding-padding\"";
    }
    out.push_back(R"({"user_id":"big-)" + std::to_string(i % 50) + R"(","items":[)" + items +
                  R"(],"ts":)" + std::to_string(ts_ms) + "}");
  }
  return out;
}

}  // namespace

// Issue 26 item 7: SIGTERM was ignored for over 3.5 minutes while Redis writes
// failed and Kafka was unreachable: the ingest thread sat in librdkafka's
// watermark query (rd_kafka_query_watermark_offsets, whose timeout librdkafka
// 2.0 does not honour while the broker is down), called from the retry loop's
// tick. The systemd unit allows 30 s.
TEST_CASE("shutdown: SIGTERM with Redis and Kafka both down exits within the stop timeout",
          "[robustness][shutdown]") {
  Stack stack(4);
  const int64_t now = SystemClock().NowMs();
  stack.Produce(MakeEvents("both", 20, 2, 1, now, 71));
  auto daemon = stack.StartDaemon(stack.WriteConfig());
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  stack.redis().Stop();
  stack.Produce(MakeEvents("both2", 20, 2, 1, now, 72));  // writes now fail: retry loop
  REQUIRE(WaitFor([&] { return Contains(daemon->Output(), "pausing consumption"); }, 30s));
  REQUIRE(stack.kafka().SetBrokerDown(-1).ok());
  // The daemon saw the broker go (librdkafka's log); from then on each tick of
  // the retry loop asked the broker for the paused partitions' watermarks.
  const bool noticed = WaitFor(
      [&] {
        const std::string log = daemon->Output();
        return Contains(log, "brokers are down") || Contains(log, "Connection refused") ||
               Contains(log, "Disconnected");
      },
      30s);
  INFO("daemon log:\n" << daemon->Output());
  REQUIRE(noticed);
  REQUIRE(daemon->Running());
  const auto start = Clock::now();
  daemon->Signal(SIGTERM);
  const auto code = daemon->Wait(40s);
  const double took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() / 1000.0;
  std::printf("shutdown with Redis and Kafka down: exit %d after %.1f s\n", code ? *code : -1,
              took);
  INFO("daemon log:\n" << daemon->Output());
  REQUIRE(code.has_value());
  CHECK(took < 30.0);
}

// Issue 26 item 10: a consumer that fell behind the topic's retention resumed at
// the low watermark, and nothing said that the messages before it were gone.
// The development broker keeps 5 MiB per partition: the daemon is stopped, 7 MB
// arrive, the oldest are trimmed before it reads them.
// Issue 48 item 3: the loss counter existed only after the first loss, so
// `increase()` never saw it rise and ExposureFilterMessagesLost could not fire;
// its promtool test passed on a series the daemon never emitted. Now the alert
// is tested on series made from this daemon's own scrapes.
TEST_CASE(
    "retention: messages deleted before the daemon read them are counted as lost, by the "
    "daemon and by lag, and the loss alert fires on the daemon's own scrapes",
    "[robustness][retention]") {
  Stack stack(1);
  const int64_t now = SystemClock().NowMs();
  stack.Produce(MakeEvents("kept", 20, 5, 1, now, 73));
  const char* kLost = "exposure_filter_messages_lost_total";
  const std::string group_label = "group=\"" + stack.group() + "\"";
  std::string scrape_before;
  const int port = FreePort();
  const std::string config = stack.WriteConfig(
      "ef.yaml", "metrics:\n  listen: \"127.0.0.1:" + std::to_string(port) + "\"\n");
  {
    auto daemon = stack.StartDaemon(config, "first.log");
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
    // The counter exists at 0 within a refresh interval of the assignment.
    REQUIRE(WaitFor([&] { return MetricSum(ScrapeText(port), kLost, {group_label}) == 0; }, 10s));
    scrape_before = ScrapeText(port);
    REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  }
  const int64_t committed = stack.TotalCommitted();
  stack.ProduceRaw(BigEvents(7000, now));
  const auto offsets = stack.Offsets();
  REQUIRE(offsets.size() == 1);
  const int64_t low = offsets[0].low;
  std::printf("retention: committed %lld, low watermark %lld after 7 MB, high %lld\n",
              static_cast<long long>(committed), static_cast<long long>(low),
              static_cast<long long>(offsets[0].high));
  REQUIRE(low > committed);  // the broker trimmed messages the group never read

  // lag, before the daemon runs again: the gap is shown, not hidden.
  const auto lag = RunCommand({EF_BINARY, "lag", "-c", config, "--json"});
  INFO("lag: " << lag.out);
  REQUIRE(lag.code == 0);
  const auto j = nlohmann::json::parse(lag.out);
  CHECK(j.at("partitions").at(0).at("lost") == low - committed);
  const auto table = RunCommand({EF_BINARY, "lag", "-c", config});
  CHECK(Contains(table.out, "LOST"));

  auto daemon = stack.StartDaemon(config, "second.log");
  REQUIRE(stack.AwaitCommitted(*daemon, 120s));
  // The partition's gauges are added by the monitor's next refresh after the
  // assignment, which may come after the commit that AwaitCommitted saw (a
  // scrape taken at once once lacked exposure_filter_partition_committed_offset).
  std::string scrape_after;
  REQUIRE(WaitFor(
      [&] {
        scrape_after = ScrapeText(port);
        return Contains(scrape_after, "exposure_filter_partition_committed_offset{");
      },
      10s));
  const double lost = MetricSum(scrape_after, kLost, {"partition=\"0\"", group_label});
  INFO("daemon log:\n" << daemon->Output());
  CHECK(lost == static_cast<double>(low - committed));
  CHECK(Contains(daemon->Output(), std::to_string(low - committed) + " message"));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  // ExposureFilterMessagesLost on what Prometheus would have stored: ef-1 is
  // this daemon, scraped every 15 s before (0) and after the restart that found
  // the loss; ef-2 a daemon that found the loss as the partition was assigned,
  // before any scrape saw its 0.
  const std::string rules = stack.dir().File("lost_alert_test.yml");
  const std::string alert_labels =
      "alertname=\"ExposureFilterMessagesLost\",alertstate=\"firing\"," + group_label +
      ",partition=\"0\",severity=\"critical\",topic=\"" + stack.topic() + "\"";
  {
    std::ofstream out(rules);
    out << "rule_files: [" << EF_SOURCE_DIR << "/config/alerts.yml]\n"
        << "evaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n"
        << PromtoolInputSeries({scrape_before, scrape_after}, "exposure-filter", "ef-1:9464", 20)
        << PromtoolInputSeries({scrape_after}, "exposure-filter", "ef-2:9464", 20, 20)
        << "    promql_expr_test:\n"
        << "      - expr: ALERTS{alertname=\"ExposureFilterMessagesLost\",alertstate=\"firing\"}\n"
        << "        eval_time: 6m\n        exp_samples:\n";
    for (const char* instance : {"ef-1:9464", "ef-2:9464"})
      out << "          - labels: 'ALERTS{" << alert_labels << ",instance=\"" << instance
          << "\"}'\n            value: 1\n";
  }
  const PromtoolResult promtool = PromtoolTestRules(rules);
  INFO("promtool test rules " << rules << ":\n" << promtool.out);
  CHECK(promtool.code == 0);

  // The hand-written alert tests (tests/promtool/alerts_test.yml) use series of
  // the shape this daemon exposes: the same label names for each metric.
  CheckAlertTestShapes(scrape_after, [](const std::string& name) {
    // `up` is Prometheus'; serve's and content's metrics: their own tests.
    return name.rfind("exposure_filter_", 0) == 0 && name.rfind("exposure_filter_serve_", 0) != 0 &&
           name.rfind("exposure_filter_content_", 0) != 0;
  });
}

}  // namespace ef::test
