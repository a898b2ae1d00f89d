// Client::Impl: the state one exposure_filter::Client (include/exposure_filter/
// client.h) shares between the threads that call it, over the daemon's own read
// path (read/bloom_reader.h PlanRead + TestItems, redis/meta.h ReadLayout).
// Its code is split by concern:
//   client.cc        the public API: Create, Seen*, Unseen, SeenBatch*, stats, layout
//   call.cc          a call: its users' keys planned, one MGET per user, the
//                    candidates tested; errors and fail-open; Ping
//   layout_watch.cc  the layout calls read with, and when to read the meta again
//   single_node.cc   one Redis: the connection pool, connect, one retry on a
//                    connection the server closed while idle, MGET, PING
//   cluster_calls.cc Redis Cluster: pooled routers, MGET by slot with the fallback
//                    for a migrating slot (one GET per key), PING per master
// Thread-safety: the fields marked "guarded by layout_mu" are read and written
// under it; counters, ready, meta_known, connected_once and layout_stale are
// atomics; a pooled connection or router is used by the one thread holding its
// slot (client/pool.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloom/layout.h"
#include "client/pool.h"
#include "contentdb/cluster_cache.h"
#include "exposure_filter/client.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "redis/meta.h"
#include "redis/options.h"

namespace exposure_filter {
namespace client_internal {

using Clock = std::chrono::steady_clock;

// The name of the timeouts of calls, in messages (RedisOptions::*_timeout_name).
inline constexpr const char* kLeftOfDeadline = "what was left of the call's deadline";

// The public error code of a Status.
ErrorCode CodeOf(const ef::Status& st);

inline int64_t Millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

struct Counters {
  std::atomic<uint64_t> calls{0}, users{0}, candidates{0}, seen{0}, failed_open{0}, errors{0},
      redis_errors{0}, timeouts{0}, reconnects{0}, layout_reads{0}, stale_retries{0}, served{0},
      marked{0}, mark_errors{0}, near_duplicates{0}, cluster_lookups{0}, clusters_unknown{0},
      map_bad_values{0}, cluster_cache_hits{0}, cluster_cache_misses{0}, invalid_keys{0};
};

inline void Add(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// One user's part of a call.
struct Work {
  std::string_view user;
  ef::ItemList candidates;
  ef::ItemList clusters = {};  // empty, or one per candidate ("" = unknown)
};

// filter.near_duplicates: the clusters a call looks up (docs/CONTENT.md rule 5,
// "Where the cluster comes from"): in the local cache (call.cc PlanLookups), and
// the content map entries of the rest, read with the call's MGETs.
struct Lookups {
  // Per looked-up candidate (no cluster given), in user order:
  std::vector<std::pair<size_t, size_t>> of;  // (index into valid users, candidate)
  std::vector<std::string> clusters;          // the cluster, "" = unknown (after the read)
  std::vector<uint8_t> self;  // 1: the cache says it is its own cluster (clusters[i] stays "")
  // Those the cache did not answer, read from Redis:
  std::vector<std::string> keys;        // <prefix>cm{item} (one Redis: moved into its MGET)
  std::vector<size_t> key_of;           // per key: its index into `of`
  std::vector<std::string_view> items;  // per key: the item (the call's candidate)
  std::vector<ef::Hash128> hashes;      // per key: the item's hash (with the cache only)
  uint64_t hits = 0;                    // answered by the cache
  uint64_t unknown = 0;                 // after the read: no usable entry (cache or map)
  uint64_t bad = 0;                     // of those, map entries read that did not decode
};

// Redis Cluster: one pooled router (with its own connection per master) and when
// its meta was read.
struct RouterSlot {
  explicit RouterSlot(ef::ClusterRouterOptions o) : router(std::move(o)) {}
  ef::ClusterRouter router;
  bool meta_read = false;  // the meta was read through this router once
  bool meta_due = false;   // a call failed since: re-read the meta (rate-limited)
  Clock::time_point meta_attempt{};
};

// A call's users, planned (call.cc PlanUsers), then answered in place.
struct CallPlan {
  std::vector<Result> results;      // one per user; a user that cannot be read has failed
  std::vector<ef::ReadPlan> plans;  // per user: its keys (moved into the MGETs), bucket starts
  std::vector<size_t> valid;        // the users with a plan, in order
  uint64_t candidates = 0;          // over all users
};

// What a call's MGETs brought back (call.cc ReadUsers), per valid user v.
struct CallReplies {
  // Standalone: the values, views into the thread's receive buffers.
  std::vector<ef::RedisConnection::ArrayReply>* single = nullptr;
  // Cluster: one array per user, and each user's status (a master down fails its
  // users only); user_status empty = all OK.
  std::vector<ef::RedisReply> cluster;
  std::vector<ef::Status> user_status;
  size_t failed_users = 0;

  bool answered(size_t v) const { return user_status.empty() || user_status[v].ok(); }
  // User v's values: the buckets, then the served ring. A cluster user's are
  // views put into *scratch (valid until the next call with it).
  const std::vector<std::string_view>& values(size_t v,
                                              std::vector<std::string_view>* scratch) const;
};

// An error reply to MGET: kPermissionDenied for an ACL refusal, else kUnavailable.
ef::Status MgetReplyError(const std::string& where, std::string_view error);

// single_node.cc keeps the standalone MGET buffers per thread, reused from call
// to call; after each call, one that grew past its keep size is given back.
void TrimThreadBuffers();

}  // namespace client_internal

struct Client::Impl {
  using Clock = client_internal::Clock;
  using Status = ef::Status;
  using Work = client_internal::Work;
  using RouterSlot = client_internal::RouterSlot;

  ClientOptions options;
  ef::Layout configured;
  // The served ring's shape and TTL (serve.served_items, served_fpr, served_ttl).
  uint32_t served_capacity = 500, served_width = 3;
  int64_t served_ttl_ms = 0;
  // redis.wait_replicas / wait_timeout: a mark waits for that many replicas.
  int64_t wait_replicas = 0, wait_timeout_ms = 0;
  // filter.near_duplicates (docs/CONTENT.md rule 5).
  bool near_duplicates = false;
  // Its local cache of the content map (null: none) and the clock of its times.
  std::unique_ptr<ef::contentdb::SharedClusterCache> cluster_cache;
  std::function<int64_t()> cache_now_ms;
  ef::RedisOptions redis;
  ef::client::ConnectionPool pool;
  // Redis Cluster (UseCluster): routers instead of connections.
  bool cluster = false;
  ef::ClusterRouterOptions router_options;
  ef::client::Pool<RouterSlot> routers;

  mutable std::mutex layout_mu;
  std::shared_ptr<const ef::Layout> layout;  // guarded by layout_mu
  bool stored = false;                       // guarded by layout_mu
  // A meta was read once and is gone now (DEL, FLUSHALL): `layout` stays the last
  // stored one (never the configured one: its rules could read the buckets
  // written before as unseen) and `stored` is false until the meta is back.
  bool meta_lost = false;  // guarded by layout_mu
  // When the meta was last read, or a re-read was last claimed (LayoutRecheckDue).
  Clock::time_point layout_checked;  // guarded by layout_mu
  // When the meta was last read successfully (RefreshLayout).
  Clock::time_point layout_read;  // guarded by layout_mu
  // A re-read failed since the last successful one (LayoutRecheckFailed, or a
  // router's first read): only then can the copy grow older than its period,
  // so only then do calls pay for LayoutFresh (a lock) on Redis Cluster.
  std::atomic<bool> layout_read_failed{false};
  // A value longer than the layout allows was read: re-read the meta now.
  std::atomic<bool> layout_stale{false};
  Clock::time_point stale_reread{};  // guarded by layout_mu: when one last did so

  std::atomic<bool> ready{false};
  std::atomic<bool> meta_known{false};  // cluster: some router read the meta
  std::atomic<bool> connected_once{false};
  client_internal::Counters counters;

  Impl(ClientOptions o, ef::Layout l, ef::RedisOptions r)
      : options(std::move(o)),
        configured(std::move(l)),
        redis(std::move(r)),
        pool(options.pool_size),
        routers(options.pool_size),
        layout(std::make_shared<const ef::Layout>(configured)) {}

  // --- call.cc
  std::vector<Result> Run(const Work* work, size_t n, const CallOptions& call);
  // One attempt of Run. With `first`, a value longer than the layout allows
  // marks the layout stale and returns at once with *redo set (nothing tested).
  std::vector<Result> RunOnce(const Work* work, size_t n, const CallOptions& call, bool first,
                              bool* redo);
  bool Ping(std::chrono::milliseconds deadline);
  // RunOnce's steps. Each user's keys; a user that cannot be read (clusters not
  // one per candidate, a user PlanRead refuses) fails alone, not fail-open.
  client_internal::CallPlan PlanUsers(const Work* work, size_t n, int64_t now_s);
  // The MGETs of `commands` (one per valid user, then on one Redis the lookups'),
  // on a pooled connection or router. A cluster user whose master did not answer
  // fails alone (plan->results); the status returned fails every valid user.
  Status ReadUsers(const std::vector<std::vector<std::string>>& commands,
                   client_internal::Lookups* lookups, Clock::time_point start,
                   Clock::time_point deadline, client_internal::CallPlan* plan,
                   client_internal::CallReplies* replies);
  // Whether some answered user's bucket value is longer than `layout` allows
  // (NoteValueLength: the layout is then marked stale).
  bool AnyLongValue(const client_internal::CallReplies& replies, size_t users,
                    const ef::Layout& layout);
  // Tests each answered user's candidates against its values into its result;
  // counts what was seen, served and near-duplicate.
  void TestUsers(const Work* work, const CallOptions& call, const client_internal::Lookups& lookups,
                 const client_internal::CallReplies& replies, const ef::Layout& layout,
                 client_internal::CallPlan* plan);

  // --- served.cc
  // Appends each plan's fingerprints (MarkPlan::fingerprints, already encoded) to
  // its user's served ring: one EVALSHA each (EVAL if the server lacks the
  // script), WAIT after them with wait_replicas; on a single Redis all in one
  // round trip, on a cluster one per plan. (*status)[i] and (*filled)[i] (the
  // ring's size after it) per plan, errors as the read's (kUnavailable,
  // kPermissionDenied, ...); a plan with no entries is Ok with 0 filled.
  void MarkPlans(std::span<const MarkPlan> plans, Clock::time_point start,
                 Clock::time_point deadline, std::vector<Status>* status,
                 std::vector<size_t>* filled);
  // The plan of FilterAndMarkWithClusters' marks for the answer *r (sets
  // r->marked and r->marked_count).
  void PlanMarks(std::string_view user, std::span<const std::string_view> candidates, size_t n,
                 Result* r, MarkPlan* plan) const;
  // Marks *r failed with st; with `policy_applies` and OnError::kFailOpen it is
  // answered as "nothing seen" instead (failed_open).
  void Failed(const Status& st, bool policy_applies, Result* r);
  // kUnavailable naming the deadline, the time taken and what was waited for.
  Status DeadlineError(Clock::time_point start, Clock::time_point deadline, const char* what);

  // --- layout_watch.cc
  std::shared_ptr<const ef::Layout> CurrentLayout() const;
  // Whether the caller should read the meta again now: kStale when a value was
  // longer than the layout allows (the answer needs the new layout), kPeriodic
  // when the period ran out (options.layout_recheck; at most once a second while
  // no meta is stored, with allow_missing_layout: also kPeriodic). Claims the
  // re-read: until the next period, other callers go on with the current layout.
  enum class Recheck { kNo, kPeriodic, kStale };
  Recheck LayoutRecheckDue();
  // Under layout_mu: the period of re-reads now (zero: none), as above.
  Clock::duration RecheckPeriod() const;
  // A claimed re-read failed: the next one is due kLayoutRetry later, not a whole
  // period (a layout upgrade must reach readers within half its lead).
  void LayoutRecheckFailed();
  // kUnavailable when the held layout may have been replaced by an upgrade the
  // reader has not read: a layout below version 3, last read more than
  // kMaxLayoutAge ago (half the smallest --lead of `layout upgrade --to 3`), with
  // periodic re-reads on (options.layout_recheck > 0). Else OK.
  Status LayoutFresh() const;
  // Every value must fit the layout it is read with (a stage table ends at its
  // last stage); a longer one was written under a newer layout. True (at most
  // once a second) when `bytes` is longer: the layout is then marked stale. (A
  // value that stays too long, not ours, costs a re-read at most once a second.)
  bool NoteValueLength(size_t bytes, const ef::Layout& layout);
  // Reads the stored layout; a mismatch with the config is kFailedPrecondition.
  // No meta: the configured layout if none was ever read, else the last stored
  // one is kept (meta_lost).
  Status RefreshLayout(ef::MetaTarget conn, bool* found);

  // --- single_node.cc
  // Connects (within the deadline) and re-reads the meta.
  Status Connect(Clock::time_point deadline, ef::client::ConnectionPool::Conn* out);
  // A usable connection in *pc within the deadline; *reused: it is a pooled one
  // that was idle (it may have been closed by the server meanwhile).
  Status Prepare(ef::client::PooledConnection& pc, Clock::time_point start,
                 Clock::time_point deadline, bool* reused);
  // After a failed exchange on a pooled connection: true if the connection was
  // closed (by the server's idle timeout, a proxy, a restart) rather than slow, so
  // that one retry on a new connection may succeed within the deadline. MGET and
  // HGETALL are reads: sending them again is harmless.
  static bool DeadBeforeUse(const ef::RedisConnection& conn, Clock::time_point deadline);
  // Runs exchange(connection) with the socket timeout set to what is left of the
  // deadline. A failed exchange drops the connection; on a reused one that the
  // server had closed while idle (DeadBeforeUse) it runs once more on a new one.
  // (Defined, and used, in single_node.cc only.)
  template <typename Exchange>
  Status ExchangeOnce(ef::client::PooledConnection& pc, bool reused, Clock::time_point deadline,
                      Exchange exchange);
  // One MGET per entry of `commands`, pipelined on one pooled connection;
  // *replies: the thread's reply buffers (values are views into them).
  Status SingleMget(const std::vector<std::vector<std::string>>& commands, Clock::time_point start,
                    Clock::time_point deadline,
                    std::vector<ef::RedisConnection::ArrayReply>** replies);
  Status PingSingle(Clock::time_point start, Clock::time_point deadline);
  // Commands pipelined on a pooled connection, as ExchangeOnce runs them; their
  // replies (error replies included: the caller reads them) in *replies.
  Status SingleCommands(const std::vector<std::vector<std::string>>& commands,
                        Clock::time_point start, Clock::time_point deadline,
                        std::vector<ef::RedisReply>* replies);

  // --- cluster_calls.cc
  // Cluster: a router in *pr within the deadline, its deadline set to what is left.
  // A new router discovers the topology and reads the meta (failing the call if
  // it cannot); a router whose last call failed re-reads the meta at most once a
  // second, keeping the current layout if the meta's master does not answer (so a
  // dead master fails only its own users' calls).
  Status PrepareRouter(ef::client::Pooled<RouterSlot>& pr, Clock::time_point start,
                       Clock::time_point deadline);
  // The router may retry for what is left of the call's deadline; false if nothing is.
  static bool SetRouterDeadline(ef::ClusterRouter& router, Clock::time_point deadline);
  // Cluster: the MGET of each user (commands[v], all keys in one slot) through the
  // router, each master's users in one pipeline, masters in parallel. A user whose
  // slot is migrating with its keys split between the two nodes gets TRYAGAIN:
  // its keys are then read with one GET each (each following its own ASK), within
  // the same deadline. *replies: one array per user, as MGET's. A user whose
  // master did not answer within the deadline (or answered an error) fails alone:
  // (*user_status)[v] says why, and the other users are answered; the returned
  // status fails every user (an ACL refusal, the deadline gone before the end).
  // With `lookups`: a GET of each of its keys in the same call (each in its own
  // slot, pipelined per master with the MGETs); lookups->clusters is filled (a
  // key whose master did not answer is "", unknown).
  Status ClusterMget(ef::ClusterRouter& router,
                     const std::vector<std::vector<std::string>>& commands, Clock::time_point start,
                     Clock::time_point deadline, std::vector<ef::RedisReply>* replies,
                     std::vector<Status>* user_status, client_internal::Lookups* lookups = nullptr);
  // The clusters of lookups->keys from the values read (nil = unknown), and
  // lookups->unknown and ->bad (the call counts them once, not again on a redo).
  // What the map answered goes into the cache; answered (null: all) tells the
  // keys whose value was read from those that got no answer (unknown, not kept).
  void DecodeLookups(const std::vector<std::string_view>& values, const std::vector<bool>* answered,
                     client_internal::Lookups* lookups);
  // PING on every master (one slot of each), in parallel.
  Status PingCluster(Clock::time_point start, Clock::time_point deadline);
  // Commands in the slot of `key`, pipelined to its master through a pooled
  // router (redirections followed within the deadline); replies as SingleCommands.
  Status ClusterCommands(std::string_view key,
                         const std::vector<std::vector<std::string>>& commands,
                         Clock::time_point start, Clock::time_point deadline,
                         std::vector<ef::RedisReply>* replies);
};

}  // namespace exposure_filter
