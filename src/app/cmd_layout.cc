// exposure-filter layout show|upgrade|stats: the layout stored at <prefix>meta,
// the explicit upgrades (docs/FORMAT.md "Versions and upgrade"; safe while `run`
// runs): version 1 to 2 (daemons that found the version-1 meta write stage 0
// only and switch within 10 s), 1 or 2 to 3 (rule 9 from a bucket that begins at
// least --lead seconds later: every program reads the meta again before it), and
// what the filters hold: keys, users, bytes per user, keys by stages present.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "capacity/size_report.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/meta.h"
#include "redis/options.h"

namespace ef::app {
namespace {

void PrintFields(const char* title, const std::map<std::string, std::string>& fields) {
  std::printf("%s\n", title);
  for (const auto& [f, v] : fields) std::printf("  %-15s %s\n", f.c_str(), v.c_str());
}

// One Redis node, or a Redis Cluster (redis.cluster; auto asks the seeds): the
// meta commands go to the meta key's master through the router.
struct Target {
  std::unique_ptr<RedisConnection> conn;
  std::unique_ptr<ClusterRouter> router;
  MetaTarget meta() { return router ? MetaTarget(*router) : MetaTarget(*conn); }
};

StatusOr<Target> Connect(const RedisOptions& redis) {
  Target t;
  auto cluster = UseCluster(redis);
  if (cluster.ok() && *cluster) {
    auto o = ClusterOptionsFrom(redis);
    if (!o.ok()) return o.status();
    t.router = std::make_unique<ClusterRouter>(std::move(*o));
    if (Status st = t.router->Discover(); !st.ok()) return st;
    return t;
  }
  // auto with no seed answering: the single-node connect names the error.
  auto conn = RedisConnection::Connect(redis);
  if (!conn.ok()) return conn.status();
  t.conn = std::move(*conn);
  return t;
}

// Where one rollover stands: the buckets from `from_s` on are `what`, the live
// ones before it `before` until they age out (a window after from_s).
void PrintOneRollover(const Layout& l, const char* field, int64_t from_s, int64_t now_s,
                      const char* what, const char* before) {
  const int64_t window_s = l.window_seconds;
  const std::string from = FormatTimeRfc3339(from_s * 1000);
  const std::string done = FormatTimeRfc3339((from_s + window_s) * 1000);
  if (now_s < from_s) {
    std::printf(
        "rollover scheduled: buckets from %s (%s %lld) %s; it begins in %lld s and is "
        "complete at %s\n",
        from.c_str(), field, static_cast<long long>(from_s), what,
        static_cast<long long>(from_s - now_s), done.c_str());
  } else if (BucketStart(now_s - window_s, l.bucket_seconds) < from_s) {  // ReadBuckets' oldest
    std::printf(
        "rollover in progress: buckets from %s on %s, the live ones before it %s until they "
        "age out; complete at %s\n",
        from.c_str(), what, before, done.c_str());
  } else {
    std::printf("rollover complete: every live bucket %s (%s %s)\n", what, field, from.c_str());
  }
}

// What the stored version-3 or 4 meta means now: where its rollovers stand.
void PrintRollover(const Layout& stored, int64_t now_s) {
  if (!stored.v3) return;
  if (stored.v3_from == 0) {
    std::printf("every bucket follows rule 9 (version 3 since the first write)\n");
  } else {
    PrintOneRollover(stored, "v3_from", stored.v3_from, now_s, "follow rule 9", "rule 2");
  }
  if (!stored.v4) return;
  if (stored.v4_from == 0) {
    std::printf("every bucket's keys have a size class (version 4 since the first write)\n");
  } else {
    PrintOneRollover(stored, "v4_from", stored.v4_from, now_s,
                     "have keys with a size class (rule 11)", "version 3's one size");
  }
}

int Layouts(const ConfigArgs& args, bool upgrade, bool dry_run, int to_version,
            int64_t lead_seconds) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitConfig;
  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitConfig);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);
  auto target = Connect(*redis);
  if (!target.ok()) return Fail(target.status(), ExitCodeForStart(target.status()));
  const std::string key = MetaKey(layout->prefix);
  std::map<std::string, std::string> stored;
  Status st = ReadMetaFields(target->meta(), layout->prefix, &stored);
  if (!st.ok()) return Fail(st, ExitCodeForStart(st));
  if (stored.empty()) {
    std::printf("no layout stored at %s (nothing written with this prefix yet)\n", key.c_str());
  } else {
    PrintFields(("stored at " + key + ":").c_str(), stored);
  }
  PrintFields("configured:", layout->ToFields());
  const int64_t now_s = SystemClock().NowMs() / 1000;
  StatusOr<Layout> current =
      stored.empty() ? StatusOr<Layout>(FailedPrecondition("none")) : LayoutFromFields(stored, key);
  if (!stored.empty() && !current.ok()) {
    std::fflush(stdout);
    return Fail(current.status(), kExitLayout);
  }
  if (!upgrade) {
    if (stored.empty()) return kExitOk;
    if (CompareLayout(stored, *layout, key).ok()) {
      std::printf("the stored layout is the configured one (version %d)\n", current->version());
      if (current->version() == 2)
        std::printf("`exposure-filter layout upgrade --to 3` moves it to version 3 (rule 9)\n");
      if (current->version() == 3)
        std::printf(
            "`exposure-filter layout upgrade --to 4` moves it to version 4 (rule 11's size "
            "classes)\n");
      PrintRollover(*current, now_s);
    } else if (IsUpgradableV1(stored, *layout)) {
      std::printf(
          "the stored layout is the configured one's version 1 (stage 0 alone): "
          "`exposure-filter layout upgrade --to 2` (or --to 3) upgrades it\n");
    } else {
      std::fflush(stdout);
      return Fail(CompareLayout(stored, *layout, key), kExitLayout);
    }
    return kExitOk;
  }
  if (to_version == 0) to_version = layout->version() >= 3 ? layout->version() : 2;
  const int64_t v3_from = V3FromAfter(now_s, lead_seconds, layout->bucket_seconds);
  bool changed = false;
  Layout after;
  st = UpgradeMeta(target->meta(), *layout, to_version, v3_from, dry_run, &changed, &after);
  if (!st.ok()) {
    // filter.stages is 1 (nothing to upgrade to) is the config's; a stored layout
    // that is not the configured one's earlier version is a mismatch.
    return Fail(st, st.code() == StatusCode::kInvalidArgument ? kExitConfig : ExitCodeForStart(st));
  }
  if (!changed) {
    std::printf("%s%s is version %d already: nothing to do\n", dry_run ? "dry run: " : "",
                key.c_str(), after.version());
  } else if (dry_run) {
    std::printf("dry run: would replace the version-%d meta with version %d", current->version(),
                to_version);
    if (to_version == 3)
      std::printf(", v3_from %lld (%s)", static_cast<long long>(after.v3_from),
                  FormatTimeRfc3339(after.v3_from * 1000).c_str());
    if (to_version == 4)
      std::printf(", v4_from %lld (%s)", static_cast<long long>(after.v4_from),
                  FormatTimeRfc3339(after.v4_from * 1000).c_str());
    std::printf("\n");
    return kExitOk;
  } else if (to_version == 4) {
    std::printf(
        "upgraded %s to version 4: keys of buckets from %s (v4_from %lld) on are created with "
        "a size class (rule 11); running writers and readers read the meta again within 10 s, "
        "before it\n",
        key.c_str(), FormatTimeRfc3339(after.v4_from * 1000).c_str(),
        static_cast<long long>(after.v4_from));
  } else if (to_version == 3) {
    std::printf(
        "upgraded %s to version 3: buckets from %s (v3_from %lld) on follow rule 9; "
        "running writers and readers read the meta again within 10 s, before it\n",
        key.c_str(), FormatTimeRfc3339(after.v3_from * 1000).c_str(),
        static_cast<long long>(after.v3_from));
  } else {
    std::printf(
        "upgraded %s to version 2: running writers switch within 10 s, readers on their "
        "next meta check\n",
        key.c_str());
  }
  PrintRollover(after, now_s);
  return kExitOk;
}

// The names of the live buckets (and the next) whose keys have a size class
// (version 4: from v4_from on); empty below version 4.
std::unordered_set<std::string> ClassedBucketNames(const Layout& l, int64_t now_s) {
  std::unordered_set<std::string> names;
  if (!l.v4) return names;
  const int64_t bs = l.bucket_seconds;
  for (int64_t b = BucketStart(now_s - l.window_seconds, bs) - bs; b <= BucketStart(now_s, bs) + bs;
       b += bs)
    if (l.HasClass(b)) names.insert(FormatBucket(b, bs));
  return names;
}

// `layout stats`: SCANs the prefix's bucket keys (read-only; SCAN does not block
// Redis), STRLEN of each in pipelined rounds (and, for a key with a size class,
// GETRANGE of its header: its stages are counted with its class's table); on a
// Redis Cluster every master is scanned (a SCAN sees one node's keys only) and
// used_memory is their sum.
int Stats(const ConfigArgs& args, bool json) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitConfig;
  auto configured = LayoutFromConfig(config->filter);
  if (!configured.ok()) return Fail(configured.status(), kExitConfig);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);
  auto target = Connect(*redis);
  if (!target.ok()) return Fail(target.status(), ExitCodeForStart(target.status()));
  Layout layout;
  bool found = false;
  Status st = ReadLayout(target->meta(), *configured, &layout, &found);
  if (!st.ok()) return Fail(st, ExitCodeForStart(st));
  // The nodes to scan: the one node, or every master of the cluster.
  std::vector<RedisConnection*> nodes;
  if (target->router) {
    for (const SlotMap::Shard& shard : target->router->slot_map().shards()) {
      auto c = target->router->Connection(shard.master);
      if (!c.ok()) return Fail(c.status());
      nodes.push_back(*c);
    }
  } else {
    nodes.push_back(target->conn.get());
  }
  const std::string pattern = layout.prefix + "{*";
  std::unordered_set<std::string> users;
  std::vector<uint64_t> by_stages(33, 0);  // a class's table may have up to 32 stages
  std::map<uint32_t, uint64_t> by_class;   // version 4: keys per size class
  const std::unordered_set<std::string> classed =
      ClassedBucketNames(layout, SystemClock().NowMs() / 1000);
  uint64_t keys = 0, bytes = 0, next_progress = 100000, used_memory = 0, invalid = 0;
  std::vector<std::vector<std::string>> cmds;
  std::vector<RedisReply> replies;
  const bool tty = isatty(2);
  for (RedisConnection* conn : nodes) {
    std::string cursor = "0";
    do {
      auto r = conn->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      if (!r.ok()) return Fail(r.status());
      if (r->type != RedisReply::Type::kArray || r->elements.size() != 2)
        return Fail(Internal("redis " + conn->address() + ": SCAN: unexpected reply" +
                             (r->type == RedisReply::Type::kError ? " " + r->str : "")));
      cursor = r->elements[0].str;
      cmds.clear();
      for (const auto& k : r->elements[1].elements) {
        cmds.push_back({"STRLEN", k.str});
        const size_t colon = k.str.rfind(':');
        if (!classed.empty() && colon != std::string::npos &&
            classed.count(k.str.substr(colon + 1)))
          cmds.push_back({"GETRANGE", k.str, "0", "0"});  // its class header
      }
      if (Status cs = conn->Commands(cmds, &replies); !cs.ok()) return Fail(cs);
      for (size_t i = 0; i < cmds.size(); ++i) {
        if (cmds[i][0] != "STRLEN") continue;
        const bool has_header = i + 1 < cmds.size() && cmds[i + 1][0] == "GETRANGE";
        if (replies[i].type != RedisReply::Type::kInteger) continue;  // not a string of ours
        const std::string& key = cmds[i][1];
        const size_t open = layout.prefix.size();
        const size_t close = key.find('}', open + 1);
        if (close == std::string::npos) continue;
        users.insert(key.substr(open + 1, close - open - 1));
        const auto len = static_cast<uint64_t>(replies[i].integer);
        bytes += len;
        ++keys;
        const std::vector<Stage>* table = &layout.stage_table;
        if (has_header && len > 0) {
          // TableFor reads the header byte alone; the bucket is one with classes.
          table = layout.TableFor(replies[i + 1].str, layout.v4_from);
          if (!table) {
            ++invalid;
            continue;
          }
          ++by_class[static_cast<uint8_t>(replies[i + 1].str[0]) - 1u];
        }
        ++by_stages[std::min<size_t>(StagesPresent(*table, len), by_stages.size() - 1)];
      }
      if (tty && keys >= next_progress) {
        std::fprintf(stderr, "\rscanned %llu keys", static_cast<unsigned long long>(keys));
        next_progress += 100000;
      }
    } while (cursor != "0");
    if (auto info = conn->Command({"INFO", "memory"}); info.ok()) {
      const size_t at = info->str.find("used_memory:");
      if (at != std::string::npos)
        used_memory += std::strtoull(info->str.c_str() + at + 12, nullptr, 10);
    }
  }
  if (tty && next_progress > 100000) std::fprintf(stderr, "\n");
  const double n_users = static_cast<double>(users.size());
  const double per_user = users.empty() ? 0 : static_cast<double>(bytes) / n_users;
  const double mem_per_user = users.empty() ? 0 : static_cast<double>(used_memory) / n_users;
  if (json) {
    nlohmann::json j;
    j["version"] = layout.version();
    j["keys"] = keys;
    j["users"] = users.size();
    j["value_bytes"] = bytes;
    j["value_bytes_per_user"] = per_user;
    j["redis_used_memory"] = used_memory;
    j["redis_used_memory_per_user"] = mem_per_user;
    nlohmann::json by = nlohmann::json::object();
    for (size_t n = 1; n < by_stages.size(); ++n)
      if (by_stages[n]) by[std::to_string(n)] = by_stages[n];
    j["keys_by_stages"] = by;
    if (layout.v4) {
      nlohmann::json classes = nlohmann::json::object();
      for (const auto& [c, n] : by_class) classes[std::to_string(c)] = n;
      j["keys_by_class"] = classes;
      j["keys_without_class"] = invalid;
    }
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("layout version %d at %s: %llu keys of %zu users\n", layout.version(),
              MetaKey(layout.prefix).c_str(), static_cast<unsigned long long>(keys), users.size());
  // Human units here; --json keeps the raw byte counts.
  const auto human = [](double b) { return FormatBytesHuman(static_cast<uint64_t>(b + 0.5)); };
  std::printf("  values   %s, %s per user, %s per key\n", FormatBytesHuman(bytes).c_str(),
              human(per_user).c_str(),
              human(keys ? static_cast<double>(bytes) / static_cast<double>(keys) : 0.0).c_str());
  std::printf("  redis    used_memory %s (whole db%s), %s per user\n",
              FormatBytesHuman(used_memory).c_str(),
              nodes.size() > 1 ? ", sum over the masters" : "", human(mem_per_user).c_str());
  std::printf("  keys by stages present:\n");
  for (size_t n = 1; n < by_stages.size(); ++n) {
    if (!by_stages[n]) continue;
    std::printf(
        "    %2zu stage(s)  %12llu keys  %6.2f%%%s\n", n,
        static_cast<unsigned long long>(by_stages[n]),
        keys ? 100.0 * static_cast<double>(by_stages[n]) / static_cast<double>(keys) : 0.0,
        n == layout.stage_table.size() && layout.version() == 2 ? "  (the stage limit)" : "");
  }
  if (!layout.v4) return kExitOk;
  std::printf("  keys by size class (version 4, buckets from v4_from):\n");
  for (const auto& [c, n] : by_class)
    std::printf("    class %2u (%6llu B)  %12llu keys\n", c,
                static_cast<unsigned long long>(SizeClassBytes(c)),
                static_cast<unsigned long long>(n));
  if (invalid)
    std::printf("  %llu key(s) whose header names no class (left out by readers)\n",
                static_cast<unsigned long long>(invalid));
  return kExitOk;
}

}  // namespace

Action AddLayoutCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("layout", "The bit layout stored in Redis (<prefix>meta)");
  cmd->require_subcommand(1);
  auto* show = cmd->add_subcommand("show", "Print the stored and the configured layout");
  auto* upgrade = cmd->add_subcommand(
      "upgrade",
      "Upgrade the stored layout: --to 2 (version 1 to scalable filters for heavy users), "
      "--to 3 (rule 9's positions from a coming bucket on) or --to 4 (size classes from a "
      "coming bucket on); safe while `run` runs");
  auto* stats = cmd->add_subcommand(
      "stats", "Scan the filters (read-only): keys, users, bytes per user, keys by stages");
  auto show_args = std::make_shared<ConfigArgs>();
  auto up_args = std::make_shared<ConfigArgs>();
  auto stats_args = std::make_shared<ConfigArgs>();
  auto dry_run = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  AddConfigOptions(show, show_args.get(), false);
  AddConfigOptions(upgrade, up_args.get(), false);
  AddConfigOptions(stats, stats_args.get(), false);
  upgrade->add_flag("--dry-run", *dry_run, "Say what would change, change nothing");
  auto to_version = std::make_shared<int>(0);  // 0: the configured version
  upgrade
      ->add_option("--to", *to_version,
                   "The version to upgrade to: 2, 3 or 4 (default: the configured "
                   "filter.layout_version, 3 by default)")
      ->check(CLI::IsMember({2, 3, 4}));
  auto lead = std::make_shared<int64_t>(60);
  upgrade
      ->add_option("--lead", *lead,
                   "--to 3 or 4: seconds from now before the first bucket of the new version "
                   "may begin, at least 20 (every running program reads the meta again within "
                   "10 s)")
      ->check(CLI::Range(int64_t{20}, int64_t{86400 * 366}))
      ->default_val(60);
  stats->add_flag("--json", *json, "One JSON object");
  return [=] {
    if (show->parsed()) return Layouts(*show_args, false, false, 2, 0);
    if (stats->parsed()) return Stats(*stats_args, *json);
    return Layouts(*up_args, true, *dry_run, *to_version, *lead);
  };
}

}  // namespace ef::app
