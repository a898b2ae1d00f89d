#include "app/content_reindex.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "common/clock.h"
#include "contentdb/index.h"
#include "contentdb/map.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/options.h"
#include "redis/scan.h"

namespace ef::app {
namespace {

struct Counts {
  uint64_t filed = 0;    // map entries filed in the tables
  uint64_t bad = 0;      // map keys holding no map entry (skipped)
  uint64_t deleted = 0;  // revision 1 bucket hashes deleted
};

// Files the map entries of one node (`conn`) through `index`, printing progress
// to stderr every 5 s.
Status FileNode(RedisConnection& conn, const std::string& prefix, contentdb::ContentIndex& index,
                Counts* counts, int64_t* last_progress) {
  const size_t skip = prefix.size() + 3;  // "<p>cm{"
  Status failed;
  Status st = ScanKeys(conn, GlobEscape(prefix) + "cm{*", [&](const auto& keys) {
    std::vector<std::vector<std::string>> gets;
    for (const std::string& key : keys) gets.push_back({"GET", key});
    std::vector<RedisReply> replies;
    if (Status s = conn.Commands(gets, &replies); !s.ok()) {
      failed = s;
      return false;
    }
    std::vector<contentdb::ContentIndex::MapItem> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      const RedisReply& r = replies[i];
      std::optional<contentdb::MapValue> v;
      if (r.type == RedisReply::Type::kString) v = contentdb::DecodeMapValue(r.str);
      if (r.type == RedisReply::Type::kNil) continue;  // expired meanwhile
      if (!v || keys[i].size() <= skip || keys[i].back() != '}') {
        ++counts->bad;
        continue;
      }
      items.push_back({keys[i].substr(skip, keys[i].size() - skip - 1), v->simhash});
    }
    if (Status s = index.File(items); !s.ok()) {
      failed = s;
      return false;
    }
    counts->filed += items.size();
    if (SteadyNowMs() - *last_progress >= 5000) {
      *last_progress = SteadyNowMs();
      spdlog::info("content reindex: {} map entries filed so far", counts->filed);
    }
    return !StopRequested();
  });
  return failed.ok() ? st : failed;
}

// Deletes one node's revision 1 bucket hashes (`<p>cb{...}`, hashes only).
Status DeleteOldNode(RedisConnection& conn, const std::string& prefix, Counts* counts) {
  Status failed;
  Status st = ScanKeys(conn, GlobEscape(prefix) + "cb{*}", [&](const auto& keys) {
    std::vector<std::vector<std::string>> cmds;
    for (const std::string& key : keys) cmds.push_back({"TYPE", key});
    std::vector<RedisReply> types;
    if (Status s = conn.Commands(cmds, &types); !s.ok()) {
      failed = s;
      return false;
    }
    cmds.clear();
    for (size_t i = 0; i < keys.size(); ++i)
      if (types[i].str == "hash") cmds.push_back({"DEL", keys[i]});
    std::vector<RedisReply> replies;
    if (Status s = conn.Commands(cmds, &replies); !s.ok()) {
      failed = s;
      return false;
    }
    for (const RedisReply& r : replies) {
      if (r.type == RedisReply::Type::kError) {
        failed =
            RedisConnection::ErrorReplyStatus(r.str, "redis " + conn.address() + ": DEL: " + r.str);
        return false;
      }
      counts->deleted += static_cast<uint64_t>(r.integer);
    }
    return !StopRequested();
  });
  return failed.ok() ? st : failed;
}

}  // namespace

int ContentReindex(const ConfigArgs& args, bool keep_old) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitConfig;
  InstallStopSignals();
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);
  auto cluster = UseCluster(*redis);
  if (!cluster.ok()) return Fail(cluster.status(), ExitCodeForStart(cluster.status()));
  const std::string& prefix = config->filter.key_prefix;

  // The nodes to scan (every master), and the runner the index writes through.
  std::unique_ptr<ClusterRouter> router;
  std::unique_ptr<RedisConnection> single;
  std::vector<RedisConnection*> nodes;
  std::unique_ptr<contentdb::CommandRunner> runner;
  if (*cluster) {
    auto ro = ClusterOptionsFrom(*redis);
    if (!ro.ok()) return Fail(ro.status(), kExitConfig);
    router = std::make_unique<ClusterRouter>(std::move(*ro));
    if (Status s = router->Discover(); !s.ok()) return Fail(s, ExitCodeForStart(s));
    for (const SlotMap::Shard& shard : router->slot_map().shards()) {
      auto c = router->Connection(shard.master);
      if (!c.ok()) return Fail(c.status(), ExitCodeForStart(c.status()));
      nodes.push_back(*c);
    }
    runner = contentdb::ClusterRunner(*router);
  } else {
    auto c = RedisConnection::Connect(*redis);
    if (!c.ok()) return Fail(c.status(), ExitCodeForStart(c.status()));
    single = std::move(*c);
    nodes.push_back(single.get());
    runner = contentdb::SingleNodeRunner(*single);
  }
  auto index =
      contentdb::ContentIndex::Make(contentdb::ContentIndexOptionsFrom(*config), std::move(runner));
  if (!index.ok()) return Fail(index.status(), kExitConfig);

  Counts counts;
  int64_t last_progress = SteadyNowMs();
  const int64_t start = SteadyNowMs();
  for (RedisConnection* node : nodes) {
    Status s = FileNode(*node, prefix, **index, &counts, &last_progress);
    if (s.ok() && !keep_old && !StopRequested()) s = DeleteOldNode(*node, prefix, &counts);
    if (!s.ok()) {
      return Fail(s.Prefixed("content reindex (" + std::to_string(counts.filed) +
                             " entries filed so far; run it again)"),
                  ExitCodeForStart(s));
    }
    if (StopRequested()) {
      std::fprintf(stderr,
                   "exposure-filter: content reindex interrupted after %llu entries "
                   "filed; run it again\n",
                   static_cast<unsigned long long>(counts.filed));
      return kExitInterrupted;
    }
  }
  if (Status s = (*index)->MarkRevision(); !s.ok()) return Fail(s, ExitCodeForStart(s));
  std::printf(
      "content reindex: %llu map entries filed in generation %lld (%d tables, group bits %lld), "
      "%llu bad map values skipped, %s, %.1f s\n",
      static_cast<unsigned long long>(counts.filed),
      static_cast<long long>((*index)->layout().Generation((*index)->NowMs())),
      (*index)->scheme().tables(), static_cast<long long>(config->content.index_group_bits),
      static_cast<unsigned long long>(counts.bad),
      keep_old ? "revision 1 bucket hashes kept (--keep-old)"
               : (std::to_string(counts.deleted) + " revision 1 bucket hashes deleted").c_str(),
      (SteadyNowMs() - start) / 1000.0);
  return kExitOk;
}

}  // namespace ef::app
