// exposure_filter::Client (include/exposure_filter/client.h) over the daemon's own
// read path: read/bloom_reader.h PlanRead + TestItems, redis/meta.h ReadLayout.
#include "exposure_filter/client.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "client/pool.h"
#include "config/loader.h"
#include "read/bloom_reader.h"
#include "redis/cluster.h"
#include "redis/meta.h"
#include "redis/options.h"

namespace exposure_filter {
namespace {

using Clock = std::chrono::steady_clock;
using ef::Status;
using ef::StatusCode;

// How often a client without a stored layout (allow_missing_layout) looks for one.
constexpr auto kMissingLayoutRecheck = std::chrono::seconds(1);
// Least time between two meta re-reads caused by values longer than the layout.
constexpr auto kStaleLayoutRecheck = std::chrono::seconds(1);
// Redis Cluster: least time between two meta re-reads of one router after a failure.
constexpr auto kClusterMetaRecheck = std::chrono::seconds(1);
// The name of the timeouts of calls, in messages (RedisOptions::*_timeout_name).
constexpr const char* kLeftOfDeadline = "what was left of the call's deadline";

ErrorCode CodeOf(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return ErrorCode::kOk;
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case StatusCode::kFailedPrecondition:
      return ErrorCode::kLayoutMismatch;
    case StatusCode::kPermissionDenied:
      return ErrorCode::kPermissionDenied;
    case StatusCode::kInternal:
      return ErrorCode::kInternal;
    default:
      return ErrorCode::kUnavailable;
  }
}

int64_t Millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

struct Counters {
  std::atomic<uint64_t> calls{0}, users{0}, candidates{0}, seen{0}, failed_open{0}, errors{0},
      redis_errors{0}, timeouts{0}, reconnects{0}, layout_reads{0}, stale_retries{0};
};

void Add(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// One user's part of a call.
struct Work {
  std::string_view user;
  ef::ItemList candidates;
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

Status MgetReplyError(const std::string& where, std::string_view error) {
  const std::string msg = where + ": MGET: " + std::string(error);
  return ef::RedisConnection::ClassifyErrorReply(error) == ef::RedisErrorKind::kAuth
             ? ef::PermissionDenied(msg)
             : ef::Unavailable(msg);
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Standalone MGETs: kept per thread and reused from call to call; the values are
// views into `received` (RedisConnection::ReadArrays: no copies).
struct ThreadBuffers {
  std::string request;
  std::string received;
  std::vector<ef::RedisConnection::ArrayReply> replies;

  // Beyond these, a buffer is given back after the call: one huge batch must
  // not pin its memory in every thread that ever served one.
  static constexpr size_t kKeepBytes = 4 << 20;
  static constexpr size_t kKeepReplies = 4096;
  void Trim() {
    if (request.capacity() > kKeepBytes) std::string().swap(request);
    if (received.capacity() > kKeepBytes) std::string().swap(received);
    if (replies.capacity() > kKeepReplies) {
      std::vector<ef::RedisConnection::ArrayReply>().swap(replies);
    } else {
      for (auto& r : replies)
        if (r.values.capacity() > kKeepReplies) std::vector<std::string_view>().swap(r.values);
    }
  }
};
thread_local ThreadBuffers thread_buffers;

}  // namespace

struct Client::Impl {
  ClientOptions options;
  ef::Layout configured;
  ef::RedisOptions redis;
  ef::client::ConnectionPool pool;
  // Redis Cluster (UseCluster): routers instead of connections.
  bool cluster = false;
  ef::ClusterRouterOptions router_options;
  ef::client::Pool<RouterSlot> routers;

  mutable std::mutex layout_mu;
  std::shared_ptr<const ef::Layout> layout;  // guarded by layout_mu
  bool stored = false;                       // guarded by layout_mu
  // When the meta was last read, or a re-read was last claimed (LayoutRecheckDue).
  Clock::time_point layout_checked;  // guarded by layout_mu
  // A value longer than the layout allows was read: re-read the meta now.
  std::atomic<bool> layout_stale{false};
  Clock::time_point stale_reread{};  // guarded by layout_mu: when one last did so

  std::atomic<bool> ready{false};
  std::atomic<bool> meta_known{false};  // cluster: some router read the meta
  std::atomic<bool> connected_once{false};
  Counters counters;

  Impl(ClientOptions o, ef::Layout l, ef::RedisOptions r)
      : options(std::move(o)),
        configured(std::move(l)),
        redis(std::move(r)),
        pool(options.pool_size),
        routers(options.pool_size),
        layout(std::make_shared<const ef::Layout>(configured)) {}

  std::shared_ptr<const ef::Layout> CurrentLayout() const {
    std::lock_guard lock(layout_mu);
    return layout;
  }

  // True when the caller should read the meta again now: a value was longer than
  // the layout allows, or the period ran out (options.layout_recheck; at most once
  // a second while no meta is stored, with allow_missing_layout). Claims the
  // re-read: until the next period, other callers go on with the current layout.
  bool LayoutRecheckDue() {
    const Clock::time_point now = Clock::now();
    std::lock_guard lock(layout_mu);
    bool due = layout_stale.exchange(false);
    if (!stored && options.allow_missing_layout)
      due = due || now - layout_checked >= kMissingLayoutRecheck;
    else if (options.layout_recheck.count() > 0)
      due = due || now - layout_checked >= options.layout_recheck;
    if (due) layout_checked = now;
    return due;
  }

  // Every value must fit the layout it is read with (a stage table ends at its
  // last stage); a longer one was written under a newer layout.
  // (A value that stays too long, not ours, costs a re-read at most once a second.)
  bool NoteValueLength(size_t bytes, const ef::Layout& layout) {
    const ef::Stage& last = layout.stage_table.back();
    if (bytes <= (last.offset + last.m + 7) / 8) return false;
    {
      std::lock_guard lock(layout_mu);
      const Clock::time_point now = Clock::now();
      if (now - stale_reread < kStaleLayoutRecheck) return false;
      stale_reread = now;
    }
    layout_stale.store(true);
    return true;
  }

  // Reads the stored layout; a mismatch with the config is kFailedPrecondition.
  Status RefreshLayout(ef::MetaTarget conn, bool* found) {
    ef::Layout effective;
    Status st = ef::ReadLayout(conn, configured, &effective, found);
    if (!st.ok()) return st;
    std::lock_guard lock(layout_mu);
    layout = *found ? std::make_shared<const ef::Layout>(std::move(effective))
                    : std::make_shared<const ef::Layout>(configured);
    stored = *found;
    layout_checked = Clock::now();
    return Status::Ok();
  }

  Status DeadlineError(Clock::time_point start, Clock::time_point deadline, const char* what) {
    Add(counters.timeouts, 1);
    return ef::Unavailable("deadline of " + std::to_string(Millis(deadline - start)) +
                           " ms exceeded " + what + " after " +
                           std::to_string(Millis(Clock::now() - start)) + " ms");
  }

  // Connects (within the deadline) and re-reads the meta.
  Status Connect(Clock::time_point deadline, ef::client::ConnectionPool::Conn* out) {
    ef::RedisOptions o = redis;
    o.connect_timeout_ms = std::max<int64_t>(1, Millis(deadline - Clock::now()));
    // The handshake (AUTH, SELECT, PING) and the meta read are part of the call.
    o.command_timeout_ms = o.connect_timeout_ms;
    o.connect_timeout_name = o.command_timeout_name = kLeftOfDeadline;
    auto conn = ef::RedisConnection::Connect(o);
    if (!conn.ok()) return conn.status();
    if (connected_once.exchange(true)) Add(counters.reconnects, 1);
    bool found = false;
    Status st = RefreshLayout(**conn, &found);
    if (!st.ok()) return st;
    *out = std::move(*conn);
    return Status::Ok();
  }

  // A usable connection in *pc within the deadline; *reused: it is a pooled one
  // that was idle (it may have been closed by the server meanwhile).
  Status Prepare(ef::client::PooledConnection& pc, Clock::time_point start,
                 Clock::time_point deadline, bool* reused) {
    if (!pc.Acquire(deadline))
      return DeadlineError(start, deadline, "waiting for a free Redis connection");
    *reused = pc.conn() != nullptr;
    if (*reused && LayoutRecheckDue()) {
      bool found = false;
      Add(counters.layout_reads, 1);
      Status st = RefreshLayout(*pc.conn(), &found);
      if (!st.ok()) {
        const bool dead = DeadBeforeUse(*pc.conn(), deadline);
        pc.Drop();
        if (!dead) return st;
        Add(counters.stale_retries, 1);  // connect anew below (which reads the meta)
        *reused = false;
      }
    }
    if (!pc.conn()) {
      Status st = Connect(deadline, &pc.conn());
      if (!st.ok()) return st;
    }
    if (Clock::now() > deadline) return DeadlineError(start, deadline, "connecting to Redis");
    return Status::Ok();
  }

  // After a failed exchange on a pooled connection: true if the connection was
  // closed (by the server's idle timeout, a proxy, a restart) rather than slow, so
  // that one retry on a new connection may succeed within the deadline. MGET and
  // HGETALL are reads: sending them again is harmless.
  static bool DeadBeforeUse(const ef::RedisConnection& conn, Clock::time_point deadline) {
    return conn.last_error_kind() == ef::RedisErrorKind::kIo && Clock::now() < deadline;
  }

  // Runs exchange(connection) with the socket timeout set to what is left of the
  // deadline. A failed exchange drops the connection; on a reused one that the
  // server had closed while idle (DeadBeforeUse) it runs once more on a new one.
  template <typename Exchange>
  Status ExchangeOnce(ef::client::PooledConnection& pc, bool reused, Clock::time_point deadline,
                      Exchange exchange) {
    for (;;) {
      pc.conn()->SetCommandTimeout(std::max<int64_t>(1, Millis(deadline - Clock::now())),
                                   kLeftOfDeadline);
      Status st = exchange(*pc.conn());
      if (st.ok()) return st;
      const bool retry = reused && DeadBeforeUse(*pc.conn(), deadline);
      pc.Drop();  // broken: the next call connects again and re-reads the meta
      if (!retry) return st;
      Add(counters.stale_retries, 1);
      reused = false;
      EF_RETURN_IF_ERROR(Connect(deadline, &pc.conn()));
    }
  }

  // Cluster: a router in *pr within the deadline, its deadline set to what is left.
  // A new router discovers the topology and reads the meta (failing the call if
  // it cannot); a router whose last call failed re-reads the meta at most once a
  // second, keeping the current layout if the meta's master does not answer (so a
  // dead master fails only its own users' calls).
  Status PrepareRouter(ef::client::Pooled<RouterSlot>& pr, Clock::time_point start,
                       Clock::time_point deadline) {
    if (!pr.Acquire(deadline))
      return DeadlineError(start, deadline, "waiting for a free Redis Cluster router");
    if (!pr.conn()) pr.conn() = std::make_unique<RouterSlot>(router_options);
    RouterSlot& slot = *pr.conn();
    if (!SetRouterDeadline(slot.router, deadline))
      return DeadlineError(start, deadline, "waiting for a free Redis Cluster router");
    const Clock::time_point now = Clock::now();
    if (!slot.meta_read) {
      if (connected_once.exchange(true)) Add(counters.reconnects, 1);
      bool found = false;
      Status st = RefreshLayout(slot.router, &found);
      slot.meta_attempt = now;
      if (!st.ok()) {
        if (st.code() == StatusCode::kFailedPrecondition && slot.router.not_a_cluster())
          st = ef::InvalidArgument(st.message());  // it says to set redis.cluster=false
        // The meta's master unreachable, but another router read the layout
        // (Create did): go on with it, and read the meta again later.
        if (st.code() != StatusCode::kUnavailable || !meta_known.load()) return st;
        slot.meta_due = true;
      } else {
        meta_known.store(true);
        slot.meta_due = false;
      }
      slot.meta_read = true;
    } else if ((slot.meta_due && now - slot.meta_attempt >= kClusterMetaRecheck) ||
               LayoutRecheckDue()) {
      bool found = false;
      Add(counters.layout_reads, 1);
      slot.meta_attempt = now;
      // At most half of what is left: the meta's master may be the one that is
      // down, and this call's users may be elsewhere.
      slot.router.set_deadline_ms(std::max<int64_t>(1, Millis(deadline - now) / 2));
      Status st = RefreshLayout(slot.router, &found);
      if (st.ok()) {
        slot.meta_due = false;
      } else if (st.code() == StatusCode::kFailedPrecondition ||
                 st.code() == StatusCode::kPermissionDenied) {
        return st;  // a layout that no longer matches fails calls, as on one node
      }
    }
    if (!SetRouterDeadline(slot.router, deadline))
      return DeadlineError(start, deadline, "connecting to Redis Cluster");
    return Status::Ok();
  }

  // The router may retry for what is left of the call's deadline; false if nothing is.
  static bool SetRouterDeadline(ef::ClusterRouter& router, Clock::time_point deadline) {
    const int64_t left = Millis(deadline - Clock::now());
    if (left <= 0) return false;
    router.set_deadline_ms(left);
    return true;
  }

  // Cluster: the MGET of each user (commands[v], all keys in one slot) through the
  // router, each master's users in one pipeline, masters in parallel. A user whose
  // slot is migrating with its keys split between the two nodes gets TRYAGAIN:
  // its keys are then read with one GET each (each following its own ASK), within
  // the same deadline. *replies: one array per user, as MGET's. A user whose
  // master did not answer within the deadline (or answered an error) fails alone:
  // (*user_status)[v] says why, and the other users are answered; the returned
  // status fails every user (an ACL refusal, the deadline gone before the end).
  Status ClusterMget(ef::ClusterRouter& router,
                     const std::vector<std::vector<std::string>>& commands, Clock::time_point start,
                     Clock::time_point deadline, std::vector<ef::RedisReply>* replies,
                     std::vector<Status>* user_status);

  void Failed(const Status& st, bool policy_applies, Result* r) {
    r->seen.assign(r->seen.size(), false);
    r->seen_count = 0;
    r->code = CodeOf(st);
    r->error = st.message();
    if (policy_applies && options.on_error == OnError::kFailOpen) {
      r->ok = true;
      r->failed_open = true;
      Add(counters.failed_open, 1);
    } else {
      r->ok = false;
      Add(counters.errors, 1);
    }
  }

  std::vector<Result> Run(const Work* work, size_t n, const CallOptions& call);
  // One attempt of Run. With `first`, a value longer than the layout allows
  // marks the layout stale and returns at once with *redo set (nothing tested).
  std::vector<Result> RunOnce(const Work* work, size_t n, const CallOptions& call, bool first,
                              bool* redo);
  Status SingleMget(const std::vector<std::vector<std::string>>& commands, Clock::time_point start,
                    Clock::time_point deadline,
                    std::vector<ef::RedisConnection::ArrayReply>** replies);
  bool Ping(std::chrono::milliseconds deadline);
  Status PingCluster(Clock::time_point start, Clock::time_point deadline);
};

std::vector<Result> Client::Impl::Run(const Work* work, size_t n, const CallOptions& call) {
  bool redo = false;
  std::vector<Result> results = RunOnce(work, n, call, true, &redo);
  // A value longer than the layout allows: the meta was re-read (or will be by
  // the next call if that failed); answer with the layout it describes now.
  if (redo) results = RunOnce(work, n, call, false, &redo);
  thread_buffers.Trim();
  return results;
}

std::vector<Result> Client::Impl::RunOnce(const Work* work, size_t n, const CallOptions& call,
                                          bool first, bool* redo) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : options.timeout);
  const int64_t now_s = call.at_unix_seconds > 0
                            ? call.at_unix_seconds
                            : std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  std::vector<Result> results(n);
  std::vector<ef::ReadPlan> plans(n);
  std::vector<size_t> valid;
  valid.reserve(n);
  uint64_t candidates = 0;
  for (size_t i = 0; i < n; ++i) {
    Result& r = results[i];
    r.seen.assign(work[i].candidates.size(), false);
    candidates += work[i].candidates.size();
    // Keys depend only on prefix, bucket and window, which the stored layout
    // shares with the configured one.
    auto plan = ef::PlanRead(configured, work[i].user, now_s);
    if (!plan.ok()) {
      Failed(plan.status(), false, &r);
      continue;
    }
    r.buckets_read = plan->keys.size();
    plans[i] = std::move(*plan);
    valid.push_back(i);
  }
  if (first) {
    Add(counters.calls, 1);
    Add(counters.users, n);
    Add(counters.candidates, candidates);
  }
  if (valid.empty()) return results;

  std::vector<std::vector<std::string>> commands(valid.size());
  for (size_t v = 0; v < valid.size(); ++v) {
    std::vector<std::string>& keys = plans[valid[v]].keys;
    commands[v].reserve(keys.size() + 1);
    commands[v].emplace_back("MGET");
    for (std::string& key : keys) commands[v].push_back(std::move(key));
  }
  std::vector<ef::RedisReply> cluster_replies;
  // Standalone: the replies' values, views into the thread's receive buffer.
  std::vector<ef::RedisConnection::ArrayReply>* single_replies = nullptr;
  // Cluster: per user (a master down fails its users only); empty = all OK.
  std::vector<Status> user_status;
  size_t failed_users = 0;
  Status st;
  if (cluster) {
    ef::client::Pooled<RouterSlot> pr(routers);
    st = PrepareRouter(pr, start, deadline);
    if (st.ok())
      st =
          ClusterMget(pr.conn()->router, commands, start, deadline, &cluster_replies, &user_status);
    for (size_t v = 0; st.ok() && v < user_status.size(); ++v) {
      if (user_status[v].ok()) continue;
      ++failed_users;
      Failed(user_status[v], true, &results[valid[v]]);
    }
    if ((!st.ok() || failed_users > 0) && pr.conn()) pr.conn()->meta_due = true;
  } else {
    st = SingleMget(commands, start, deadline, &single_replies);
  }
  if (!st.ok()) {
    Add(counters.redis_errors, 1);
    ready.store(false, std::memory_order_relaxed);
    for (size_t i : valid) Failed(st, true, &results[i]);
    return results;
  }
  if (failed_users > 0) Add(counters.redis_errors, 1);
  ready.store(failed_users < valid.size(), std::memory_order_relaxed);

  const std::shared_ptr<const ef::Layout> layout_now = CurrentLayout();
  std::vector<std::string_view> cluster_values;
  auto values_of = [&](size_t v) -> const std::vector<std::string_view>& {
    if (single_replies) return (*single_replies)[v].values;
    cluster_values.clear();
    for (const ef::RedisReply& e : cluster_replies[v].elements) cluster_values.emplace_back(e.str);
    return cluster_values;
  };
  if (first) {
    bool long_value = false;
    for (size_t v = 0; v < valid.size() && !long_value; ++v) {
      if (!user_status.empty() && !user_status[v].ok()) continue;
      for (std::string_view value : values_of(v))
        long_value = long_value || NoteValueLength(value.size(), *layout_now);
    }
    if (long_value) {
      *redo = true;
      return results;
    }
  }
  uint64_t seen_total = 0;
  for (size_t v = 0; v < valid.size(); ++v) {
    if (!user_status.empty() && !user_status[v].ok()) continue;  // failed above
    const size_t i = valid[v];
    const std::vector<std::string_view>* values = &values_of(v);
    ef::CheckResult cr =
        ef::TestItems(*layout_now, *values, plans[i].bucket_starts, work[i].candidates);
    Result& r = results[i];
    r.seen = std::move(cr.seen);
    r.seen_count = cr.seen_count;
    r.buckets_present = cr.buckets_present;
    if (call.with_buckets) r.seen_bucket = std::move(cr.seen_bucket);
    seen_total += r.seen_count;
  }
  Add(counters.seen, seen_total);
  return results;
}

Status Client::Impl::SingleMget(const std::vector<std::vector<std::string>>& commands,
                                Clock::time_point start, Clock::time_point deadline,
                                std::vector<ef::RedisConnection::ArrayReply>** replies_out) {
  ef::client::PooledConnection pc(pool);
  std::string& request = thread_buffers.request;
  std::string& received = thread_buffers.received;
  std::vector<ef::RedisConnection::ArrayReply>& replies = thread_buffers.replies;
  *replies_out = &replies;
  bool reused = false;
  Status st = Prepare(pc, start, deadline, &reused);
  if (!st.ok()) return st;
  request.clear();
  for (const std::vector<std::string>& args : commands) {
    ef::AppendRespArrayHeader(args.size(), &request);
    for (const std::string& a : args) ef::AppendRespBulk(a, &request);
  }
  st = ExchangeOnce(pc, reused, deadline, [&](ef::RedisConnection& conn) {
    return conn.ReadArrays(request.data(), request.size(), commands.size(), &received, &replies);
  });
  if (!st.ok()) return st;
  for (size_t v = 0; v < replies.size() && st.ok(); ++v) {
    const ef::RedisConnection::ArrayReply& reply = replies[v];
    if (!reply.error.empty()) {
      st = MgetReplyError("redis " + pc.conn()->address(), reply.error);
      if (ef::RedisConnection::CallsForReconnect(reply.error)) pc.Drop();
    } else if (!reply.bulks || reply.values.size() != commands[v].size() - 1) {
      st = ef::Internal("redis " + pc.conn()->address() + ": MGET: unexpected reply");
      pc.Drop();
    }
  }
  if (st.ok() && Clock::now() > deadline) st = DeadlineError(start, deadline, "waiting for Redis");
  return st;
}

Status Client::Impl::ClusterMget(ef::ClusterRouter& router,
                                 const std::vector<std::vector<std::string>>& commands,
                                 Clock::time_point start, Clock::time_point deadline,
                                 std::vector<ef::RedisReply>* replies,
                                 std::vector<Status>* user_status) {
  std::vector<ef::ClusterRouter::SlotCommand> routed(commands.size());
  for (size_t v = 0; v < commands.size(); ++v) {
    // All of a user's keys share its hash tag, so the first key's slot is the user's.
    routed[v].slot = ef::KeySlot(commands[v][1]);
    routed[v].args = commands[v];
  }
  auto r = router.Commands(routed, user_status);
  if (!r.ok()) return r.status();
  *replies = std::move(*r);
  bool timed_out = false;
  auto fail = [&](size_t v, Status st) {
    if ((*user_status)[v].ok()) (*user_status)[v] = std::move(st);
  };
  // Users whose MGET met a migration (TRYAGAIN): one GET per key.
  std::vector<size_t> split;
  for (size_t v = 0; v < replies->size(); ++v) {
    if (!(*user_status)[v].ok()) {
      timed_out = true;  // no reply from its master within the deadline
      continue;
    }
    const ef::RedisReply& reply = (*replies)[v];
    if (reply.type == ef::RedisReply::Type::kError) {
      if (StartsWith(reply.str, "TRYAGAIN")) {
        split.push_back(v);
        continue;
      }
      fail(v, MgetReplyError("redis cluster (slot " + std::to_string(routed[v].slot) + ")",
                             reply.str));
      continue;
    }
    if (reply.type != ef::RedisReply::Type::kArray ||
        reply.elements.size() != commands[v].size() - 1)
      fail(v, ef::Internal("redis cluster (slot " + std::to_string(routed[v].slot) +
                           "): MGET: unexpected reply"));
  }
  if (!split.empty() && !SetRouterDeadline(router, deadline)) {
    const Status late = DeadlineError(start, deadline, "reading the keys of a migrating slot");
    for (size_t v : split) fail(v, late);
    split.clear();
  }
  if (!split.empty()) {
    std::vector<ef::ClusterRouter::SlotCommand> gets;
    for (size_t v : split) {
      for (size_t k = 1; k < commands[v].size(); ++k)
        gets.push_back({routed[v].slot, {"GET", commands[v][k]}});
    }
    std::vector<Status> get_status;
    auto g = router.Commands(gets, &get_status);
    if (!g.ok()) return g.status();
    size_t at = 0;
    for (size_t v : split) {
      ef::RedisReply array;
      array.type = ef::RedisReply::Type::kArray;
      for (size_t k = 1; k < commands[v].size(); ++k, ++at) {
        if (!get_status[at].ok()) {
          timed_out = true;
          fail(v, get_status[at]);
          continue;
        }
        ef::RedisReply& e = (*g)[at];
        if (e.type == ef::RedisReply::Type::kError) {
          // MGET answers nil for a key of another type; GET says WRONGTYPE.
          if (!StartsWith(e.str, "WRONGTYPE")) {
            fail(v, ef::Unavailable("redis cluster (slot " + std::to_string(routed[v].slot) +
                                    "): GET " + commands[v][k] + ": " + e.str));
            continue;
          }
          e = ef::RedisReply{};
          e.type = ef::RedisReply::Type::kNil;
        }
        array.elements.push_back(std::move(e));
      }
      if ((*user_status)[v].ok()) (*replies)[v] = std::move(array);
    }
  }
  if (timed_out && Clock::now() >= deadline) Add(counters.timeouts, 1);
  if (Clock::now() > deadline) return DeadlineError(start, deadline, "waiting for Redis Cluster");
  return Status::Ok();
}

bool Client::Impl::Ping(std::chrono::milliseconds deadline_in) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + deadline_in;
  if (cluster) {
    Status st = PingCluster(start, deadline);
    if (!st.ok()) Add(counters.redis_errors, 1);
    ready.store(st.ok(), std::memory_order_relaxed);
    return st.ok();
  }
  ef::client::PooledConnection pc(pool);
  bool reused = false;
  Status st = Prepare(pc, start, deadline, &reused);
  if (st.ok()) {
    ef::RedisReply reply;
    st = ExchangeOnce(pc, reused, deadline, [&reply](ef::RedisConnection& conn) {
      auto r = conn.Command({"PING"});
      if (!r.ok()) return r.status();
      reply = std::move(*r);
      return Status::Ok();
    });
    // A failed exchange dropped the connection (or a new one failed): st says why.
    if (st.ok() && reply.type == ef::RedisReply::Type::kError) {
      st = ef::Unavailable("redis " + pc.conn()->address() + ": PING: " + reply.str);
      if (ef::RedisConnection::CallsForReconnect(reply.str)) pc.Drop();
    } else if (st.ok() && Clock::now() > deadline) {
      st = DeadlineError(start, deadline, "waiting for Redis");
    }
  }
  if (!st.ok()) Add(counters.redis_errors, 1);
  ready.store(st.ok(), std::memory_order_relaxed);
  return st.ok();
}

// PING on every master (one slot of each), in parallel.
Status Client::Impl::PingCluster(Clock::time_point start, Clock::time_point deadline) {
  ef::client::Pooled<RouterSlot> pr(routers);
  Status st = PrepareRouter(pr, start, deadline);
  if (st.ok()) {
    ef::ClusterRouter& router = pr.conn()->router;
    const ef::SlotMap& map = router.slot_map();
    std::vector<ef::ClusterRouter::SlotCommand> pings;
    std::vector<bool> shard_done(map.shards().size(), false);
    for (int slot = 0; slot < ef::kClusterSlots; ++slot) {
      const int shard = map.ShardOf(static_cast<uint16_t>(slot));
      if (shard < 0 || shard_done[static_cast<size_t>(shard)]) continue;
      shard_done[static_cast<size_t>(shard)] = true;
      pings.push_back({static_cast<uint16_t>(slot), {"PING"}});
    }
    auto r = router.Commands(pings);
    if (!r.ok()) {
      st = r.status();
    } else {
      for (const ef::RedisReply& reply : *r) {
        if (reply.type == ef::RedisReply::Type::kError) {
          st = ef::Unavailable("redis cluster: PING: " + reply.str);
          break;
        }
      }
    }
    if (st.ok() && Clock::now() > deadline)
      st = DeadlineError(start, deadline, "waiting for Redis Cluster");
  }
  if (!st.ok() && pr.conn()) pr.conn()->meta_due = true;
  return st;
}

std::unique_ptr<Client> Client::Create(const ClientOptions& options, std::string* error,
                                       ErrorCode* code) {
  auto fail = [&](const Status& st, ErrorCode c) -> std::unique_ptr<Client> {
    if (error) *error = st.message();
    if (code) *code = c;
    return nullptr;
  };
  if (options.pool_size < 1)
    return fail(ef::InvalidArgument("ClientOptions.pool_size: must be >= 1, got 0"),
                ErrorCode::kInvalidArgument);
  if (options.timeout.count() <= 0)
    return fail(ef::InvalidArgument("ClientOptions.timeout: must be > 0 ms, got " +
                                    std::to_string(options.timeout.count())),
                ErrorCode::kInvalidArgument);
  auto config = ef::LoadConfig(options.config_path, options.overrides);
  if (!config.ok()) return fail(config.status(), ErrorCode::kInvalidArgument);
  auto layout = ef::LayoutFromConfig(config->filter);
  if (!layout.ok()) return fail(layout.status(), ErrorCode::kInvalidArgument);
  auto redis = ef::RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return fail(redis.status(), ErrorCode::kInvalidArgument);

  auto impl = std::make_unique<Impl>(options, std::move(*layout), std::move(*redis));
  // The first connection may take redis.connect_timeout (start-up is not a call).
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(std::max<int64_t>(impl->redis.connect_timeout_ms,
                                                                 Millis(options.timeout)));
  // redis.cluster: auto asks the seeds. If none answers, that is the error (it
  // names each seed, the timeout that fired and the time waited): a second
  // attempt on the single-node path would only have what was left of the
  // deadline, and report that ("PING: timed out after 1 ms" after 5 s). Other
  // failures of the question (an ACL without +cluster|slots) fall back to it.
  auto use = ef::UseCluster(impl->redis);
  if (!use.ok() && use.status().code() == StatusCode::kUnavailable)
    return fail(use.status(), ErrorCode::kUnavailable);
  if (use.ok() && *use) {
    auto router_options = ef::ClusterOptionsFrom(impl->redis);
    if (!router_options.ok()) return fail(router_options.status(), ErrorCode::kInvalidArgument);
    impl->cluster = true;
    impl->router_options = std::move(*router_options);
    impl->router_options.return_tryagain = true;  // migrating users: one GET per key
    ef::client::Pooled<RouterSlot> pr(impl->routers);
    Status st = impl->PrepareRouter(pr, Clock::now(), deadline);
    if (!st.ok()) {
      pr.Drop();
      return fail(st, CodeOf(st));
    }
    {
      std::lock_guard lock(impl->layout_mu);
      if (!impl->stored && !options.allow_missing_layout) {
        pr.Drop();
        return fail(ef::FailedPrecondition(
                        "redis cluster " + impl->redis.addresses.front() +
                        "...: no layout stored at " + ef::MetaKey(impl->configured.prefix) +
                        ": nothing was written with this key prefix (check filter.key_prefix "
                        "and redis.address, or set ClientOptions::allow_missing_layout)"),
                    ErrorCode::kLayoutMismatch);
      }
    }
    impl->ready.store(true);
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  }
  ef::client::ConnectionPool::Conn conn;
  Status st = impl->Connect(deadline, &conn);
  if (!st.ok()) {
    // A connection failure is kUnavailable even if the handshake said otherwise
    // (e.g. SELECT refused), except refused credentials.
    ErrorCode c = CodeOf(st);
    if (c == ErrorCode::kLayoutMismatch && st.message().find("SELECT") != std::string::npos)
      c = ErrorCode::kInvalidArgument;
    return fail(st, c);
  }
  {
    std::lock_guard lock(impl->layout_mu);
    if (!impl->stored && !options.allow_missing_layout) {
      return fail(ef::FailedPrecondition(
                      "redis " + conn->address() + ": no layout stored at " +
                      ef::MetaKey(impl->configured.prefix) +
                      ": nothing was written with this key prefix (check filter.key_prefix and "
                      "redis.address, or set ClientOptions::allow_missing_layout)"),
                  ErrorCode::kLayoutMismatch);
    }
  }
  ef::client::ConnectionPool::Conn slot;
  (void)impl->pool.Acquire(Clock::now(), &slot);  // a new pool: a free, empty slot
  impl->pool.Release(std::move(conn));
  impl->ready.store(true);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates) {
  return Seen(user, candidates, CallOptions{});
}

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates,
                    std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return Seen(user, candidates, call);
}

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates,
                    const CallOptions& call) {
  const Work work{user, candidates};
  return std::move(impl_->Run(&work, 1, call).front());
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates) {
  return SeenViews(user, candidates, CallOptions{});
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                         std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenViews(user, candidates, call);
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                         const CallOptions& call) {
  const Work work{user, candidates};
  return std::move(impl_->Run(&work, 1, call).front());
}

std::vector<std::string> Client::Unseen(std::string_view user,
                                        const std::vector<std::string>& candidates) {
  return Unseen(user, candidates, std::chrono::milliseconds(0));
}

std::vector<std::string> Client::Unseen(std::string_view user,
                                        const std::vector<std::string>& candidates,
                                        std::chrono::milliseconds deadline) {
  Result r = Seen(user, candidates, deadline);
  std::vector<std::string> out;
  if (!r.ok) return out;
  out.reserve(candidates.size() - r.seen_count);
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!r.seen[i]) out.push_back(candidates[i]);
  return out;
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries) {
  return SeenBatch(queries, CallOptions{});
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries,
                                      std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenBatch(queries, call);
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries, const CallOptions& call) {
  std::vector<Work> work;
  work.reserve(queries.size());
  for (const Query& q : queries) work.push_back({q.user, q.candidates});
  return impl_->Run(work.data(), work.size(), call);
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries) {
  return SeenBatchViews(queries, CallOptions{});
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries,
                                           std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenBatchViews(queries, call);
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries,
                                           const CallOptions& call) {
  std::vector<Work> work;
  work.reserve(queries.size());
  for (const QueryView& q : queries) work.push_back({q.user, q.candidates});
  return impl_->Run(work.data(), work.size(), call);
}

bool Client::Ping(std::chrono::milliseconds deadline) { return impl_->Ping(deadline); }

bool Client::Ready() const { return impl_->ready.load(std::memory_order_relaxed); }

ClientStats Client::stats() const {
  const Counters& c = impl_->counters;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  ClientStats s;
  s.calls = get(c.calls);
  s.users = get(c.users);
  s.candidates = get(c.candidates);
  s.seen = get(c.seen);
  s.failed_open = get(c.failed_open);
  s.errors = get(c.errors);
  s.redis_errors = get(c.redis_errors);
  s.timeouts = get(c.timeouts);
  s.reconnects = get(c.reconnects);
  s.layout_reads = get(c.layout_reads);
  s.stale_retries = get(c.stale_retries);
  return s;
}

LayoutInfo Client::layout() const {
  std::shared_ptr<const ef::Layout> l;
  LayoutInfo info;
  {
    std::lock_guard lock(impl_->layout_mu);
    l = impl_->layout;
    info.stored = impl_->stored;
  }
  info.version = l->version();
  info.stages = l->stages;
  info.prefix = l->prefix;
  info.bucket_seconds = l->bucket_seconds;
  info.window_seconds = l->window_seconds;
  return info;
}

}  // namespace exposure_filter
