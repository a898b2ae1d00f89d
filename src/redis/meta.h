// The `<prefix>meta` hash (docs/FORMAT.md rule 7; version 2 adds the stage fields).
#pragma once

#include <map>
#include <string>

#include "bloom/layout.h"
#include "common/status.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace ef {

class ClusterRouter;

// Where the meta commands go: one connection, or a Redis Cluster router (which
// sends them to the meta key's master, following redirections). Implicit, so
// every function below takes either.
class MetaTarget {
 public:
  MetaTarget(RedisConnection& conn) : conn_(&conn) {}      // NOLINT: implicit on purpose
  MetaTarget(ClusterRouter& router) : router_(&router) {}  // NOLINT
  StatusOr<RedisReply> Command(const std::string& key, std::vector<std::string> args);
  std::string address() const;  // "host:port", or "cluster" for a router

 private:
  RedisConnection* conn_ = nullptr;
  ClusterRouter* router_ = nullptr;
};

// Reads the meta hash (empty map if absent). kInternal: the key is not a hash;
// kPermissionDenied: NOAUTH/NOPERM; kUnavailable: connection lost or another error
// reply.
Status ReadMetaFields(MetaTarget conn, const std::string& prefix,
                      std::map<std::string, std::string>* stored);

// Writers: stores the layout if no meta exists (atomically, one Lua script), else
// compares, and sets *effective to the layout to write with:
// - the stored fields equal `layout`'s (CompareLayout: version 2 and 3 alike):
//   the stored layout (its version, and v3_from: each bucket's position rule);
// - `layout` is version 2 and the stored meta is the version-1 meta of its stage 0
//   (IsUpgradableV1): `layout.SingleStage()` — a v2 program keeps writing v1 until
//   the operator upgrades the meta (`exposure-filter layout upgrade`);
// - else kFailedPrecondition naming each differing field with both values.
// Errors as ReadMetaFields (kPermissionDenied e.g. for an ACL without EVAL).
// create_as: what to store when no meta exists, if not `layout` itself. A writer
// that has read a stored layout passes it, so a lost meta comes back as the
// layout its buckets were written with (a version-2 meta as version 2, a
// version-3 one with its v3_from), never as the configured one, whose rules
// would read those buckets wrong.
Status EnsureMeta(MetaTarget conn, const Layout& layout, Layout* effective,
                  const Layout* create_as = nullptr);

// EnsureMeta for redis.* options, at a program's start (`run`, `replay`):
// through a Redis Cluster router when UseCluster says so (redis/cluster.h), else
// on a connection to the one node; connects for this call only. A start that
// finds no meta but bucket keys of the prefix (`<prefix>{user}:<bucket>`, SCAN
// of every master; served rings do not count) stores nothing and fails
// kFailedPrecondition naming a key and how to restore the meta: the rules those
// buckets were written with are unknown, and the configured ones could read
// them as unseen. Errors as EnsureMeta, plus connection errors (kUnavailable).
Status EnsureMetaAt(const RedisOptions& redis, const Layout& layout, Layout* effective);

// A bucket key of `prefix` on `conn`'s node (SCAN MATCH `<prefix>{*}:*`, served
// rings skipped), "" if none. kUnavailable on a connection failure.
StatusOr<std::string> FindBucketKey(RedisConnection& conn, const std::string& prefix);

// Readers: the layout to read with. If meta exists, its stage-0 fields (m, k, seed,
// prefix, bucket_seconds, window_seconds) must equal the configured ones
// (kFailedPrecondition naming the differences), and *effective is the stored
// layout (version 1: one stage; version 2: the stored stage parameters). If not,
// *effective = `layout` and *stored_found = false.
Status ReadLayout(MetaTarget conn, const Layout& layout, Layout* effective, bool* stored_found);

// `exposure-filter layout upgrade --to N`: replaces a stored meta of an earlier
// version by `layout`'s version-N meta (N = 2: stages; N = 3: stages and rule 9
// from bucket v3_from on) in one atomic compare-and-set step (Lua: if the hash
// changed since it was read, nothing is written and the error says to run it
// again). The stored meta must be `layout`'s stage 0 as version 1, or (N = 3)
// `layout` as version 2 (else kFailedPrecondition naming the differing fields).
// OK and *changed = false if it is version N or later and agrees with `layout`.
// *stored_after: the stored layout afterwards. dry_run: every check, no write
// (*changed and *stored_after say what the upgrade would do). Errors as EnsureMeta.
Status UpgradeMeta(MetaTarget conn, const Layout& layout, int to_version, int64_t v3_from,
                   bool dry_run, bool* changed, Layout* stored_after);

}  // namespace ef
