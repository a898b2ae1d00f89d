// exposure-filter loadgen: synthetic exposure events into any Kafka.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "app/commands.h"
#include "app/common.h"
#include "common/clock.h"
#include "common/duration.h"
#include "kafka/producer.h"
#include "loadgen/generator.h"

namespace ef::app {
namespace {

struct LoadgenArgs {
  ConfigArgs config;
  std::string brokers;  // -b: shorthand for --set kafka.bootstrap_servers=...
  std::string topic;    // "" = the config's first topic
  uint64_t count = 100000;
  double rate = 0;
  GeneratorOptions gen;
  std::string spread;
  std::string compression = "lz4";
  std::vector<std::string> properties;  // -X k=v: deprecated, = --set kafka.properties.k=v
  std::string log_level = "off";
  bool quiet = false;
};

// Without kafka.properties.message.timeout.ms, an event not delivered in 10 s
// fails (librdkafka's default is 5 minutes): a dead broker is reported, not
// waited for.
constexpr char kDefaultMessageTimeoutMs[] = "10000";

int Loadgen(LoadgenArgs& a) {
  SetUpLogging(a.log_level);
  InstallStopSignals();
  if (!a.spread.empty()) {
    auto ms = DurationOption(a.spread, "--spread", /*allow_zero=*/true);
    if (!ms.ok()) return Fail(ms.status(), kExitUsage);
    a.gen.spread_ms = *ms;
  }
  ConfigArgs config_args = a.config;
  if (!a.brokers.empty()) config_args.overrides.push_back("kafka.bootstrap_servers=" + a.brokers);
  for (const auto& kv : a.properties) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(InvalidArgument("-X " + kv + ": expected property=value"), kExitUsage);
    config_args.overrides.push_back("kafka.properties." + kv);
  }
  auto config = LoadOrReport(config_args);
  if (!config.ok()) return kExitConfig;
  SetUpLogging(a.log_level, config->log.format);
  const KafkaConfig& kafka = config->kafka;
  const std::string topic = !a.topic.empty()        ? a.topic
                            : !kafka.topics.empty() ? kafka.topics.front()
                                                    : std::string("exposures");
  ProducerOptions po;
  po.bootstrap_servers = kafka.bootstrap_servers;
  po.properties["compression.type"] = a.compression;
  po.properties["sticky.partitioning.linger.ms"] = "0";
  po.properties["message.timeout.ms"] = kDefaultMessageTimeoutMs;
  for (const auto& [k, v] : kafka.properties) po.properties[k] = v;
  const int64_t message_timeout_ms = std::atoll(po.properties["message.timeout.ms"].c_str());
  auto producer = KafkaProducer::Create(po);
  if (!producer.ok()) return Fail(producer.status(), kExitConfig);
  std::string first_failure;  // why the first event failed delivery
  (*producer)->SetDeliveryHandler([&first_failure](uint64_t, const Status& st, bool) {
    if (!st.ok() && first_failure.empty()) first_failure = st.message();
  });
  // Nothing delivered and events failing: the brokers do not answer; stop producing.
  auto unreachable = [&] { return (*producer)->failed() > 0 && (*producer)->delivered() == 0; };
  EventGenerator gen(a.gen);
  GeneratedEvent ev;
  SystemClock clock;
  using SC = std::chrono::steady_clock;
  const auto start = SC::now();
  auto last_report = start;
  uint64_t sent = 0, bad = 0;
  while ((a.count == 0 || sent < a.count) && !StopRequested()) {
    if (a.rate > 0) {
      // Pace against the schedule, not the previous send, so the rate holds on average.
      auto due = start + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * sent / a.rate));
      auto now = SC::now();
      if (due > now)
        std::this_thread::sleep_for(
            std::min<SC::duration>(due - now, std::chrono::milliseconds(50)));
      if (SC::now() < due) continue;
    }
    gen.Next(clock.NowMs(), &ev);
    Status st = (*producer)->Produce(topic, -1, ev.user, ev.payload, ev.ts_ms);
    if (!st.ok()) return Fail(st.Prefixed("kafka " + kafka.bootstrap_servers));
    ++sent;
    bad += ev.bad;
    if ((sent & 1023) == 0) {
      (*producer)->Poll();
      if (unreachable()) break;
    }
    auto now = SC::now();
    if (!a.quiet && now - last_report >= std::chrono::seconds(1)) {
      double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "loadgen: %llu events (%.0f/s), %llu delivered\n",
                   static_cast<unsigned long long>(sent), sent / secs,
                   static_cast<unsigned long long>((*producer)->delivered()));
      last_report = now;
    }
  }
  // Long enough for every queued event to be delivered or to time out.
  Status st = (*producer)->Flush(static_cast<int>(std::min<int64_t>(
      std::max<int64_t>(message_timeout_ms, 0) + 5000, std::numeric_limits<int>::max())));
  double secs = std::chrono::duration<double>(SC::now() - start).count();
  std::printf(
      "{\"events\": %llu, \"bad_events\": %llu, \"delivered\": %llu, \"failed\": %llu, "
      "\"seconds\": %.3f, \"events_per_second\": %.0f}\n",
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(bad),
      static_cast<unsigned long long>((*producer)->delivered()),
      static_cast<unsigned long long>((*producer)->failed()), secs, sent / secs);
  const uint64_t failed = (*producer)->failed();
  const uint64_t delivered = (*producer)->delivered();
  const std::string where = "kafka " + kafka.bootstrap_servers + ", topic " + topic;
  if (failed > 0 && delivered == 0) {
    return Fail(Unavailable(fmt::format(
                    "{}: none of {} event(s) delivered within message.timeout.ms ({}): {} (is "
                    "the broker up and the topic there?)",
                    where, failed, FormatDurationMs(message_timeout_ms), first_failure)),
                kExitUnreachable);
  }
  if (failed > 0) {
    return Fail(Unavailable(fmt::format("{}: {} of {} event(s) failed delivery: {}", where, failed,
                                        failed + delivered, first_failure)));
  }
  if (!st.ok()) return Fail(st.Prefixed(where));
  return kExitOk;
}

}  // namespace

Action AddLoadgenCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("loadgen", "Produce synthetic exposure events to Kafka");
  auto a = std::make_shared<LoadgenArgs>();
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("-b,--brokers", a->brokers,
                  "Bootstrap servers host:port[,...]; the same as --set "
                  "kafka.bootstrap_servers=...");
  cmd->add_option("-t,--topic", a->topic, "Topic (default: the config's first kafka.topics)");
  cmd->add_option("-n,--count", a->count, "Events to produce (0 = until Ctrl-C)")
      ->capture_default_str()
      ->check(WholeNumber(0, UINT64_MAX));
  cmd->add_option("-r,--rate", a->rate, "Events per second (0 = as fast as possible)")
      ->check(NonNegativeReal());
  AddGeneratorOptions(cmd, &a->gen, &a->spread);
  cmd->add_option("--bad-fraction", a->gen.bad_fraction, "Share of malformed events (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--integer-ids", a->gen.integer_ids, "Use integer user and item IDs");
  cmd->add_option("--compression", a->compression, "none|gzip|snappy|lz4|zstd")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "gzip", "snappy", "lz4", "zstd"}));
  // Deprecated: --set kafka.properties.KEY=VALUE. Hidden from --help.
  OneValueEach(cmd->add_option("-X", a->properties, ""))->group("");
  cmd->add_option("--log-level", a->log_level, "librdkafka diagnostics on stderr (off, warn, ...)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", a->quiet, "No progress lines");
  cmd->footer(
      "Kafka settings come from the config (-c, --set): kafka.bootstrap_servers, the first of\n"
      "kafka.topics, kafka.properties.* (e.g. --set kafka.properties.linger.ms=5). An event\n"
      "not delivered within message.timeout.ms (10s unless kafka.properties sets it) fails;\n"
      "when none is delivered, loadgen exits 6 naming the brokers. docs/CLI.md.");
  return [a] { return Loadgen(*a); };
}

}  // namespace ef::app
