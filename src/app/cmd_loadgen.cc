// exposure-filter loadgen: synthetic exposure events into any Kafka.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
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
  std::string brokers;
  std::string topic = "exposures";
  uint64_t count = 100000;
  double rate = 0;
  GeneratorOptions gen;
  std::string spread;
  std::string compression = "lz4";
  std::vector<std::string> properties;
  bool quiet = false;
};

int Loadgen(LoadgenArgs& a) {
  SetUpLogging("warn");
  InstallStopSignals();
  if (!a.spread.empty()) {
    auto ms = ParseDurationMs(a.spread);
    if (!ms.ok()) return Fail(ms.status().Prefixed("--spread"), kExitUsage);
    a.gen.spread_ms = *ms;
  }
  ProducerOptions po;
  po.bootstrap_servers = a.brokers;
  po.properties["compression.type"] = a.compression;
  po.properties["sticky.partitioning.linger.ms"] = "0";
  for (const auto& kv : a.properties) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(InvalidArgument("-X " + kv + ": expected property=value"), kExitUsage);
    po.properties[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto producer = KafkaProducer::Create(po);
  if (!producer.ok()) return Fail(producer.status(), kExitUsage);
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
      if (due > now) std::this_thread::sleep_for(std::min<SC::duration>(due - now, std::chrono::milliseconds(50)));
      if (SC::now() < due) continue;
    }
    gen.Next(clock.NowMs(), &ev);
    Status st = (*producer)->Produce(a.topic, -1, ev.user, ev.payload, ev.ts_ms);
    if (!st.ok()) return Fail(st);
    ++sent;
    bad += ev.bad;
    if ((sent & 1023) == 0) (*producer)->Poll();
    auto now = SC::now();
    if (!a.quiet && now - last_report >= std::chrono::seconds(1)) {
      double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "loadgen: %llu events (%.0f/s), %llu delivered\n",
                   static_cast<unsigned long long>(sent), sent / secs,
                   static_cast<unsigned long long>((*producer)->delivered()));
      last_report = now;
    }
  }
  Status st = (*producer)->Flush(60000);
  double secs = std::chrono::duration<double>(SC::now() - start).count();
  std::printf("{\"events\": %llu, \"bad_events\": %llu, \"delivered\": %llu, \"failed\": %llu, "
              "\"seconds\": %.3f, \"events_per_second\": %.0f}\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(bad),
              static_cast<unsigned long long>((*producer)->delivered()),
              static_cast<unsigned long long>((*producer)->failed()), secs, sent / secs);
  if (!st.ok()) return Fail(st);
  if ((*producer)->failed() > 0)
    return Fail(Unavailable(std::to_string((*producer)->failed()) + " event(s) failed delivery"));
  return kExitOk;
}

}  // namespace

Action AddLoadgenCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("loadgen", "Produce synthetic exposure events to Kafka");
  auto a = std::make_shared<LoadgenArgs>();
  cmd->add_option("-b,--brokers", a->brokers, "Bootstrap servers host:port[,...]")->required();
  cmd->add_option("-t,--topic", a->topic, "Topic")->capture_default_str();
  cmd->add_option("-n,--count", a->count, "Events to produce (0 = until Ctrl-C)")->capture_default_str();
  cmd->add_option("-r,--rate", a->rate, "Events per second (0 = as fast as possible)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--users", a->gen.users, "Distinct users (Zipf)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--items", a->gen.items, "Distinct items (Zipf)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--zipf", a->gen.zipf_s, "Zipf exponent")->capture_default_str()->check(CLI::Range(0.01, 5.0));
  cmd->add_option("--list-size", a->gen.list_size, "Items per list-form event")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  cmd->add_option("--list-fraction", a->gen.list_fraction, "Share of events in list form (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--bad-fraction", a->gen.bad_fraction, "Share of malformed events (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spread", a->spread, "Spread event times over the last DURATION, e.g. 3d");
  cmd->add_flag("--integer-ids", a->gen.integer_ids, "Use integer user and item IDs");
  cmd->add_option("--seed", a->gen.seed, "Random seed")->capture_default_str();
  cmd->add_option("--compression", a->compression, "none|gzip|snappy|lz4|zstd")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "gzip", "snappy", "lz4", "zstd"}));
  cmd->add_option("-X", a->properties, "librdkafka producer property=value (repeatable)");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress lines");
  return [a] { return Loadgen(*a); };
}

}  // namespace ef::app
