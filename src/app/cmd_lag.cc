// exposure-filter lag: per-partition lag of the daemon's consumer group, in
// messages and in seconds, read from Kafka alone (committed offsets, watermarks,
// commit metadata and the timestamp of the first uncommitted message), so it
// works while the daemon is down. docs/LAG.md.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/common.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/time_arg.h"
#include "kafka/commit_metadata.h"
#include "kafka/group_offsets.h"
#include "kafka/message_time.h"
#include "lag/status.h"

namespace ef::app {
namespace {

constexpr int64_t kDefaultIntervalMs = 2000;

struct LagArgs {
  ConfigArgs config;
  std::string watch_text;  // --watch's value: a duration, "" = the default
  bool watch = false;      // --watch given
  bool json = false;
  bool check = false;
  size_t samples = 10;
  std::string freshness_target = "10s";
  std::string freshness_limit = "60s";
  std::string timeout = "10s";
  std::string log_level = "off";
};

// One partition at one refresh.
struct Row {
  PartitionOffsets offsets;
  int64_t lag_messages = 0;
  int64_t oldest_unwritten_ms = -1;   // timestamp of the first uncommitted message; -1 none/unknown
  std::optional<double> lag_seconds;  // nullopt: lagging but the timestamp could not be read
  std::optional<double> rate;         // committed offsets per second since the previous refresh
  std::optional<CommitMetadata> commit;
  PartitionStatus status = PartitionStatus::kOk;
  std::string reason;
};

struct Refresh {
  int64_t at_ms = 0;
  std::vector<Row> rows;
  std::string timestamp_error;  // why lag seconds are unknown, if they are
};

// Reads offsets, then the timestamps of the first uncommitted message of every
// lagging partition. `at_ms` is taken after both reads, so an age is never
// understated.
StatusOr<Refresh> Sample(const KafkaConfig& kafka, int timeout_ms) {
  auto offsets = ReadGroupOffsets(kafka, timeout_ms);
  if (!offsets.ok()) return offsets.status();
  Refresh r;
  std::vector<PartitionOffset> probe;
  std::vector<size_t> probe_rows;
  for (auto& po : *offsets) {
    Row row;
    row.offsets = std::move(po);
    row.lag_messages = row.offsets.LagMessages();
    if (row.lag_messages > 0) {
      probe.push_back({row.offsets.tp, std::max(row.offsets.committed, row.offsets.low), ""});
      probe_rows.push_back(r.rows.size());
    }
    row.commit = DecodeCommitMetadata(row.offsets.metadata);
    r.rows.push_back(std::move(row));
  }
  std::vector<int64_t> ts(probe.size(), -1);
  if (!probe.empty()) {
    auto read = ReadMessageTimestamps(kafka, probe, timeout_ms);
    if (read.ok()) {
      ts = std::move(read.value());
    } else {
      r.timestamp_error = read.status().message();
    }
  }
  r.at_ms = SystemClock().NowMs();
  for (size_t i = 0; i < probe.size(); ++i) {
    Row& row = r.rows[probe_rows[i]];
    row.oldest_unwritten_ms = ts[i];
    if (ts[i] > 0)
      row.lag_seconds = std::max<double>(0, static_cast<double>(r.at_ms - ts[i]) / 1000);
  }
  for (auto& row : r.rows)
    if (row.lag_messages == 0) row.lag_seconds = 0;
  return r;
}

// Per-partition evaluators across refreshes; fills rate, status and reason.
class Judge {
 public:
  explicit Judge(StatusRules rules) : rules_(rules) {}

  void Evaluate(Refresh* r) {
    for (auto& row : r->rows) {
      auto [it, fresh] = evaluators_.try_emplace(row.offsets.tp, rules_);
      StatusEvaluator& ev = it->second;
      if (!fresh && !ev.samples().empty()) {
        const LagSample& prev = ev.samples().back();
        if (prev.committed >= 0 && row.offsets.committed >= 0 && r->at_ms > prev.at_ms)
          row.rate = static_cast<double>(row.offsets.committed - prev.committed) * 1000.0 /
                     static_cast<double>(r->at_ms - prev.at_ms);
      }
      LagSample s;
      s.at_ms = r->at_ms;
      s.committed = row.offsets.committed;
      s.lag_messages = row.lag_messages;
      s.lag_seconds = row.lag_seconds.value_or(0);
      s.last_commit_ms = row.commit ? row.commit->commit_ms : 0;
      ev.Add(s);
      row.status = ev.Current();
      row.reason = ev.CurrentReason();
      if (!row.lag_seconds)
        row.reason += "; lag in seconds unknown (first unwritten message not read)";
    }
  }

 private:
  StatusRules rules_;
  std::map<TopicPartition, StatusEvaluator> evaluators_;
};

PartitionStatus Worst(const Refresh& r) {
  PartitionStatus w = PartitionStatus::kOk;
  for (const auto& row : r.rows) w = std::max(w, row.status);
  return w;
}

std::string UtcTime(int64_t ms) { return FormatTimeRfc3339(ms); }

std::string Seconds(double s) { return fmt::format("{:.1f}", s); }

// The total line's age: 3.2s, 4m 5s, 1d 19h 44m (JSON keeps numeric seconds).
std::string Age(double s) { return FormatDurationHuman(s); }

// A LAG_S cell: the same without spaces (1d19h44m), one word per column.
std::string AgeCell(double s) {
  std::string t = FormatDurationHuman(s);
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  return t;
}

// `mode` describes the refresh and window in the title line.
std::string RenderTable(const Refresh& r, const KafkaConfig& kafka, const std::string& mode) {
  const std::vector<std::string> head = {"TOPIC", "PARTITION", "COMMITTED", "HIGH",   "LAG_MSGS",
                                         "LOST",  "LAG_S",     "RATE/S",    "STATUS", "REASON"};
  const std::vector<bool> right = {false, true, true, true, true, true, true, true, false, false};
  std::vector<std::vector<std::string>> cells;
  int64_t total = 0;
  int64_t lost = 0;
  double oldest = 0;
  size_t not_ok = 0;
  for (const auto& row : r.rows) {
    const auto& o = row.offsets;
    cells.push_back({o.tp.topic, std::to_string(o.tp.partition),
                     o.committed >= 0 ? std::to_string(o.committed) : "-", std::to_string(o.high),
                     std::to_string(row.lag_messages), std::to_string(o.LostMessages()),
                     row.lag_seconds ? AgeCell(*row.lag_seconds) : "?",
                     row.rate ? Seconds(*row.rate) : "-", PartitionStatusName(row.status),
                     row.reason});
    total += row.lag_messages;
    lost += o.LostMessages();
    oldest = std::max(oldest, row.lag_seconds.value_or(0));
    not_ok += row.status != PartitionStatus::kOk;
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t c = 0; c < v.size(); ++c) {
      if (c) s += "  ";
      const bool last = c + 1 == v.size();
      if (right[c]) {
        s += fmt::format("{:>{}}", v[c], width[c]);
      } else {
        s += last ? v[c] : fmt::format("{:<{}}", v[c], width[c]);
      }
    }
    return s + "\n";
  };
  std::string out = fmt::format("group {} at {}  {}  ({})\n", kafka.group_id,
                                kafka.bootstrap_servers, UtcTime(r.at_ms), mode);
  out += line(head);
  for (const auto& c : cells) out += line(c);
  out += fmt::format(
      "total lag {} message(s), oldest unwritten event {} old; {}\n", total, Age(oldest),
      not_ok
          ? fmt::format("{} partition(s) not OK, worst {}", not_ok, PartitionStatusName(Worst(r)))
          : std::string("all OK"));
  if (lost > 0)
    out += fmt::format(
        "LOST: {} message(s) were deleted by the topic's retention before the group read them "
        "(committed offset below the low watermark): those exposures are gone, replay cannot "
        "bring them back (docs/OPERATING.md)\n",
        lost);
  if (!r.timestamp_error.empty())
    out += "note: lag in seconds unknown: " + r.timestamp_error + "\n";
  return out;
}

nlohmann::json RenderJson(const Refresh& r, const KafkaConfig& kafka, double interval_s,
                          const StatusRules& rules) {
  auto opt_num = [](std::optional<double> v) -> nlohmann::json {
    if (!v) return nullptr;
    return std::round(*v * 1000) / 1000;
  };
  nlohmann::json j;
  j["time_ms"] = r.at_ms;
  j["group"] = kafka.group_id;
  j["bootstrap_servers"] = kafka.bootstrap_servers;
  j["interval_seconds"] = interval_s;
  j["window_samples"] = rules.window_samples;
  j["stop_after_seconds"] = static_cast<double>(rules.stop_after_ms) / 1000;
  j["freshness_target_seconds"] = rules.freshness_target_seconds;
  j["freshness_limit_seconds"] = rules.freshness_limit_seconds;
  j["status"] = PartitionStatusName(Worst(r));
  int64_t total = 0;
  int64_t lost = 0;
  double oldest = 0;
  j["partitions"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    const auto& o = row.offsets;
    nlohmann::json p;
    p["topic"] = o.tp.topic;
    p["partition"] = o.tp.partition;
    p["committed_offset"] =
        o.committed >= 0 ? nlohmann::json(o.committed) : nlohmann::json(nullptr);
    p["low_watermark"] = o.low;
    p["high_watermark"] = o.high;
    p["lag_messages"] = row.lag_messages;
    p["lost"] = o.LostMessages();
    p["lag_seconds"] = opt_num(row.lag_seconds);
    p["oldest_unwritten_ms"] = row.oldest_unwritten_ms > 0 ? nlohmann::json(row.oldest_unwritten_ms)
                                                           : nlohmann::json(nullptr);
    p["rate"] = opt_num(row.rate);
    p["last_commit_ms"] =
        row.commit ? nlohmann::json(row.commit->commit_ms) : nlohmann::json(nullptr);
    p["last_event_ms"] = row.commit && row.commit->event_ms > 0
                             ? nlohmann::json(row.commit->event_ms)
                             : nlohmann::json(nullptr);
    p["status"] = PartitionStatusName(row.status);
    p["reason"] = row.reason;
    j["partitions"].push_back(std::move(p));
    total += row.lag_messages;
    lost += o.LostMessages();
    oldest = std::max(oldest, row.lag_seconds.value_or(0));
  }
  j["lag_messages"] = total;
  j["lost_messages"] = lost;
  j["lag_seconds"] = std::round(oldest * 1000) / 1000;
  if (!r.timestamp_error.empty()) j["error"] = r.timestamp_error;
  return j;
}

// The reader's messages start with "kafka <servers>: " or "kafka: "; ours names
// the servers already.
std::string WithoutServers(const std::string& message, const std::string& servers) {
  for (const std::string& prefix : {"kafka " + servers + ": ", std::string("kafka: ")})
    if (message.rfind(prefix, 0) == 0) return message.substr(prefix.size());
  return message;
}

int Lag(const LagArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitConfig;
  SetUpLogging(a.log_level);
  InstallStopSignals();
  int64_t watch_ms = kDefaultIntervalMs;
  if (a.watch && !a.watch_text.empty()) {
    auto w = DurationOption(a.watch_text, "--watch");
    if (!w.ok()) return Fail(w.status(), kExitUsage);
    if (*w < 100 || *w > 3600000)
      return Fail(InvalidArgument("--watch " + a.watch_text + ": must be 100ms .. 1h"), kExitUsage);
    watch_ms = *w;
  }
  auto target = DurationOption(a.freshness_target, "--freshness-target");
  if (!target.ok()) return Fail(target.status(), kExitUsage);
  auto limit = DurationOption(a.freshness_limit, "--freshness-limit");
  if (!limit.ok()) return Fail(limit.status(), kExitUsage);
  auto timeout = DurationOption(a.timeout, "--timeout");
  if (!timeout.ok()) return Fail(timeout.status(), kExitUsage);
  if (*timeout > 600000) return Fail(InvalidArgument("--timeout: at most 10m"), kExitUsage);
  const KafkaConfig& kafka = config->kafka;

  const int64_t interval_ms = watch_ms;
  const double interval_s = static_cast<double>(interval_ms) / 1000;
  StatusRules rules;
  rules.window_samples = a.samples;
  rules.freshness_target_seconds = static_cast<double>(*target) / 1000;
  rules.freshness_limit_seconds = static_cast<double>(*limit) / 1000;
  // A consumer that has not committed for a whole window is gone. Fixed rather
  // than the evaluator's "span of a full window", so that the first refresh of
  // --watch already tells STOP, and one-shot and --watch agree.
  rules.stop_after_ms = static_cast<int64_t>(a.samples) * interval_ms;
  Judge judge(rules);

  // --watch: refresh until Ctrl-C; --check --watch: one full window, then judge;
  // otherwise a single sample.
  const bool forever = a.watch && !a.check;
  const size_t refreshes = a.watch ? a.samples : 1;
  const bool tty = isatty(fileno(stdout));
  const std::string mode =
      a.watch ? fmt::format("refresh {} s, window {} samples", interval_s, a.samples)
              : fmt::format("single read; STOP after {} without a commit",
                            FormatDurationMs(rules.stop_after_ms));
  const int timeout_ms = static_cast<int>(*timeout);
  size_t done = 0;
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    auto r = Sample(kafka, timeout_ms);
    if (!r.ok()) {
      const std::string what =
          fmt::format("lag: cannot read group '{}' from Kafka at {} (timeout {}): {}",
                      kafka.group_id, kafka.bootstrap_servers, FormatDurationMs(*timeout),
                      WithoutServers(r.status().message(), kafka.bootstrap_servers));
      if (done == 0 || !forever) return Fail(InvalidArgument(what), ExitCodeForStart(r.status()));
      std::fprintf(stderr, "exposure-filter: %s %s; retrying\n",
                   UtcTime(SystemClock().NowMs()).c_str(), what.c_str());
    } else {
      judge.Evaluate(&r.value());
      ++done;
      const bool show = forever || done >= refreshes;
      if (show) {
        if (a.json) {
          std::printf("%s\n", RenderJson(*r, kafka, interval_s, rules).dump().c_str());
        } else {
          std::string table = RenderTable(*r, kafka, mode);
          if (forever && tty) {
            // Redraw in place, like top: home, each line cleared to its end,
            // the rest of the screen cleared; the whole screen only once.
            std::string frame = done == 1 ? "\033[H\033[2J" : "\033[H";
            for (char ch : table)
              frame += ch == '\n' ? std::string("\033[K\n") : std::string(1, ch);
            std::printf("%s\033[J", frame.c_str());
          } else {
            std::printf("%s%s", done > 1 && forever ? "\n" : "", table.c_str());
          }
        }
        std::fflush(stdout);
      }
      if (!forever && done >= refreshes) {
        return a.check && Worst(*r) != PartitionStatus::kOk ? kExitData : kExitOk;
      }
    }
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
    SleepUnlessStopped(std::max<int64_t>(interval_ms - spent, 0));
    if (StopRequested()) return a.check ? kExitInterrupted : kExitOk;
  }
}

constexpr char kFooter[] =
    R"(Columns: committed offset ("-": the group has no commit yet, lag counts
from the low watermark), high watermark, LAG_MSGS = high - max(committed, low),
LAG_S = now - Kafka timestamp of the first uncommitted message (exact, read from
Kafka; 0.0s when caught up; 3.2s, 4m5s, 1d19h44m), RATE/S = committed offsets per second since the
previous refresh.

Status per partition (worst first; the window is --samples refreshes):
  ERR    LAG_S above --freshness-limit (default 60 s)
  STOP   lagging and no commit for samples x interval (commit time from the
         daemon's commit metadata; a live daemon re-commits every second)
  STALL  lagging in every sample of a full window, committed offset not moving
  WARN   lag in messages grew at every sample of a full window, or LAG_S above
         --freshness-target (default 10 s)
  OK     none of the above
A single read (no --watch) judges ERR, STOP and WARN-by-seconds only: STALL and
growth need a full window (use --check --watch S --samples N).

Exit codes: 0 ok; 7 with --check: a partition not OK; 6 Kafka did not answer
within --timeout (one line naming the servers); 3 Kafka refused the
credentials, or has no such topic; 2 bad usage; 4 bad config. docs/LAG.md,
docs/CLI.md.)";

}  // namespace

Action AddLagCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "lag",
      "Show the consumer group's lag per partition in messages and seconds (from Kafka "
      "alone: works while the daemon is down)");
  auto a = std::make_shared<LagArgs>();
  AddConfigOptions(cmd, &a->config, false);
  auto* watch = cmd->add_option("--watch", a->watch_text,
                                "Refresh every DURATION (default 2s; 500ms, 0.5 = seconds) until "
                                "Ctrl-C; a table is redrawn in place on a terminal")
                    ->expected(0, 1)
                    ->type_name("[DURATION]");
  cmd->add_flag("--json", a->json, "One JSON document per refresh (one line each)");
  cmd->add_flag("--check", a->check,
                "Exit 7 when any partition is WARN, STALL, STOP or ERR (with --watch: after "
                "one full window of samples)");
  cmd->add_option("--samples", a->samples, "Window of the status rules, in refreshes")
      ->check(CLI::Range(2, 10000))
      ->capture_default_str();
  cmd->add_option("--freshness-target", a->freshness_target, "WARN above this lag in seconds")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--freshness-limit", a->freshness_limit, "ERR above this lag in seconds")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout, "Give up on an unanswering Kafka after this long")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "librdkafka diagnostics on stderr (off, warn, ...)")
      ->capture_default_str();
  cmd->footer(kFooter);
  return [a, watch] {
    a->watch = watch->count() > 0;
    return Lag(*a);
  };
}

}  // namespace ef::app
