// exposure-filter content: the items-topic consumer (docs/CONTENT.md "Items
// topic"): items -> fingerprints -> clusters in the content index (Redis).
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>

#include "app/commands.h"
#include "app/common.h"
#include "app/content_reindex.h"
#include "app/reload.h"
#include "common/clock.h"
#include "contentdb/index.h"
#include "event/item_decoder.h"
#include "kafka/consumer.h"
#include "kafka/consumer_handle.h"
#include "kafka/group_offsets.h"
#include "metrics/build_info.h"
#include "metrics/content_metrics.h"
#include "metrics/http_server.h"
#include "pipeline/content_consumer.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace ef::app {
namespace {

struct ContentArgs {
  ConfigArgs config;
  bool exit_at_end = false;
};

// Whether redis.* is a Redis Cluster, asking until a seed answers (the consumer
// may start before Redis). kCancelled when stopped meanwhile.
StatusOr<bool> AwaitUseCluster(const RedisOptions& redis) {
  bool logged = false;
  int64_t backoff = 200;
  for (;;) {
    auto cluster = UseCluster(redis);
    if (cluster.ok() || cluster.status().code() != StatusCode::kUnavailable) return cluster;
    if (!logged) {
      spdlog::error("{}; retrying until it answers (Ctrl-C to stop)", cluster.status().message());
      logged = true;
    }
    SleepUnlessStopped(backoff);
    if (StopRequested()) return Cancelled("stopped while waiting for Redis");
    backoff = std::min<int64_t>(backoff * 2, 5000);
  }
}

int Content(const ContentArgs& args) {
  auto config = LoadOrReport(args.config);
  if (!config.ok()) return kExitConfig;
  const auto& stop = InstallStopSignals(Hangup::kReload);
  ConfigReloader reloader(args.config, *config);  // SIGHUP: log.level, log.format

  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);
  // The items topic and its group; brokers and kafka.properties as `run`'s.
  KafkaConfig kc = config->kafka;
  kc.topics = {config->content.topic};
  kc.group_id = config->content.group_id;
  kc.dead_letter_topic.clear();
  if (Status kafka = kafka::CheckConsumerConfig(kc); !kafka.ok()) return Fail(kafka, kExitConfig);
  const contentdb::ContentIndexOptions index_options = contentdb::ContentIndexOptionsFrom(*config);

  ContentConsumerOptions co;
  co.commit_interval_ms = config->pipeline.commit_interval_ms;
  co.batch_max_wait_ms = static_cast<int>(config->pipeline.batch_max_wait_ms);
  co.backoff_min_ms = config->redis.retry_backoff_min_ms;
  co.backoff_max_ms = config->redis.retry_backoff_max_ms;
  if (args.exit_at_end) {
    // The end: the high watermarks now; partitions the group has committed to
    // their end already have nothing to do.
    auto parts = ReadGroupOffsets(kc, 10000);
    if (!parts.ok()) return Fail(parts.status(), ExitCodeForStart(parts.status()));
    for (const auto& p : *parts)
      if (p.high > std::max<int64_t>(p.committed, 0)) co.end_offsets[p.tp] = p.high;
    if (co.end_offsets.empty()) {
      spdlog::info("content: group '{}' has committed every message of topic '{}': nothing to do",
                   kc.group_id, config->content.topic);
      return kExitOk;
    }
  }

  auto registry = std::make_shared<prometheus::Registry>();
  ContentMetrics metrics(*registry);
  RegisterBuildInfo(*registry);
  // /readyz: 503 while assignments to Redis fail (the consumer retries, commits
  // nothing past them), 200 otherwise.
  auto failing_since = std::make_shared<std::atomic<int64_t>>(0);
  co.failing_since_ms = failing_since.get();
  std::unique_ptr<HttpServer> http;
  if (!config->content.listen.empty()) {
    auto ready = [failing_since] {
      const int64_t since = failing_since->load(std::memory_order_relaxed);
      if (since == 0) return Readiness{};
      return Readiness{false, "assigning items in Redis fails for " +
                                  std::to_string((SteadyNowMs() - since) / 1000) +
                                  " s (retrying; nothing is committed past the batch; "
                                  "exposure_filter_content_redis_up 0)"};
    };
    auto server = HttpServer::Start(config->content.listen, registry, ready);
    if (!server.ok()) return Fail(server.status().Prefixed("content.listen"), kExitConfig);
    http = std::move(server.value());
    spdlog::info("metrics on http://{}/metrics", config->content.listen);
  }

  auto cluster = AwaitUseCluster(*redis);
  if (!cluster.ok()) {
    return Fail(cluster.status(), cluster.status().code() == StatusCode::kCancelled
                                      ? kExitOk
                                      : ExitCodeForStart(cluster.status()));
  }
  // Redis answered: up until an assignment fails (an idle items topic is not an
  // outage: config/alerts.yml ExposureFilterContentRedisDown), as run's gauge.
  metrics.redis_up->Set(1);
  std::unique_ptr<ClusterRouter> router;
  std::unique_ptr<contentdb::CommandRunner> runner;
  if (*cluster) {
    auto ro = ClusterOptionsFrom(*redis);
    if (!ro.ok()) return Fail(ro.status(), kExitConfig);
    router = std::make_unique<ClusterRouter>(std::move(*ro));
    runner = contentdb::ClusterRunner(*router);  // the router discovers on first use
  } else {
    runner = contentdb::ReconnectingRunner(*redis);
  }
  contentdb::ContentIndexOptions options = index_options;
  options.on_bad_value = CountBadMapValues(metrics.map_bad_values);
  auto index = contentdb::ContentIndex::Make(std::move(options), std::move(runner));
  if (!index.ok()) return Fail(index.status(), kExitConfig);

  // An index written by layout revision 1 and not reindexed: new items do not
  // find the items assigned before (docs/CONTENT.md "Upgrading the index").
  if (auto unindexed = (*index)->Unindexed(); unindexed.ok() && *unindexed) {
    spdlog::warn(
        "content index: {} exists without {}: the index was written by layout revision 1, "
        "whose tables this version does not read; until `exposure-filter content reindex` "
        "runs, near duplicates of items assigned before the upgrade start clusters of their "
        "own (docs/CONTENT.md#upgrading-the-index)",
        contentdb::SequenceKey(config->filter.key_prefix),
        contentdb::RevisionKey(config->filter.key_prefix));
  }
  auto consumer = KafkaConsumer::Create(kc);
  if (!consumer.ok()) return Fail(consumer.status(), kExitConfig);
  ItemDecoder decoder;
  contentdb::ContentIndex* idx = index->get();
  ContentConsumer loop(
      **consumer, decoder,
      [idx](const std::vector<contentdb::ContentItem>& items) { return idx->Assign(items); },
      &metrics, co);
  spdlog::info("content: {} (redis {}{}); SIGTERM or Ctrl-C assigns the batch, commits and exits",
               args.exit_at_end ? "assigning to the end of the topic" : "running",
               config->redis.address, *cluster ? ", cluster" : "");
  Status st = loop.Run(stop);
  (*consumer)->Close();
  if (!st.ok()) {
    return Fail(st, st.code() == StatusCode::kPermissionDenied  ? kExitDenied
                    : st.code() == StatusCode::kInvalidArgument ? kExitConfig
                                                                : kExitFailure);
  }
  return kExitOk;
}

}  // namespace

Action AddContentCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "content", "Consume the items topic into the content index: near-duplicate clusters");
  auto args = std::make_shared<ContentArgs>();
  AddConfigOptions(cmd, &args->config, false);
  cmd->add_flag("--exit-at-end", args->exit_at_end,
                "Exit once every message that was in the topic at start is assigned and "
                "committed (one member in the group)");
  cmd->footer(
      "Reads content.topic as group content.group_id (brokers and kafka.properties as `run`),\n"
      "assigns each item a cluster in Redis (content.*, filter.key_prefix) and commits after\n"
      "the assignment. Bad items are counted and skipped. While Redis fails it retries and\n"
      "commits nothing new. SIGTERM or Ctrl-C assigns the batch, commits and exits 0.\n"
      "docs/CONTENT.md#items-topic.");
  auto* reindex = cmd->add_subcommand(
      "reindex",
      "File every entry of the content map in the index's tables as configured (after an "
      "upgrade from index layout revision 1, or a change of content.index_group_bits)");
  auto reindex_args = std::make_shared<ConfigArgs>();
  auto keep_old = std::make_shared<bool>(false);
  AddConfigOptions(reindex, reindex_args.get(), false);
  reindex->add_flag("--keep-old", *keep_old,
                    "Keep revision 1's bucket hashes (<prefix>cb{...}; by default deleted once "
                    "the map is filed)");
  reindex->footer(
      "Scans <prefix>cm{*} on every master, files each item's entries in the current\n"
      "generation, then deletes <prefix>cb{*} hashes. Idempotent; safe while `content`\n"
      "and `run` assign. docs/CONTENT.md#upgrading-the-index.");
  return [args, reindex, reindex_args, keep_old] {
    if (reindex->parsed()) return ContentReindex(*reindex_args, *keep_old);
    return Content(*args);
  };
}

}  // namespace ef::app
