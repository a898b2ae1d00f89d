// Does a Redis node, and every replica of it, have our module "ef" (EF.SETBITS,
// redis-module/README.md)? What `redis.write_mode: auto` asks at start and on
// every reconnect before it writes with EF.SETBITS: the module replicates the
// command verbatim, so a replica without it would reject every EF.SETBITS of
// its master and silently lose those bits (tests/module show it).
//
// One node is asked `EF.VERSION` (an integer: the module's version); when that
// is refused (an ACL without the command) `MODULE LIST` (name "ef", "ver").
// "ERR unknown command" = no module. Unless the node has a usable module (any
// other answer: none, too old, cannot tell) the result is "not usable" without
// asking the replicas (replicas_total stays 0). Else the node's replicas are those of its
// `INFO replication` (slaveN:ip=...,port=...), each reached with a connection
// of its own with the same options (auth, db, timeouts) but its host and port,
// and asked the same. A replica that cannot be reached or answers neither
// question counts as without the module ("unknown" is not usable).
//
// The node is also asked whether its module has EF.CLASSKEY (layout v4's native
// creation step, redis-module/README.md): `EF.CLASSKEY` with no arguments, whose
// arity error (or OOM, READONLY: it is flagged write) says it exists; "unknown
// command" (a module from before it) or NOPERM (an ACL without it) say the
// writer creates keys with the Lua script.
// Replicas are not asked: EF.CLASSKEY replicates its effect (SET, EXPIREAT).
//
// Not thread-safe on `conn` (uses it like any caller); blocks for one round trip
// on `conn` plus a connect and one or two round trips per replica (connect and
// command timeouts from `options`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace ef {

// The oldest module version whose EF.SETBITS has the contract the writer needs
// (reply = bits that were 0 before; expiry only if missing).
inline constexpr int64_t kMinEfModuleVersion = 1;

struct ModuleProbeResult {
  bool module_on_master = false;  // the probed node has module ef >= kMinEfModuleVersion
  int64_t master_version = 0;     // its module version; 0 = none or unknown
  bool class_key = false;         // the probed node runs EF.CLASSKEY for this user
  int replicas_total = 0;         // replicas listed by INFO replication (0 if not asked)
  int replicas_with_module = 0;   // of them: reached and have module ef >= kMinEfModuleVersion
  // The replicas asked, as ReplicaSet spells them ("" if not asked).
  std::string replica_set;
  // "" when the node and all its replicas have the module; else one line naming
  // the node (and the first replica) at fault and why.
  std::string reason;
  bool usable() const { return reason.empty(); }
};

// Probes the node behind `conn` and its replicas (`options`: those `conn` was
// made with; replicas get the same but their own host and port). A failed
// status only when `conn` itself fails (I/O, timeout: reconnect and probe again);
// everything a node answers, errors included, ends up in the result.
StatusOr<ModuleProbeResult> ProbeModule(RedisConnection& conn, const RedisOptions& options);

// The replicas an `INFO replication` text lists: "host:port" of each slaveN line,
// sorted, comma-separated ("" for none). Writers compare it from write to write:
// a replica that attached since the probe has not been asked.
std::string ReplicaSet(std::string_view info_replication);

// ReplicaSet of the node behind `conn` (one round trip). A failed status when
// `conn` fails, or kUnavailable naming the reply when INFO is refused.
StatusOr<std::string> ReadReplicaSet(RedisConnection& conn);

}  // namespace ef
