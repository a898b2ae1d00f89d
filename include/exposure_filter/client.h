// exposure_filter::Client — the read side of exposure-filter for recall services.
//
// Answers "which of these candidate items has this user not seen?" from the
// per-user Bloom filters the exposure-filter daemon writes to Redis
// (docs/FORMAT.md, layouts v1, v2 and v3), and from the user's served ring (rule
// 10: what recall services marked as returned, MarkServed / FilterAndMark):
//   - one Redis round trip per user: one MGET of the user's live bucket keys and
//     the next one (all under the user's hash tag, so Redis Cluster-safe);
//   - each candidate is hashed once and tested locally against every bucket and
//     every stage the bucket holds; an item is seen if some bucket holds it;
//   - SeenBatch sends the MGETs of many users in one pipelined round trip.
//
// Near duplicates (filter.near_duplicates: true; docs/CONTENT.md rule 5): a
// candidate whose content cluster is known is also answered near_duplicate when
// the user saw an item of its cluster (Result::near_duplicate, Result::cluster).
// The cluster comes from the call (the *WithClusters calls, Query::clusters),
// else from the content map (`<prefix>cm{item}`, filled by `exposure-filter
// content`), through a local cache of it (ClientOptions::content_cache_bytes):
// the map entries of the candidates the cache does not answer are read in the
// same round trip as the MGET (one Redis: in the same pipeline; Redis Cluster:
// one GET per candidate, pipelined per master with the MGETs, the masters in
// parallel). A candidate the map does not know is tested by its item ID alone
// (ClientStats::clusters_unknown). With the option off, clusters are ignored and
// nothing more is read.
//
// Usage:
//   exposure_filter::ClientOptions options;
//   options.config_path = "/etc/exposure-filter.yaml";   // the daemon's config
//   std::string error;
//   auto client = exposure_filter::Client::Create(options, &error);
//   if (!client) { std::cerr << error << "\n"; return 1; }
//   std::vector<std::string> unseen = client->Unseen("user-42", candidates);
//
// Redis Cluster: the same config works against one node and against a cluster
// (redis.address = a comma-separated seed list; redis.cluster auto|true|false,
// auto asks the seeds at Create). In cluster mode:
//   - the pool holds one cluster router per slot instead of one connection, each
//     with its own connection per master; the topology is read from the seeds
//     (CLUSTER SLOTS) on a slot's first use and re-read on MOVED or a lost node;
//   - each user's MGET goes to the master of the user's slot (all of a user's
//     keys share its hash tag); SeenBatch sends one pipeline per master, the
//     masters in parallel; MOVED/ASK/CLUSTERDOWN are followed and retried within
//     the call's deadline, never beyond it;
//   - a user whose slot is being migrated with its keys split between the two
//     nodes (Redis answers its MGET with TRYAGAIN until the migration ends) is
//     read with one GET per key, each following its own ASK, within the same
//     deadline: the answer stays complete and correct during a reshard;
//   - the meta is read through the router (the meta key's master) when a
//     router is made, and again at most once a second after a failed call; if
//     the meta's master is down the client keeps the layout it has, so a dead
//     master fails only the calls that need it: its users (in a SeenBatch too,
//     whose users on the other masters are answered; the batch waits out the
//     deadline for the dead master's users), per the policy below;
//   - Ping PINGs every master.
//
// Thread safety: every member function of Client may be called concurrently from
// any number of threads. A call holds one pooled Redis connection while it waits
// for Redis; at most ClientOptions::pool_size calls talk to Redis at once, others
// wait for a connection (bounded by their deadline). The Client must outlive all
// calls; do not destroy it while a call is running.
//
// Layout: Create reads the stored layout (`<prefix>meta`) and checks it against
// the config's filter.* keys (same rule as the daemon: a different m, k, seed,
// key prefix, bucket or window is an error). The stored layout (v1, v2 with its
// stages, or v3, whose buckets from `v3_from` on take docs/FORMAT.md rule 9's
// positions) is what the client reads with, each bucket by its own rule. The meta
// is read again on every new connection (after a reconnect) and every
// `layout_recheck`, so an upgrade (`exposure-filter layout upgrade`) is picked up;
// a meta that no longer matches the config makes calls fail (policy below) until
// it matches again.
//
// Deadline: every call has a deadline (ClientOptions::timeout unless given). It
// bounds the wait for a pooled connection, a (re)connect and the round trip. A
// call that cannot be answered from Redis within its deadline is a failure
// (policy below); it never returns a late, partial answer. The round trip's socket
// timeout is what is left of the deadline, so a call returns within its deadline
// plus scheduling delays, also when the deadline is shorter or longer than
// ClientOptions::timeout.
//
// Failure policy (Redis down, slow past the deadline, error reply, layout no
// longer matching):
//   - OnError::kFailOpen (default): the result is ok, failed_open is true and
//     every candidate is reported unseen (the feed shows possibly seen items rather
//     than nothing); counted in ClientStats::failed_open.
//   - OnError::kFailClosed: ok is false, code is kUnavailable (or
//     kLayoutMismatch) and seen is all false: the caller decides.
//   Either way `error` says why in one line and redis_errors is incremented.
//   The broken connection is dropped; the next call connects again (and re-reads
//   the meta), so the client recovers by itself when Redis is back.
// An invalid user ID (empty, or starting with '}': docs/FORMAT.md rule 4) is
// always an error (ok false, code kInvalidArgument), whatever the policy, and
// costs no round trip.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace exposure_filter {

enum class OnError { kFailOpen, kFailClosed };

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,   // bad config, option or user ID: fix the input
  kUnavailable,       // Redis unreachable, too slow for the deadline, or an error reply
  kLayoutMismatch,    // the stored layout (`<prefix>meta`) disagrees with the config
  kPermissionDenied,  // Redis refused the credentials or the ACL forbids a command
  kInternal,          // protocol error or an unexpected reply
};

struct ClientOptions {
  // The daemon's YAML config (filter.* and redis.* are used, other sections are
  // validated but ignored); "" = built-in defaults.
  std::string config_path;
  // "key=value" overrides applied after the file, exactly as the CLI's --set
  // (e.g. "redis.address=10.0.0.5:6379", "filter.key_prefix=ef:").
  std::vector<std::string> overrides;
  // Redis connections (>= 1; on Redis Cluster: routers, each with a connection per
  // master). Made lazily, the first one by Create.
  size_t pool_size = 4;
  // Default per-call deadline, also the connect and socket timeout (> 0).
  std::chrono::milliseconds timeout{50};
  OnError on_error = OnError::kFailOpen;
  // false (default): Create fails when Redis holds no layout for the prefix (most
  // likely a wrong filter.prefix or Redis address). true: read with the
  // configured layout until a meta appears (it is looked for again on every new
  // connection and at most once a second); every candidate is unseen meanwhile.
  bool allow_missing_layout = false;
  // How often the stored layout (`<prefix>meta`) is read again while the
  // connections stay healthy, so that a `layout upgrade` (version 1 to 2) or a
  // changed meta is followed (docs/FORMAT.md rule 7). It is also read again, before
  // the call answers, whenever a bucket value is longer than the known layout
  // allows (a writer of a newer layout wrote it). 0: only on a new connection.
  std::chrono::milliseconds layout_recheck{10000};
  // filter.near_duplicates: the bytes of the local cache of the content map
  // (item -> cluster) in front of Redis; unset: the config's
  // serve.content_cache_bytes (default 64 MiB); 0: no cache, every lookup reads
  // the map. What the map answered is kept: a cluster until evicted or for a day
  // (an assignment never changes once made: docs/CONTENT.md rule 3, "An item
  // already in the map item -> cluster keeps its cluster"), "not known" for 10 s
  // (an item not indexed yet is found 10 s after the items topic indexes it, at
  // the latest). Memory: at most this many bytes of tables and clusters, as
  // allocated (docs/CONTENT.md rule 5, "The readers' cache").
  std::optional<size_t> content_cache_bytes;
  // For tests: the monotonic clock, in milliseconds, that the cache's times are
  // measured with; empty: std::chrono::steady_clock.
  std::function<int64_t()> cache_clock_ms;
};

// One user's candidates (for SeenBatch).
struct Query {
  std::string user;
  std::vector<std::string> candidates;
  // Empty, or one per candidate: its near-duplicate cluster, "" = unknown (looked
  // up in the content map). Used with filter.near_duplicates only.
  std::vector<std::string> clusters;
};

// One user's candidates held elsewhere (for SeenBatchViews): views that must
// outlive the call.
struct QueryView {
  std::string_view user;
  std::span<const std::string_view> candidates;
  std::span<const std::string_view> clusters;  // as Query::clusters
};

// Per-call options beyond the deadline (for tools; the defaults suit services).
struct CallOptions {
  std::chrono::milliseconds deadline{0};  // 0 = ClientOptions::timeout
  int64_t at_unix_seconds = 0;            // query as of this time; 0 = now
  bool with_buckets = false;              // fill Result::seen_bucket
  // filter.near_duplicates: look the clusters not given up in the content map
  // (false: candidates without a given cluster are tested alone, no map read).
  bool cluster_lookup = true;
};

struct Result {
  // false: invalid user ID, or Redis failed and on_error == kFailClosed.
  bool ok = true;
  // Redis failed and on_error == kFailOpen: every candidate is reported unseen.
  bool failed_open = false;
  ErrorCode code = ErrorCode::kOk;  // why, when !ok or failed_open
  std::string error;                // one line, when !ok or failed_open
  std::vector<bool> seen;           // per candidate, input order (all false on failure)
  size_t seen_count = 0;            // number of true entries in seen
  size_t buckets_read = 0;          // bucket keys read (the window's buckets + 1)
  size_t buckets_present = 0;       // of which exist in Redis
  // Only with CallOptions::with_buckets: per candidate, the start (Unix seconds) of
  // the newest bucket that holds it, or -1.
  std::vector<int64_t> seen_bucket;
  // Per candidate: not seen, but served to the user recently (a pseudo-exposure:
  // the user's served ring, docs/FORMAT.md rule 10, written by MarkServed,
  // FilterAndMark, `serve` with mark_served, `check --mark-served`). Unseen()
  // leaves these out too. All false when the user has no ring (or on a failure).
  std::vector<bool> served;
  size_t served_count = 0;  // number of true entries in served
  // Per candidate (all false without filter.near_duplicates): not seen, but a near
  // duplicate of an item the user saw: an item of its cluster (docs/CONTENT.md
  // rule 5). Unseen() and FilterAndMark leave these out. seen, near_duplicate and
  // served exclude each other.
  std::vector<bool> near_duplicate;
  size_t near_duplicate_count = 0;  // number of true entries in near_duplicate
  // filter.near_duplicates only (else empty): per candidate, the cluster it was
  // tested with (given in the call, or from the content map), "" = unknown.
  std::vector<std::string> cluster;
  // FilterAndMark only: per candidate, whether this call marked it served (the
  // first n candidates neither seen nor served, input order), and how many.
  std::vector<bool> marked;
  size_t marked_count = 0;
  // FilterAndMark only, under kFailOpen: the answer stands but the mark was not
  // written (error and code say why; marked is all false).
  bool mark_failed = false;
};

// The outcome of MarkServed.
struct MarkResult {
  bool ok = true;            // false: invalid user ID, or Redis failed under kFailClosed
  bool failed_open = false;  // Redis failed under kFailOpen: nothing was marked
  ErrorCode code = ErrorCode::kOk;
  std::string error;  // one line, when !ok or failed_open
  size_t marked = 0;  // items written to the ring (all of them on success)
  size_t filled = 0;  // the ring's items after the write (at most serve.served_items)
};

// Marks of served items planned by FilterAndPlanMark for one user, to be written
// later with WriteMarks (serve answers first and writes them after, batched
// across requests). Opaque but for the counts: written as planned, whatever the
// layout meanwhile.
struct MarkPlan {
  std::string user;
  std::string fingerprints;  // the served ring's encoding (docs/FORMAT.md rule 10)
  size_t items = 0;          // candidates marked (Result::marked_count)
  size_t entries = 0;        // fingerprints: the items and their clusters (CONTENT.md rule 5)
};

// Counters since Create; monotonic (but cluster_cache_bytes); read with stats() (a
// consistent-enough snapshot: each counter is read atomically).
struct ClientStats {
  uint64_t calls = 0;          // Seen/Unseen/SeenBatch calls
  uint64_t users = 0;          // user queries (SeenBatch counts each query)
  uint64_t candidates = 0;     // candidates checked
  uint64_t seen = 0;           // candidates found seen
  uint64_t failed_open = 0;    // user queries answered "all unseen" because of a failure
  uint64_t errors = 0;         // user queries answered with ok == false
  uint64_t redis_errors = 0;   // Redis failures (connect, I/O, timeout, error reply, layout)
  uint64_t timeouts = 0;       // of redis_errors: deadline exceeded (pool wait or Redis)
  uint64_t reconnects = 0;     // connections made after the first one
  uint64_t layout_reads = 0;   // stored layout read again on a healthy connection
  uint64_t stale_retries = 0;  // calls retried once on a new connection (the pooled one was dead)
  uint64_t served = 0;         // candidates found served (not seen, in the user's served ring)
  uint64_t marked = 0;         // items marked served (MarkServed, FilterAndMark)
  uint64_t mark_errors = 0;    // marks that failed (Redis; counted in redis_errors too)
  // Keys read whose value names no size class (layout version 4: docs/FORMAT.md
  // rule 11): left out of the answer, which comes from the user's other keys.
  uint64_t invalid_keys = 0;
  // filter.near_duplicates (docs/CONTENT.md rule 5):
  uint64_t near_duplicates = 0;   // candidates found near duplicates (not seen)
  uint64_t cluster_lookups = 0;   // candidates whose cluster was looked up (none given):
                                  // in the local cache, else in the content map
  uint64_t clusters_unknown = 0;  // of which the map did not know (or held a bad value)
  uint64_t map_bad_values = 0;    // of which the map's value was not a map entry (1-16 bytes;
                                  // an empty value reads as a missing key)
  // The local cache of the content map (ClientOptions::content_cache_bytes): of
  // cluster_lookups, those it answered (a cluster, or a recent "not known") and
  // those read from the map in Redis (cluster_lookups = hits + misses).
  uint64_t cluster_cache_hits = 0;
  uint64_t cluster_cache_misses = 0;
  // Not a counter: the bytes the cache holds now (<= content_cache_bytes).
  uint64_t cluster_cache_bytes = 0;
};

// Stored layout the client reads with.
struct LayoutInfo {
  int version = 1;      // 1, 2 (scalable: stages) or 3 (rule 9 positions from v3_from)
  uint32_t stages = 1;  // stage limit (1 for version 1)
  bool stored = false;  // false: no meta in Redis yet (allow_missing_layout)
  // The meta was read before and is gone now (DEL, FLUSHALL): calls go on with
  // the last stored layout (this one), never the configured one; serve's /readyz
  // answers 503 until a writer stores it again.
  bool lost = false;
  std::string prefix;  // filter.key_prefix
  int64_t bucket_seconds = 0;
  int64_t window_seconds = 0;
};

class Client {
 public:
  // Loads and validates the config, connects to Redis and reads the stored layout.
  // nullptr, and *error set to one line naming what and where (and *code if given),
  // when the config is invalid (kInvalidArgument), Redis cannot be reached
  // (kUnavailable), refuses the credentials (kPermissionDenied), or holds another
  // layout or none (kLayoutMismatch; none is allowed with allow_missing_layout).
  static std::unique_ptr<Client> Create(const ClientOptions& options, std::string* error,
                                        ErrorCode* code = nullptr);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Which candidates `user` has seen: one round trip. Duplicates and empty
  // strings are allowed (an empty candidate is an item like any other).
  Result Seen(std::string_view user, const std::vector<std::string>& candidates);
  Result Seen(std::string_view user, const std::vector<std::string>& candidates,
              std::chrono::milliseconds deadline);
  Result Seen(std::string_view user, const std::vector<std::string>& candidates,
              const CallOptions& call);
  // Seen for candidates held elsewhere, read in place (no copy of them): e.g.
  // views into a request body, or a std::vector<std::string_view>. A name of
  // its own, so that Seen(user, {...}) stays unambiguous.
  Result SeenViews(std::string_view user, std::span<const std::string_view> candidates);
  Result SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                   std::chrono::milliseconds deadline);
  Result SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                   const CallOptions& call);

  // SeenViews with the candidates' near-duplicate clusters (docs/CONTENT.md rule
  // 5): clusters is empty (look them all up) or one per candidate, "" = unknown
  // (looked up in the content map unless CallOptions::cluster_lookup is false). A
  // clusters of another size fails the call (kInvalidArgument, no round trip).
  // Without filter.near_duplicates, exactly SeenViews (clusters ignored).
  Result SeenWithClusters(std::string_view user, std::span<const std::string_view> candidates,
                          std::span<const std::string_view> clusters, const CallOptions& call = {});

  // The unseen candidates (neither seen, near duplicates nor served), in input
  // order. On a failure under kFailOpen: all of them; under kFailClosed or for an invalid user ID:
  // empty (use Seen to tell).
  std::vector<std::string> Unseen(std::string_view user,
                                  const std::vector<std::string>& candidates);
  std::vector<std::string> Unseen(std::string_view user, const std::vector<std::string>& candidates,
                                  std::chrono::milliseconds deadline);

  // Many users at once: the MGETs of all valid users go out in one pipelined
  // round trip on one connection (Redis Cluster: one pipeline per master, in
  // parallel). results[i] answers queries[i], exactly as
  // Seen(queries[i].user, queries[i].candidates) would; an invalid user ID fails
  // its own query only; a Redis failure fails every valid query (policy above),
  // except on Redis Cluster, where a master that does not answer fails only the
  // queries of its users.
  std::vector<Result> SeenBatch(const std::vector<Query>& queries);
  std::vector<Result> SeenBatch(const std::vector<Query>& queries,
                                std::chrono::milliseconds deadline);
  std::vector<Result> SeenBatch(const std::vector<Query>& queries, const CallOptions& call);
  // SeenBatch for users and candidates held elsewhere, read in place (no copy).
  std::vector<Result> SeenBatchViews(std::span<const QueryView> queries);
  std::vector<Result> SeenBatchViews(std::span<const QueryView> queries,
                                     std::chrono::milliseconds deadline);
  std::vector<Result> SeenBatchViews(std::span<const QueryView> queries, const CallOptions& call);

  // Paged feeds (README "Paged feeds"): mark items as served to `user`, so that
  // the next call leaves them out (Result::served) before their exposure events
  // arrive. One round trip: one script (EVALSHA) appends the items' fingerprints
  // to the user's served ring (docs/FORMAT.md rule 10: capacity serve.served_items,
  // the oldest overwritten, never the newest; TTL serve.served_ttl, renewed on
  // every write), atomically, so concurrent marks never lose each other's items.
  // With redis.wait_replicas, a WAIT follows in the same round trip. An empty
  // `items` marks nothing and costs no round trip. Failure policy as for Seen.
  MarkResult MarkServed(std::string_view user, const std::vector<std::string>& items);
  MarkResult MarkServedViews(std::string_view user, std::span<const std::string_view> items,
                             const CallOptions& call = {});
  // Seen, then MarkServed of the first n candidates neither seen nor served (input
  // order; n = SIZE_MAX: all of them): a page of n for a feed. At most what the
  // ring holds is marked (serve.served_items slots, a cluster mark taking one
  // more: see FilterAndMarkWithClusters), so the ring keeps every item marked:
  // Result::marked says which, and marking stops at the first that would not fit. Two round trips
  // (the marks depend on the answer). Two calls for the same user that overlap in
  // time may both return an item (each reads the ring before the other marks it);
  // a call made after another's answer never repeats what that one marked.
  // If the read fails, nothing is marked (policy as for Seen). If only the mark
  // fails: under kFailOpen the answer stands with mark_failed; under kFailClosed
  // the call fails (ok false).
  Result FilterAndMark(std::string_view user, const std::vector<std::string>& candidates, size_t n);
  Result FilterAndMarkViews(std::string_view user, std::span<const std::string_view> candidates,
                            size_t n, const CallOptions& call = {});
  // FilterAndMarkViews with clusters as SeenWithClusters: near duplicates are left
  // out too, and with filter.near_duplicates a marked candidate J of a known
  // cluster C != J also marks C (the writers' rule), so that the next page
  // leaves out the near duplicates of this one (Result::served).
  Result FilterAndMarkWithClusters(std::string_view user,
                                   std::span<const std::string_view> candidates,
                                   std::span<const std::string_view> clusters, size_t n,
                                   const CallOptions& call = {});

  // FilterAndMarkWithClusters without its write: the answer, with Result::marked
  // and marked_count as that call would mark them, and in *plan the marks to
  // write with WriteMarks (plan->entries == 0: nothing to mark, as when the read
  // failed or failed open). One round trip. Until the plan is written, a call
  // for the same user does not see these marks (README "Paged feeds").
  Result FilterAndPlanMark(std::string_view user, std::span<const std::string_view> candidates,
                           std::span<const std::string_view> clusters, size_t n,
                           const CallOptions& call, MarkPlan* plan);
  // Writes planned marks: per plan a MarkResult (marked = plan.items on
  // success), failure policy as for MarkServed. Several users' marks in one
  // round trip on a single Redis (a pipeline of EVALSHAs, one WAIT after them
  // with redis.wait_replicas); on Redis Cluster one round trip per plan. Plans
  // with no entries cost nothing.
  std::vector<MarkResult> WriteMarks(std::span<const MarkPlan> plans, const CallOptions& call = {});

  // Health check: PING on a pooled connection (connecting, and reading the meta,
  // if needed) within the deadline; on Redis Cluster, PING on every master.
  // Sets Ready().
  bool Ping(std::chrono::milliseconds deadline);
  // True iff the most recent call or Ping that talked to Redis succeeded.
  bool Ready() const;

  ClientStats stats() const;
  LayoutInfo layout() const;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace exposure_filter
