// exposure-filter lag: per-partition lag of consumer groups (the daemon's by
// default, --group, --all-groups), in messages and in seconds, read from Kafka
// alone (committed offsets, watermarks, commit metadata and the timestamp of the
// first uncommitted message), so it works while the daemon is down: a table,
// JSON, a --check verdict, or Prometheus metrics (--serve). docs/LAG.md.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/common.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/time_arg.h"
#include "kafka/commit_metadata.h"
#include "kafka/group_list.h"
#include "kafka/group_offsets.h"
#include "kafka/message_time.h"
#include "lag/status.h"
#include "metrics/build_info.h"
#include "metrics/http_server.h"
#include "metrics/lag_exporter.h"

namespace ef::app {
namespace {

constexpr int64_t kDefaultIntervalMs = 2000;

struct LagArgs {
  ConfigArgs config;
  std::string brokers;              // -b: overrides kafka.bootstrap_servers
  std::vector<std::string> groups;  // --group, repeatable; none = kafka.group_id
  bool all_groups = false;
  bool list_groups = false;
  std::string watch_text;  // --watch's value: a duration, "" = the default
  bool watch = false;      // --watch given
  std::string interval;    // --interval: "" = --watch's value or 2s
  std::string serve;       // --serve ADDR: "" = off
  bool json = false;
  bool check = false;
  size_t samples = 0;            // 0: the config's metrics.status_window
  std::string freshness_target;  // "": the config's metrics.freshness_target
  std::string freshness_limit;   // "": the config's metrics.freshness_limit
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
  // The group has no committed offset on any partition of this row's topic: not
  // judged (status NONE), no lag in seconds.
  bool no_commits = false;
  PartitionStatus status = PartitionStatus::kOk;
  std::string reason;
};

struct Refresh {
  std::string group;
  int64_t at_ms = 0;
  std::vector<Row> rows;
  // Configured topics on which the group has no committed offset at all (a
  // misspelt group, or one that never committed).
  std::vector<std::string> without_commits;
  std::string timestamp_error;  // why lag seconds are unknown, if they are
  bool AnyJudged() const {
    for (const auto& row : rows)
      if (!row.no_commits) return true;
    return false;
  }
};

// Reads `group`'s offsets, then the timestamps of the first uncommitted message
// of every lagging partition. `at_ms` is taken after both reads, so an age is
// never understated.
StatusOr<Refresh> Sample(KafkaConfig kafka, const std::string& group, int timeout_ms) {
  kafka.group_id = group;
  auto offsets = ReadGroupOffsets(kafka, timeout_ms);
  if (!offsets.ok()) return offsets.status();
  Refresh r;
  r.group = group;
  // Without commits: no committed offset on any partition of the topic while
  // it holds messages. A topic with nothing retained has nothing to be behind
  // on: judged as usual (caught up).
  std::set<std::string> committed, holding;
  for (const auto& po : *offsets) {
    if (po.committed >= 0) committed.insert(po.tp.topic);
    if (po.LagMessages() > 0) holding.insert(po.tp.topic);
  }
  for (const auto& topic : kafka.topics)
    if (!committed.count(topic) && holding.count(topic)) r.without_commits.push_back(topic);
  std::vector<PartitionOffset> probe;
  std::vector<size_t> probe_rows;
  for (auto& po : *offsets) {
    Row row;
    row.offsets = std::move(po);
    row.lag_messages = row.offsets.LagMessages();
    row.no_commits = std::find(r.without_commits.begin(), r.without_commits.end(),
                               row.offsets.tp.topic) != r.without_commits.end();
    if (row.no_commits) {
      row.reason = "not judged: the group has no committed offset on " + row.offsets.tp.topic;
    } else if (row.lag_messages > 0) {
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
    if (row.lag_messages == 0 && !row.no_commits) row.lag_seconds = 0;
  return r;
}

// Per-partition evaluators across refreshes; fills rate, status and reason.
class Judge {
 public:
  explicit Judge(StatusRules rules) : rules_(rules) {}

  void Evaluate(Refresh* r) {
    for (auto& row : r->rows) {
      if (row.no_commits) continue;
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

// Of the judged partitions.
PartitionStatus Worst(const Refresh& r) {
  PartitionStatus w = PartitionStatus::kOk;
  for (const auto& row : r.rows)
    if (!row.no_commits) w = std::max(w, row.status);
  return w;
}

// A row's STATUS: NONE when not judged.
std::string StatusWord(const Row& row) {
  return row.no_commits ? "NONE" : PartitionStatusName(row.status);
}

// The group's status: its worst judged partition, NONE when none is judged.
std::string GroupStatus(const Refresh& r) {
  return r.AnyJudged() || r.rows.empty() ? PartitionStatusName(Worst(r)) : "NONE";
}

// What --check fails on: a judged partition not OK, or a topic without commits.
bool NotOk(const Refresh& r) {
  return Worst(r) != PartitionStatus::kOk || !r.without_commits.empty();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& t : v) out += (out.empty() ? "" : ", ") + t;
  return out;
}

std::string NoCommitsLine(const Refresh& r) {
  const std::string topics = Joined(r.without_commits);
  return fmt::format(
      "group '{}' has no committed offsets on {}: a misspelt group, or one that never committed; "
      "its partitions there are not judged (NONE)",
      r.group, topics);
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
                     row.no_commits    ? "-"
                     : row.lag_seconds ? AgeCell(*row.lag_seconds)
                                       : "?",
                     row.rate ? Seconds(*row.rate) : "-", StatusWord(row), row.reason});
    if (row.no_commits) continue;
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
  std::string out = fmt::format("group {} at {}  {}  ({})\n", r.group, kafka.bootstrap_servers,
                                UtcTime(r.at_ms), mode);
  out += line(head);
  for (const auto& c : cells) out += line(c);
  if (r.AnyJudged() || r.rows.empty())
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
  if (!r.without_commits.empty()) out += NoCommitsLine(r) + "\n";
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
  j["group"] = r.group;
  j["bootstrap_servers"] = kafka.bootstrap_servers;
  j["interval_seconds"] = interval_s;
  j["window_samples"] = rules.window_samples;
  j["stop_after_seconds"] = static_cast<double>(rules.stop_after_ms) / 1000;
  j["freshness_target_seconds"] = rules.freshness_target_seconds;
  j["freshness_limit_seconds"] = rules.freshness_limit_seconds;
  j["status"] = GroupStatus(r);
  j["no_committed_offsets"] = r.without_commits;
  if (!r.without_commits.empty()) j["message"] = NoCommitsLine(r);
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
    p["status"] = StatusWord(row);
    p["reason"] = row.reason;
    j["partitions"].push_back(std::move(p));
    if (row.no_commits) continue;
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

// One line naming the group, the servers and the timeout.
std::string ReadError(const std::string& group, const KafkaConfig& kafka,
                      const std::string& timeout, const Status& st) {
  return fmt::format("lag: cannot read group '{}' from Kafka at {} (timeout {}): {}", group,
                     kafka.bootstrap_servers, timeout,
                     WithoutServers(st.message(), kafka.bootstrap_servers));
}

// The group list could not be had: one line, saying to name the groups instead.
std::string ListError(const char* option, const KafkaConfig& kafka, const Status& st) {
  std::string why = WithoutServers(st.message(), kafka.bootstrap_servers);
  const std::string prefix = "list consumer groups: ";
  if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
  return fmt::format(
      "lag {}: the brokers at {} cannot list consumer groups ({}); name the groups with --group "
      "NAME",
      option, kafka.bootstrap_servers, why);
}

bool HasCommits(const Refresh& r) {
  for (const auto& row : r.rows)
    if (row.offsets.committed >= 0) return true;
  return false;
}

struct GroupRead {
  std::string group;
  StatusOr<Refresh> refresh;
};

// The groups of one refresh, read: --group's (kafka.group_id when none), or
// with --all-groups / --list-groups every group the brokers list that has a
// committed offset on a configured topic (a group whose read failed is kept:
// it may have some). Fails only when the list cannot be had.
StatusOr<std::vector<GroupRead>> ReadGroups(const LagArgs& a, const KafkaConfig& kafka,
                                            int timeout_ms) {
  std::vector<GroupRead> out;
  if (!a.all_groups && !a.list_groups) {
    std::vector<std::string> groups = a.groups;
    if (groups.empty()) groups.push_back(kafka.group_id);
    std::set<std::string> seen;
    for (const auto& g : groups)
      if (seen.insert(g).second) out.push_back({g, Sample(kafka, g, timeout_ms)});
    return out;
  }
  auto listed = ListConsumerGroups(kafka, timeout_ms);
  if (!listed.ok()) return listed.status();
  for (const auto& g : *listed) {
    GroupRead read{g, Sample(kafka, g, timeout_ms)};
    if (read.refresh.ok() && !HasCommits(*read.refresh)) continue;
    out.push_back(std::move(read));
  }
  return out;
}

ExportedGroup ToExported(const Refresh& r, const KafkaConfig& kafka) {
  ExportedGroup g;
  g.group = r.group;
  g.at_ms = r.at_ms;
  for (const auto& t : kafka.topics)
    g.topic_has_commits[t] =
        std::find(r.without_commits.begin(), r.without_commits.end(), t) == r.without_commits.end();
  for (const auto& row : r.rows) {
    if (row.no_commits) continue;
    g.partitions.push_back({row.offsets.tp, row.offsets.committed, row.offsets.high,
                            row.lag_messages, row.lag_seconds, row.status});
  }
  return g;
}

struct Settings {
  KafkaConfig kafka;
  int64_t interval_ms = kDefaultIntervalMs;
  StatusRules rules;
  int timeout_ms = 10000;
  std::string timeout_text;  // as the error lines say it
};

// --serve: refresh every interval, publish, until SIGTERM/SIGINT (exit 0).
int Serve(const LagArgs& a, const Settings& s) {
  const KafkaConfig& kafka = s.kafka;
  // A broker that cannot list groups never will: say so at once.
  if (a.all_groups) {
    auto listed = ListConsumerGroups(kafka, s.timeout_ms);
    if (!listed.ok())
      return Fail(InvalidArgument(ListError("--all-groups", kafka, listed.status())),
                  ExitCodeForStart(listed.status()));
  }
  auto registry = std::make_shared<prometheus::Registry>();
  RegisterBuildInfo(*registry);
  LagExporter exporter(*registry);
  std::mutex mu;
  Readiness readiness{false, "no refresh yet"};
  auto server = HttpServer::Start(
      a.serve, registry,
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return readiness;
      },
      "--serve");
  if (!server.ok()) return Fail(server.status(), kExitUsage);
  std::printf("lag --serve: listening on port %d (/metrics, /healthz, /readyz), refresh every %s\n",
              (*server)->port(), FormatDurationMs(s.interval_ms).c_str());
  std::fflush(stdout);
  std::map<std::string, Judge> judges;
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    Readiness now;
    auto problem = [&](const std::string& what) {
      exporter.CountError();
      std::fprintf(stderr, "exposure-filter: %s %s; retrying\n",
                   UtcTime(SystemClock().NowMs()).c_str(), what.c_str());
      now.ready = false;
      now.reason += (now.reason.empty() ? "" : "; ") + what;
    };
    auto reads = ReadGroups(a, kafka, s.timeout_ms);
    if (!reads.ok()) {
      problem(ListError("--all-groups", kafka, reads.status()));
    } else {
      std::set<std::string> current;
      for (auto& [group, r] : *reads) {
        current.insert(group);
        if (!r.ok()) {
          problem(ReadError(group, kafka, s.timeout_text, r.status()));
          continue;
        }
        judges.try_emplace(group, s.rules).first->second.Evaluate(&r.value());
        exporter.Publish(ToExported(*r, kafka));
      }
      for (const auto& g : exporter.groups()) {
        if (current.count(g)) continue;
        exporter.Forget(g);
        judges.erase(g);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      readiness = now;
    }
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
    SleepUnlessStopped(std::max<int64_t>(s.interval_ms - spent, 0));
    if (StopRequested()) return kExitOk;
  }
}

// --list-groups: the groups with committed offsets on the configured topics.
int ListGroups(const LagArgs& a, const Settings& s) {
  auto reads = ReadGroups(a, s.kafka, s.timeout_ms);
  if (!reads.ok())
    return Fail(InvalidArgument(ListError("--list-groups", s.kafka, reads.status())),
                ExitCodeForStart(reads.status()));
  nlohmann::json names = nlohmann::json::array();
  for (const auto& read : *reads) {
    if (!read.refresh.ok())
      std::fprintf(stderr, "exposure-filter: %s\n",
                   ReadError(read.group, s.kafka, s.timeout_text, read.refresh.status()).c_str());
    names.push_back(read.group);
    if (!a.json) std::printf("%s\n", read.group.c_str());
  }
  if (a.json) std::printf("%s\n", nlohmann::json{{"groups", names}}.dump().c_str());
  return kExitOk;
}

// Options that do not go together, found after parsing: "" when none.
std::string Conflict(const LagArgs& a, bool interval_given) {
  if (!a.serve.empty()) {
    if (a.watch) return "--serve refreshes by itself: --watch does not apply (use --interval)";
    if (a.check) return "--serve and --check do not go together";
    if (a.json) return "--serve and --json do not go together";
  }
  if (a.list_groups && (a.watch || a.check || !a.serve.empty()))
    return "--list-groups prints the groups and exits: no --watch, --check or --serve";
  if ((a.all_groups || a.list_groups) && !a.groups.empty())
    return std::string(a.all_groups ? "--all-groups" : "--list-groups") +
           " finds the groups itself: no --group";
  if (interval_given && !a.watch_text.empty())
    return "--watch " + a.watch_text + " and --interval " + a.interval +
           ": give the refresh interval once";
  if (interval_given && !a.watch && a.serve.empty())
    return "--interval applies to --watch and --serve only";
  return "";
}

// The refresh interval option's text and name, checked: 100ms .. 1h.
StatusOr<int64_t> IntervalOption(const std::string& text, const char* option) {
  auto ms = DurationOption(text, option);
  if (!ms.ok()) return ms.status();
  if (*ms < 100 || *ms > 3600000)
    return InvalidArgument(std::string(option) + " " + text + ": must be 100ms .. 1h");
  return ms;
}

int Lag(const LagArgs& a) {
  ConfigArgs config_args = a.config;
  // -b after every --set: of the two, it wins (the environment comes before both).
  if (!a.brokers.empty()) config_args.overrides.push_back("kafka.bootstrap_servers=" + a.brokers);
  const bool interval_given = !a.interval.empty();
  if (std::string c = Conflict(a, interval_given); !c.empty())
    return Fail(InvalidArgument(c), kExitUsage);
  auto config = LoadOrReport(config_args);
  if (!config.ok()) return kExitConfig;
  SetUpLogging(a.log_level, config->log.format);
  InstallStopSignals();
  Settings s;
  s.kafka = config->kafka;
  if (interval_given) {
    auto w = IntervalOption(a.interval, "--interval");
    if (!w.ok()) return Fail(w.status(), kExitUsage);
    s.interval_ms = *w;
  } else if (a.watch && !a.watch_text.empty()) {
    auto w = IntervalOption(a.watch_text, "--watch");
    if (!w.ok()) return Fail(w.status(), kExitUsage);
    s.interval_ms = *w;
  }
  // The config's metrics.* are the defaults; a flag wins.
  int64_t target_ms = config->metrics.freshness_target_ms;
  if (!a.freshness_target.empty()) {
    auto t = DurationOption(a.freshness_target, "--freshness-target");
    if (!t.ok()) return Fail(t.status(), kExitUsage);
    target_ms = *t;
  }
  int64_t limit_ms = config->metrics.freshness_limit_ms;
  if (!a.freshness_limit.empty()) {
    auto l = DurationOption(a.freshness_limit, "--freshness-limit");
    if (!l.ok()) return Fail(l.status(), kExitUsage);
    limit_ms = *l;
  }
  auto timeout = DurationOption(a.timeout, "--timeout");
  if (!timeout.ok()) return Fail(timeout.status(), kExitUsage);
  if (*timeout > 600000) return Fail(InvalidArgument("--timeout: at most 10m"), kExitUsage);
  s.timeout_ms = static_cast<int>(*timeout);
  s.timeout_text = FormatDurationMs(*timeout);
  const KafkaConfig& kafka = s.kafka;

  const int64_t interval_ms = s.interval_ms;
  const double interval_s = static_cast<double>(interval_ms) / 1000;
  const size_t samples =
      a.samples > 0 ? a.samples : static_cast<size_t>(config->metrics.status_window);
  StatusRules& rules = s.rules;
  rules.window_samples = samples;
  rules.freshness_target_seconds = static_cast<double>(target_ms) / 1000;
  rules.freshness_limit_seconds = static_cast<double>(limit_ms) / 1000;
  // A consumer that has not committed for a whole window is gone. Fixed rather
  // than the evaluator's "span of a full window", so that the first refresh of
  // --watch already tells STOP, and one-shot and --watch agree.
  rules.stop_after_ms = static_cast<int64_t>(samples) * interval_ms;

  if (a.list_groups) return ListGroups(a, s);
  if (!a.serve.empty()) return Serve(a, s);

  std::map<std::string, Judge> judges;
  // --watch: refresh until Ctrl-C; --check --watch: one full window, then judge;
  // otherwise a single sample.
  const bool forever = a.watch && !a.check;
  const size_t refreshes = a.watch ? samples : 1;
  const bool tty = isatty(fileno(stdout));
  const std::string mode = a.watch
                               ? fmt::format("refresh {} s, window {} samples", interval_s, samples)
                               : fmt::format("single read; STOP after {} without a commit",
                                             FormatDurationMs(rules.stop_after_ms));
  const int timeout_ms = s.timeout_ms;
  size_t done = 0;
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    auto reads = ReadGroups(a, kafka, timeout_ms);
    if (!reads.ok()) {
      const std::string what = ListError("--all-groups", kafka, reads.status());
      if (done == 0 || !forever)
        return Fail(InvalidArgument(what), ExitCodeForStart(reads.status()));
      std::fprintf(stderr, "exposure-filter: %s %s; retrying\n",
                   UtcTime(SystemClock().NowMs()).c_str(), what.c_str());
    } else {
      std::vector<const Refresh*> shown;
      for (auto& [group, r] : *reads) {
        if (!r.ok()) {
          const std::string what = ReadError(group, kafka, s.timeout_text, r.status());
          if (done == 0 || !forever)
            return Fail(InvalidArgument(what), ExitCodeForStart(r.status()));
          std::fprintf(stderr, "exposure-filter: %s %s; retrying\n",
                       UtcTime(SystemClock().NowMs()).c_str(), what.c_str());
          continue;
        }
        judges.try_emplace(group, rules).first->second.Evaluate(&r.value());
        shown.push_back(&r.value());
      }
      ++done;
      const bool show = forever || done >= refreshes;
      if (show) {
        if (a.json) {
          for (const Refresh* r : shown)
            std::printf("%s\n", RenderJson(*r, kafka, interval_s, rules).dump().c_str());
        } else {
          // One section per group, a blank line between them.
          std::string table;
          for (const Refresh* r : shown)
            table += (table.empty() ? "" : "\n") + RenderTable(*r, kafka, mode);
          if (shown.empty() && a.all_groups)
            table = "no consumer group has committed offsets on " + Joined(kafka.topics) + "\n";
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
        bool not_ok = false;
        for (const Refresh* r : shown) not_ok |= NotOk(*r);
        return a.check && not_ok ? kExitData : kExitOk;
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
    R"(Groups: --group NAME (repeatable; default the config's kafka.group_id), or
--all-groups: every group with committed offsets on the configured topics, from
the brokers' group list (ListGroups; librdkafka's mock cluster, dev-kafka, cannot
list groups: name them with --group). One table section, or one JSON document,
per group. A group with no committed offset on a topic: its partitions there
show STATUS NONE (not judged), a line under the table says so (JSON
"no_committed_offsets"), and --check exits 7.

Columns: committed offset ("-": no commit for this partition, lag counts from
the low watermark), high watermark, LAG_MSGS = high - max(committed, low),
LAG_S = now - Kafka timestamp of the first uncommitted message (exact, read from
Kafka; 0.0s when caught up; 3.2s, 4m5s, 1d19h44m), RATE/S = committed offsets
per second since the previous refresh.

Status per partition (worst first; the window is --samples refreshes):
  ERR    LAG_S above --freshness-limit (default: the config's
         metrics.freshness_limit, 60 s)
  STOP   lagging and no commit for samples x interval (commit time from the
         daemon's commit metadata; a live daemon re-commits every second)
  STALL  lagging in every sample of a full window, committed offset not moving
  WARN   lag in messages grew at every sample of a full window, or LAG_S above
         --freshness-target (default: metrics.freshness_target, 10 s)
  OK     none of the above
--samples defaults to the config's metrics.status_window (10). A single read
(no --watch) judges ERR, STOP and WARN-by-seconds only: STALL and growth need a
full window (use --check --watch S --samples N).

--serve ADDR (e.g. 127.0.0.1:9465): refresh every --interval (2s) and publish
the daemon's partition metrics with a group label on http://ADDR/metrics
(/healthz, /readyz) until SIGTERM or Ctrl-C (exit 0).

Exit codes: 0 ok; 7 with --check: a partition not OK, or a group without
commits; 6 Kafka did not answer within --timeout (one line naming the servers);
3 Kafka refused the credentials, has no such topic, or cannot list groups;
2 bad usage; 4 bad config. docs/LAG.md, docs/CLI.md.)";

}  // namespace

Action AddLagCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "lag",
      "Show consumer groups' lag per partition in messages and seconds, or serve it as "
      "Prometheus metrics (from Kafka alone: works while the daemon is down)");
  auto a = std::make_shared<LagArgs>();
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("-b,--brokers", a->brokers,
                  "Bootstrap servers host:port[,...]; overrides kafka.bootstrap_servers");
  OneValueEach(cmd->add_option("--group", a->groups,
                               "Consumer group to read; repeatable (default: the config's "
                               "kafka.group_id)"))
      ->type_name("NAME");
  cmd->add_flag("--all-groups", a->all_groups,
                "Every group with committed offsets on the configured topics (needs the "
                "brokers' ListGroups: not the mock cluster)");
  cmd->add_flag("--list-groups", a->list_groups,
                "Print the groups --all-groups would show, one per line, and exit");
  auto* watch = cmd->add_option("--watch", a->watch_text,
                                "Refresh every DURATION (default 2s; 500ms, 0.5 = seconds) until "
                                "Ctrl-C; a table is redrawn in place on a terminal")
                    ->expected(0, 1)
                    ->type_name("[DURATION]");
  cmd->add_option("--interval", a->interval,
                  "Refresh interval of --watch and --serve (default 2s; --watch DURATION "
                  "says the same)")
      ->type_name("DURATION");
  cmd->add_option("--serve", a->serve,
                  "Serve Prometheus metrics of the groups on ADDR (host:port, port 0 = any) "
                  "at /metrics until SIGTERM")
      ->type_name("ADDR");
  cmd->add_flag("--json", a->json,
                "One JSON document per group per refresh (one line each); with --list-groups "
                "one {\"groups\": [...]}");
  cmd->add_flag("--check", a->check,
                "Exit 7 when any partition is WARN, STALL, STOP or ERR, or a group has no "
                "commits on a topic (with --watch: after one full window of samples)");
  cmd->add_option("--samples", a->samples,
                  "Window of the status rules, in refreshes (default: the config's "
                  "metrics.status_window, 10)")
      ->check(CLI::Range(2, 10000));
  cmd->add_option("--freshness-target", a->freshness_target,
                  "WARN above this lag in seconds (default: the config's "
                  "metrics.freshness_target, 10s)")
      ->type_name("DURATION");
  cmd->add_option("--freshness-limit", a->freshness_limit,
                  "ERR above this lag in seconds (default: the config's metrics.freshness_limit, "
                  "60s)")
      ->type_name("DURATION");
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
