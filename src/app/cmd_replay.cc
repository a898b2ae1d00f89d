// exposure-filter replay: re-ingest a time range of a topic after an outage,
// through the same decode → hash → coalesce → write path as `run`, without
// joining or committing to the live group (safe while `run` runs).
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "event/decoder.h"
#include "kafka/group_offsets.h"
#include "kafka/offsets_for_time.h"
#include "kafka/range_source.h"
#include "metrics/ingest_metrics.h"
#include "pipeline/ingest.h"
#include "redis/meta.h"
#include "write/bit_writer.h"
#include "write/redis_sink.h"

namespace ef::app {
namespace {

struct ReplayArgs {
  ConfigArgs config;
  std::string since;
  std::string until;
  std::vector<std::string> topics;
  std::vector<int> partitions;
  double max_rate = 0;
  bool dry_run = false;
  std::string timeout = "30s";  // --timeout: a duration (plain number = seconds)
  int64_t timeout_ms = 30000;   // parsed
};

StatusOr<std::vector<OffsetRange>> FindRanges(const KafkaConfig& kc, const ReplayArgs& a,
                                              int64_t since_ms, int64_t until_ms) {
  const int timeout_ms = static_cast<int>(a.timeout_ms);
  auto parts = ReadGroupOffsets(kc, timeout_ms);
  if (!parts.ok()) return parts.status();
  std::vector<TopicPartition> tps;
  std::vector<int64_t> highs;
  for (const auto& p : *parts) {
    if (!a.partitions.empty() &&
        std::find(a.partitions.begin(), a.partitions.end(), p.tp.partition) == a.partitions.end())
      continue;
    tps.push_back(p.tp);
    highs.push_back(p.high);
  }
  if (tps.empty()) return InvalidArgument("--partitions: none of them exist in the topic(s)");
  auto starts = OffsetsForTime(kc, tps, since_ms, timeout_ms);
  if (!starts.ok()) return starts.status().Prefixed("--since");
  std::vector<int64_t> ends = highs;  // captured at start: later events are `run`'s
  if (until_ms > 0) {
    auto e = EndOffsetsForTime(kc, tps, until_ms, timeout_ms);
    if (!e.ok()) return e.status().Prefixed("--until");
    ends = std::move(e.value());
  }
  std::vector<OffsetRange> ranges;
  for (size_t i = 0; i < tps.size(); ++i)
    ranges.push_back({tps[i], (*starts)[i], std::max((*starts)[i], std::min(ends[i], highs[i]))});
  return ranges;
}

int Replay(ReplayArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitConfig;
  auto timeout = DurationOption(a.timeout, "--timeout");
  if (!timeout.ok()) return Fail(timeout.status(), kExitUsage);
  if (*timeout > 600000) return Fail(InvalidArgument("--timeout: at most 10m"), kExitUsage);
  a.timeout_ms = *timeout;
  SetUpLogging(config->log.level == "info" ? "warn" : config->log.level, config->log.format);
  const auto& stop = InstallStopSignals();
  SystemClock clock;
  const int64_t now_ms = clock.NowMs();
  auto since = ParseTimeArg(a.since, now_ms);
  if (!since.ok()) return Fail(since.status().Prefixed("--since"), kExitUsage);
  int64_t until_ms = 0;
  if (!a.until.empty()) {
    auto u = ParseTimeArg(a.until, now_ms);
    if (!u.ok()) return Fail(u.status().Prefixed("--until"), kExitUsage);
    until_ms = *u;
    if (until_ms < *since) return Fail(InvalidArgument("--until is before --since"), kExitUsage);
  }
  KafkaConfig kc = config->kafka;
  if (!a.topics.empty()) kc.topics = a.topics;
  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitConfig);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);

  auto ranges = FindRanges(kc, a, *since, until_ms);
  if (!ranges.ok()) {
    // A --partitions that names none is the command line's; Kafka's errors are
    // named by kind (unreachable, refused).
    const Status& st = ranges.status();
    return Fail(st, st.code() == StatusCode::kInvalidArgument ? kExitUsage : ExitCodeForStart(st));
  }
  int64_t total = 0;
  for (const auto& r : *ranges) total += r.end - r.start;
  std::fprintf(stderr, "replay %s .. %s of group %s's topic(s), %lld event(s):\n",
               FormatTimeRfc3339(*since).c_str(),
               until_ms ? FormatTimeRfc3339(until_ms).c_str() : "now (high watermarks)",
               kc.group_id.c_str(), static_cast<long long>(total));
  for (const auto& r : *ranges)
    std::fprintf(stderr, "  %s/%d  offsets %lld .. %lld  (%lld)\n", r.tp.topic.c_str(),
                 r.tp.partition, static_cast<long long>(r.start), static_cast<long long>(r.end),
                 static_cast<long long>(r.end - r.start));
  if (a.dry_run) return kExitOk;

  {
    // The meta first (a layout mismatch stops the replay before it reads Kafka).
    Layout effective;
    Status st = EnsureMetaAt(*redis, *layout, &effective);
    if (!st.ok()) return Fail(st, ExitCodeForStart(st));
    if (effective.version() != layout->version()) WarnStoredLayout(effective, *layout);
  }
  auto source = RangeSource::Create(kc, *ranges);
  if (!source.ok()) return Fail(source.status(), ExitCodeForStart(source.status()));
  prometheus::Registry registry;
  IngestMetrics metrics(registry);
  BitWriterOptions wo = BitWriterOptionsFromConfig(config->redis, *redis, *layout);
  // Replayed events may be in Redis already: read each key first, so that items
  // already present are not written into the key's newest stage again.
  wo.read_before_write = true;
  RedisSink writer(std::move(wo));
  Decoder decoder(config->events, config->filter);
  IngestOptions io;
  io.batch_max_events = static_cast<size_t>(config->pipeline.batch_max_events);
  io.batch_max_positions = static_cast<size_t>(config->pipeline.batch_max_positions);
  if (a.max_rate > 0)
    io.batch_max_events =
        std::max<size_t>(1, std::min<size_t>(io.batch_max_events, a.max_rate / 10));
  io.backoff_min_ms = config->redis.retry_backoff_min_ms;
  io.backoff_max_ms = config->redis.retry_backoff_max_ms;
  Ingest ingest(**source, writer, decoder, *layout, clock, &metrics, io);
  auto clusters = EnableNearDuplicates(*config, *redis, ingest, metrics.content_map_bad_values);
  if (!clusters.ok()) return Fail(clusters.status(), ExitCodeForStart(clusters.status()));

  using SC = std::chrono::steady_clock;
  const auto start = SC::now();
  auto last_report = start;
  const bool tty = isatty(2);
  auto report = [&](bool final) {
    const double secs = std::chrono::duration<double>(SC::now() - start).count();
    const auto done = static_cast<int64_t>(ingest.totals().messages);
    const double rate = secs > 0 ? done / secs : 0;
    size_t parts_done = 0;
    auto pos = (*source)->Positions();
    for (size_t i = 0; i < ranges->size(); ++i) parts_done += pos[i] >= (*ranges)[i].end;
    if (tty && !final) {
      const double eta = rate > 0 ? (total - done) / rate : 0;
      std::fprintf(
          stderr,
          "\rreplay: %lld / %lld events (%.0f%%), %.0f/s, ETA %.0f s, partitions done %zu/%zu   ",
          static_cast<long long>(done), static_cast<long long>(total),
          total ? 100.0 * done / total : 100.0, rate, eta, parts_done, ranges->size());
      return;
    }
    nlohmann::json j = {{"events_done", done},
                        {"events_total", total},
                        {"events_written", ingest.totals().events_written},
                        {"events_rejected", ingest.totals().events_rejected},
                        {"elapsed_seconds", secs},
                        {"events_per_second", rate},
                        {"partitions_done", parts_done},
                        {"partitions", ranges->size()}};
    if (final) {
      nlohmann::json reasons = nlohmann::json::object();
      for (size_t r = 1; r < metrics.rejected_by_reason.size(); ++r) {
        double v = metrics.rejected_by_reason[r]->Value();
        if (v > 0) reasons[RejectReasonName(static_cast<RejectReason>(r))] = v;
      }
      j["rejected_by_reason"] = reasons;
      nlohmann::json positions = nlohmann::json::array();
      for (size_t i = 0; i < ranges->size(); ++i)
        positions.push_back({{"topic", (*ranges)[i].tp.topic},
                             {"partition", (*ranges)[i].tp.partition},
                             {"next_offset", pos[i]},
                             {"end_offset", (*ranges)[i].end}});
      j["positions"] = positions;
      j["complete"] = (*source)->Done();
    }
    if (tty) std::fprintf(stderr, "\n");
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  };

  Status st;
  while (!stop.load() && !(*source)->Done()) {
    st = ingest.Step(stop);
    if (!st.ok()) break;
    if (a.max_rate > 0) {
      // Hold the average at max_rate so a replay cannot starve the live daemon's Redis.
      const double due = ingest.totals().messages / a.max_rate;
      const double secs = std::chrono::duration<double>(SC::now() - start).count();
      if (due > secs) std::this_thread::sleep_for(std::chrono::duration<double>(due - secs));
    }
    if (SC::now() - last_report >= std::chrono::seconds(tty ? 1 : 5)) {
      report(false);
      last_report = SC::now();
    }
  }
  // The last batch decoded while the one before it was written.
  if (st.ok()) st = ingest.Flush(stop);
  (*source)->Close();
  report(true);
  if (!st.ok()) return Fail(st, ExitCodeForPipeline(st));
  if (!(*source)->Done()) {
    std::fprintf(stderr,
                 "exposure-filter: replay interrupted; positions above show where it got "
                 "to (everything before them is written)\n");
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace

Action AddReplayCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay",
      "Re-ingest a time range of the topic after an outage (no group membership, no commits: "
      "safe while `run` runs)");
  auto a = std::make_shared<ReplayArgs>();
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("--since", a->since,
                  "Start: RFC 3339 (2026-11-22T08:00:00Z), a date, or a duration ago (2h, 3d)")
      ->required();
  cmd->add_option("--until", a->until,
                  "End (inclusive), same forms; default: the high watermarks now");
  cmd->footer(
      "Times: RFC 3339 (2026-11-22T08:00:00Z), a date (2026-11-22 = midnight UTC), @epoch\n"
      "seconds (@1795305600), or a duration ago (2h, 3d, 90m). Exit codes: 0 done, 2 usage,\n"
      "4 config, 5 stored layout disagrees, 6 Kafka or Redis unreachable, 3 refused\n"
      "(credentials, ACL, or no such topic),\n"
      "130 interrupted (positions printed). docs/CLI.md.");
  OneValueEach(cmd->add_option("--topic", a->topics, "Topic (repeatable; default: kafka.topics)"));
  cmd->add_option("--partitions", a->partitions, "Only these partitions")->delimiter(',');
  cmd->add_option("--max-rate", a->max_rate, "Events per second at most (0 = no limit)")
      ->check(NonNegativeReal());
  cmd->add_flag("--dry-run", a->dry_run, "Print the offset ranges and event counts, write nothing");
  cmd->add_option("--timeout", a->timeout,
                  "Wait this long for Kafka answers (a duration: 30s, 2m; plain number = seconds)")
      ->type_name("DURATION")
      ->capture_default_str();
  return [a] { return Replay(*a); };
}

}  // namespace ef::app
