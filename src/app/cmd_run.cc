// exposure-filter run: the long-running consumer.
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>

#include "app/commands.h"
#include "app/common.h"
#include "app/reload.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "event/decoder.h"
#include "kafka/consumer.h"
#include "kafka/consumer_handle.h"
#include "metrics/build_info.h"
#include "metrics/http_server.h"
#include "metrics/ingest_metrics.h"
#include "metrics/partition_monitor.h"
#include "pipeline/dead_letter.h"
#include "pipeline/ingest.h"
#include "redis/meta.h"
#include "write/bit_writer.h"
#include "write/redis_sink.h"

namespace ef::app {
namespace {

// Connects and checks the stored layout, retrying while Redis is unreachable
// (the daemon may start before Redis). A layout or auth mismatch is final.
Status ConnectAndCheckMeta(const RedisOptions& options, const Layout& layout) {
  bool logged = false;
  int64_t backoff = 200;
  for (;;) {
    Layout effective;
    Status st = EnsureMetaAt(options, layout, &effective);
    if (st.ok()) {
      // What to restore should the meta be lost (docs/OPERATING.md "A lost meta").
      spdlog::info("layout stored at {}: version {}{}, founder_marks_from {}",
                   MetaKey(layout.prefix), effective.version(),
                   effective.v3 ? ", v3_from " + std::to_string(effective.v3_from) : "",
                   effective.founder_marks_from);
      if (effective.version() != layout.version()) WarnStoredLayout(effective, layout);
      return st;
    }
    if (st.code() != StatusCode::kUnavailable) return st;
    if (!logged) {
      spdlog::error("{}; retrying until it answers (Ctrl-C to stop)", st.message());
      logged = true;
    }
    SleepUnlessStopped(backoff);
    if (StopRequested()) return Cancelled("stopped while waiting for Redis");
    backoff = std::min<int64_t>(backoff * 2, 5000);
  }
}

int Run(const ConfigArgs& args) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitConfig;
  const auto& stop = InstallStopSignals(Hangup::kReload);
  ConfigReloader reloader(args, *config);  // SIGHUP: log.level, log.format

  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitConfig);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);
  // kafka.properties that librdkafka refuses are a config error now, not after
  // Redis answered (config check makes the same check).
  if (Status kafka = kafka::CheckConsumerConfig(config->kafka); !kafka.ok())
    return Fail(kafka, kExitConfig);

  auto registry = std::make_shared<prometheus::Registry>();
  IngestMetrics metrics(*registry, config->kafka.group_id);
  RegisterBuildInfo(*registry);
  StatusRules rules;
  rules.window_samples = static_cast<size_t>(config->metrics.status_window);
  rules.freshness_target_seconds = static_cast<double>(config->metrics.freshness_target_ms) / 1000;
  rules.freshness_limit_seconds = static_cast<double>(config->metrics.freshness_limit_ms) / 1000;
  PartitionMonitor monitor(*registry, rules, rules.freshness_target_seconds,
                           config->metrics.unassigned_grace_ms, config->kafka.group_id);
  // Until the layout is checked in Redis, not ready; from then on the monitor
  // decides (partitions, freshness, Redis writes), refreshed every tick.
  std::atomic<bool> started{false};
  std::unique_ptr<HttpServer> http;
  if (!config->metrics.listen.empty()) {
    auto server = HttpServer::Start(config->metrics.listen, registry, [&monitor, &started] {
      if (!started.load()) return Readiness{false, "starting: redis layout not checked yet"};
      return monitor.Ready();
    });
    if (!server.ok()) return Fail(server.status(), kExitConfig);
    http = std::move(server.value());
    spdlog::info("metrics on http://{}/metrics, /healthz, /readyz", config->metrics.listen);
  }

  spdlog::info("layout: version {} m={} k={} seed={} prefix='{}' bucket={}s window={}s{}",
               layout->version(), layout->m, layout->k, layout->seed, layout->prefix,
               layout->bucket_seconds, layout->window_seconds,
               layout->stages > 1 ? fmt::format(" stages={} growth={} k_step={}", layout->stages,
                                                layout->growth, layout->k_step)
                                  : "");
  Status st = ConnectAndCheckMeta(*redis, *layout);
  if (!st.ok()) {
    // A layout that disagrees, refused credentials, a SELECT refused: final.
    return Fail(st, st.code() == StatusCode::kCancelled ? kExitOk : ExitCodeForStart(st));
  }
  metrics.redis_up->Set(1);
  spdlog::info("redis {}: layout checked", config->redis.address);

  auto consumer = KafkaConsumer::Create(config->kafka);
  if (!consumer.ok()) return Fail(consumer.status(), kExitConfig);
  (*consumer)->SetLostHandler([&metrics](const TopicPartition& tp, int64_t from, int64_t to) {
    metrics.AddLost(tp.topic, tp.partition, to - from);
    spdlog::error(
        "kafka: {}/{}: {} message(s) (offsets {}..{}) were deleted by the topic's retention "
        "before this group read them: those exposures are lost, and replay cannot bring them "
        "back; counted in exposure_filter_messages_lost_total (docs/OPERATING.md)",
        tp.topic, tp.partition, to - from, from, to - 1);
  });
  std::unique_ptr<DeadLetterSink> dead_letter;
  if (!config->kafka.dead_letter_topic.empty()) {
    DeadLetterOptions dlo;
    dlo.drop_on_permanent_failure = config->kafka.dead_letter_on_failure == "drop";
    dlo.max_pending_bytes = static_cast<size_t>(config->kafka.dead_letter_max_pending_bytes);
    auto dl = DeadLetterSink::Create(config->kafka, dlo, &metrics);
    if (!dl.ok()) return Fail(dl.status(), kExitConfig);
    dead_letter = std::move(dl.value());
  }

  RedisSink writer(BitWriterOptionsFromConfig(config->redis, *redis, *layout));
  writer.SetErrorObserver([&metrics](RedisErrorKind kind) {
    metrics.redis_errors[static_cast<size_t>(kind)]->Increment();
  });
  Decoder decoder(config->events, config->filter);
  SystemClock clock;
  IngestOptions io;
  io.batch_max_events = static_cast<size_t>(config->pipeline.batch_max_events);
  io.batch_max_positions = static_cast<size_t>(config->pipeline.batch_max_positions);
  io.batch_max_wait_ms = static_cast<int>(config->pipeline.batch_max_wait_ms);
  io.commit_interval_ms = config->pipeline.commit_interval_ms;
  io.backoff_min_ms = config->redis.retry_backoff_min_ms;
  io.backoff_max_ms = config->redis.retry_backoff_max_ms;
  Ingest ingest(**consumer, writer, decoder, *layout, clock, &metrics, io, dead_letter.get());
  auto clusters = EnableNearDuplicates(*config, *redis, ingest, metrics.content_map_bad_values);
  if (!clusters.ok()) return Fail(clusters.status(), ExitCodeForStart(clusters.status()));
  ingest.SetTick(config->metrics.refresh_interval_ms, [&] {
    const std::vector<PartitionSnapshot> parts = ingest.Snapshot();
    // Every assigned partition's counters exist from 0 (alerts use increase()).
    for (const auto& p : parts) metrics.EnsurePartition(p.tp.topic, p.tp.partition);
    monitor.Update(parts, clock.NowMs(), ingest.Health());
    started = true;
  });

  spdlog::info("running; SIGTERM or Ctrl-C drains, flushes and commits");
  st = ingest.Run(stop);
  const auto& t = ingest.totals();
  (*consumer)->Close();
  spdlog::info(
      "stopped: {} messages, {} events written ({} items), {} rejected, {} batches, {} "
      "commits",
      t.messages, t.events_written, t.items_written, t.events_rejected, t.batches, t.commits);
  if (*clusters) {
    spdlog::info(
        "near-duplicates: {} cluster mark(s) written, {} item(s) looked up in the content map, {} "
        "exposed item(s) with no known cluster",
        t.cluster_tokens, t.cluster_lookups, t.items_unclustered);
  }
  if (!st.ok()) {
    // Refused credentials or ACL, or the stored layout changed under us: a
    // restart cannot help. Anything else (e.g. the final commit lost) may.
    return Fail(st, ExitCodeForPipeline(st));
  }
  return kExitOk;
}

}  // namespace

Action AddRunCommand(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("run", "Consume exposure events from Kafka into Redis (the daemon)");
  auto args = std::make_shared<ConfigArgs>();
  AddConfigOptions(cmd, args.get(), false);
  cmd->footer(
      "Waits (retrying, logged once) while Redis does not answer at start; exits 5 when the\n"
      "layout stored in Redis disagrees with filter.*, 3 when Redis or Kafka refuse the\n"
      "credentials or ACL, 4 on a bad config. SIGTERM or Ctrl-C drains, flushes, commits and\n"
      "exits 0. docs/CLI.md#exit-codes, docs/OPERATING.md.");
  return [args] { return Run(*args); };
}

}  // namespace ef::app
