// exposure-filter layout show|upgrade|stats: the layout stored at <prefix>meta,
// the explicit upgrade of a version-1 deployment to version 2 (docs/FORMAT.md,
// README runbook; safe while `run` runs: version-2 daemons that found the
// version-1 meta write stage 0 only and switch within 10 s of the upgrade), and
// what the filters hold: keys, users, bytes per user, keys by stages present.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_report.h"
#include "bloom/stages.h"
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

int Layouts(const ConfigArgs& args, bool upgrade, bool dry_run) {
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
  if (!upgrade) {
    if (stored.empty()) return kExitOk;
    if (CompareLayout(stored, *layout, key).ok()) {
      std::printf("the stored layout is the configured one\n");
    } else if (IsUpgradableV1(stored, *layout)) {
      std::printf(
          "the stored layout is the configured one's version 1 (stage 0 alone): "
          "`exposure-filter layout upgrade` turns it into version %d\n",
          layout->version());
    } else {
      std::fflush(stdout);
      return Fail(CompareLayout(stored, *layout, key), kExitLayout);
    }
    return kExitOk;
  }
  if (dry_run) {
    if (!stored.empty() && layout->version() == 2 && IsUpgradableV1(stored, *layout)) {
      std::printf("dry run: would replace the version-1 meta with the configured version 2\n");
      return kExitOk;
    }
    Status check = stored.empty() ? FailedPrecondition("no layout stored: nothing to upgrade")
                                  : CompareLayout(stored, *layout, key);
    std::printf("dry run: %s\n", check.ok() ? "already the configured layout, nothing to do"
                                            : check.message().c_str());
    return check.ok() ? kExitOk : kExitLayout;
  }
  bool changed = false;
  st = UpgradeMeta(target->meta(), *layout, &changed);
  if (!st.ok()) {
    // filter.stages is 1 (nothing to upgrade to) is the config's; a stored layout
    // that is not the configured one's version 1 is a mismatch.
    return Fail(st, st.code() == StatusCode::kInvalidArgument ? kExitConfig : ExitCodeForStart(st));
  }
  std::printf(changed ? "upgraded %s to version %d: running writers switch within 10 s, readers "
                        "on their next meta check\n"
                      : "%s is version %d already: nothing to do\n",
              key.c_str(), layout->version());
  return kExitOk;
}

// `layout stats`: SCANs the prefix's bucket keys (read-only; SCAN does not block
// Redis), STRLEN of each in pipelined rounds; on a Redis Cluster every master is
// scanned (a SCAN sees one node's keys only) and used_memory is their sum.
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
  std::vector<uint64_t> by_stages(layout.stage_table.size() + 1, 0);
  uint64_t keys = 0, bytes = 0, next_progress = 100000, used_memory = 0;
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
      for (const auto& k : r->elements[1].elements) cmds.push_back({"STRLEN", k.str});
      if (Status cs = conn->Commands(cmds, &replies); !cs.ok()) return Fail(cs);
      for (size_t i = 0; i < cmds.size(); ++i) {
        if (replies[i].type != RedisReply::Type::kInteger) continue;  // not a string of ours
        const std::string& key = cmds[i][1];
        const size_t open = layout.prefix.size();
        const size_t close = key.find('}', open + 1);
        if (close == std::string::npos) continue;
        users.insert(key.substr(open + 1, close - open - 1));
        const auto len = static_cast<uint64_t>(replies[i].integer);
        bytes += len;
        ++keys;
        ++by_stages[StagesPresent(layout.stage_table, len)];
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
  return kExitOk;
}

}  // namespace

Action AddLayoutCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("layout", "The bit layout stored in Redis (<prefix>meta)");
  cmd->require_subcommand(1);
  auto* show = cmd->add_subcommand("show", "Print the stored and the configured layout");
  auto* upgrade = cmd->add_subcommand(
      "upgrade",
      "Upgrade a version-1 layout to the configured version 2 (scalable filters for heavy "
      "users); safe while `run` runs");
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
  stats->add_flag("--json", *json, "One JSON object");
  return [=] {
    if (show->parsed()) return Layouts(*show_args, false, false);
    if (stats->parsed()) return Stats(*stats_args, *json);
    return Layouts(*up_args, true, *dry_run);
  };
}

}  // namespace ef::app
