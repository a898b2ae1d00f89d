// Client::Impl (client/impl.h) on Redis Cluster: pooled routers, MGET by slot
// with the fallback for a migrating slot (one GET per key), PING per master.
#include "bloom/keys.h"
#include "client/impl.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;
using ef::StatusCode;

namespace {

// Least time between two meta re-reads of one router after a failure.
constexpr auto kClusterMetaRecheck = std::chrono::seconds(1);
// The most a periodic meta re-read may take of a call's deadline (a healthy
// master answers a GET in well under a millisecond).
constexpr auto kPeriodicMetaBudget = std::chrono::milliseconds(100);

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

using SlotCommands = std::vector<ef::ClusterRouter::SlotCommand>;

// The first error of a user stands.
void FailUser(std::vector<Status>* user_status, size_t v, Status st) {
  if ((*user_status)[v].ok()) (*user_status)[v] = std::move(st);
}

// One MGET per user in its slot, then one GET per content map entry, each in its
// own slot (they go in the same pipelines).
SlotCommands RouteMgets(const std::vector<std::vector<std::string>>& commands,
                        const Lookups* lookups) {
  SlotCommands routed(commands.size());
  for (size_t v = 0; v < commands.size(); ++v) {
    // All of a user's keys share its hash tag, so the first key's slot is the user's.
    routed[v].slot = ef::KeySlot(commands[v][1]);
    routed[v].args = commands[v];
  }
  if (lookups != nullptr) {
    routed.reserve(commands.size() + lookups->keys.size());
    for (const std::string& key : lookups->keys) routed.push_back({ef::KeySlot(key), {"GET", key}});
  }
  return routed;
}

// The map entries' values, read past the users' replies: empty (unknown) and
// not *answered for a GET with no answer (its master down) or an error reply.
std::vector<std::string_view> LookupValues(size_t users, size_t keys,
                                           const std::vector<ef::RedisReply>& replies,
                                           const std::vector<Status>& status,
                                           std::vector<bool>* answered) {
  std::vector<std::string_view> values(keys);
  answered->assign(keys, false);
  for (size_t k = 0; k < keys; ++k) {
    const size_t at = users + k;
    if (!status[at].ok()) continue;
    if (replies[at].type == ef::RedisReply::Type::kString) {
      values[k] = replies[at].str;
      (*answered)[k] = true;
    } else if (replies[at].type == ef::RedisReply::Type::kNil) {
      (*answered)[k] = true;
    }
  }
  return values;
}

// What the users' MGET replies leave to do.
struct MgetCheck {
  std::vector<size_t> split;  // users whose MGET met a migration (TRYAGAIN): one GET per key
  bool timed_out = false;     // a user's master gave no reply within the deadline
};

// Fails each user whose MGET got an error reply or not one value per key.
MgetCheck CheckMgets(const SlotCommands& routed,
                     const std::vector<std::vector<std::string>>& commands,
                     const std::vector<ef::RedisReply>& replies, std::vector<Status>* user_status) {
  MgetCheck check;
  for (size_t v = 0; v < replies.size(); ++v) {
    if (!(*user_status)[v].ok()) {
      check.timed_out = true;
      continue;
    }
    const ef::RedisReply& reply = replies[v];
    auto where = [&] { return "redis cluster (slot " + std::to_string(routed[v].slot) + ")"; };
    if (reply.type == ef::RedisReply::Type::kError) {
      if (StartsWith(reply.str, "TRYAGAIN")) {
        check.split.push_back(v);
      } else {
        FailUser(user_status, v, MgetReplyError(where(), reply.str));
      }
    } else if (reply.type != ef::RedisReply::Type::kArray ||
               reply.elements.size() != commands[v].size() - 1) {
      FailUser(user_status, v, ef::Internal(where() + ": MGET: unexpected reply"));
    }
  }
  return check;
}

// One GET per key of each split user, in the user's slot, in split order.
SlotCommands SplitGets(const std::vector<size_t>& split, const SlotCommands& routed,
                       const std::vector<std::vector<std::string>>& commands) {
  SlotCommands gets;
  for (size_t v : split) {
    for (size_t k = 1; k < commands[v].size(); ++k)
      gets.push_back({routed[v].slot, {"GET", commands[v][k]}});
  }
  return gets;
}

// Each split user's GET replies as the array its MGET would have been (a
// WRONGTYPE error is MGET's nil); a GET without an answer or with another error
// fails the user. True if a GET had no answer within the deadline.
bool MergeGets(const std::vector<size_t>& split, const SlotCommands& routed,
               const std::vector<std::vector<std::string>>& commands,
               std::vector<ef::RedisReply>& gets, const std::vector<Status>& get_status,
               std::vector<ef::RedisReply>* replies, std::vector<Status>* user_status) {
  bool timed_out = false;
  size_t at = 0;
  for (size_t v : split) {
    ef::RedisReply array;
    array.type = ef::RedisReply::Type::kArray;
    for (size_t k = 1; k < commands[v].size(); ++k, ++at) {
      if (!get_status[at].ok()) {
        timed_out = true;
        FailUser(user_status, v, get_status[at]);
        continue;
      }
      ef::RedisReply& e = gets[at];
      if (e.type == ef::RedisReply::Type::kError) {
        if (!StartsWith(e.str, "WRONGTYPE")) {
          FailUser(user_status, v,
                   ef::Unavailable("redis cluster (slot " + std::to_string(routed[v].slot) +
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
  return timed_out;
}

}  // namespace

Status Client::Impl::PrepareRouter(ef::client::Pooled<RouterSlot>& pr, Clock::time_point start,
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
      layout_read_failed.store(true, std::memory_order_relaxed);
    } else {
      meta_known.store(true);
      slot.meta_due = false;
    }
    slot.meta_read = true;
  } else if (const Recheck due = (slot.meta_due && now - slot.meta_attempt >= kClusterMetaRecheck)
                                     ? Recheck::kPeriodic  // the layout another router read serves
                                     : LayoutRecheckDue();
             due != Recheck::kNo) {
    bool found = false;
    Add(counters.layout_reads, 1);
    slot.meta_attempt = now;
    // At most half of what is left: the meta's master may be the one that is
    // down, and this call's users may be elsewhere. A re-read this call's answer
    // does not need (the period ran out, or the retry of a first read that found
    // the meta's master down) at most kPeriodicMetaBudget: with the meta's master
    // down the router tries it until its deadline, and every call that fell due
    // lost half its deadline (a batch of live masters' users failed open on a
    // loaded machine; "cluster readers: a periodic layout re-read ...").
    int64_t budget = std::max<int64_t>(1, Millis(deadline - now) / 2);
    if (due == Recheck::kPeriodic) budget = std::min<int64_t>(budget, Millis(kPeriodicMetaBudget));
    slot.router.set_deadline_ms(budget);
    Status st = RefreshLayout(slot.router, &found);
    if (st.ok()) {
      slot.meta_due = false;
    } else if (st.code() == StatusCode::kFailedPrecondition ||
               st.code() == StatusCode::kPermissionDenied) {
      return st;  // a layout that no longer matches fails calls, as on one node
    } else {
      LayoutRecheckFailed();  // retried in kLayoutRetry by whichever router comes next
    }
  }
  // A layout an upgrade may have replaced is not used once its copy is older
  // than half the smallest lead (the meta's master down for that long).
  if (layout_read_failed.load(std::memory_order_relaxed)) {
    if (Status fresh = LayoutFresh(); !fresh.ok())
      return ef::Unavailable("redis cluster: " + fresh.message());
  }
  if (!SetRouterDeadline(slot.router, deadline))
    return DeadlineError(start, deadline, "connecting to Redis Cluster");
  return Status::Ok();
}

bool Client::Impl::SetRouterDeadline(ef::ClusterRouter& router, Clock::time_point deadline) {
  const int64_t left = Millis(deadline - Clock::now());
  if (left <= 0) return false;
  router.set_deadline_ms(left);
  return true;
}

Status Client::Impl::ClusterMget(ef::ClusterRouter& router,
                                 const std::vector<std::vector<std::string>>& commands,
                                 Clock::time_point start, Clock::time_point deadline,
                                 std::vector<ef::RedisReply>* replies,
                                 std::vector<Status>* user_status, Lookups* lookups) {
  const SlotCommands routed = RouteMgets(commands, lookups);
  auto r = router.Commands(routed, user_status);
  if (!r.ok()) return r.status();
  *replies = std::move(*r);
  if (lookups != nullptr) {
    std::vector<bool> answered;
    const std::vector<std::string_view> values =
        LookupValues(commands.size(), lookups->keys.size(), *replies, *user_status, &answered);
    DecodeLookups(values, &answered, lookups);
    replies->resize(commands.size());
    user_status->resize(commands.size());
  }
  MgetCheck check = CheckMgets(routed, commands, *replies, user_status);
  if (!check.split.empty() && !SetRouterDeadline(router, deadline)) {
    const Status late = DeadlineError(start, deadline, "reading the keys of a migrating slot");
    for (size_t v : check.split) FailUser(user_status, v, late);
    check.split.clear();
  }
  if (!check.split.empty()) {
    std::vector<Status> get_status;
    auto g = router.Commands(SplitGets(check.split, routed, commands), &get_status);
    if (!g.ok()) return g.status();
    if (MergeGets(check.split, routed, commands, *g, get_status, replies, user_status))
      check.timed_out = true;
  }
  if (check.timed_out && Clock::now() >= deadline) Add(counters.timeouts, 1);
  // Every wait above ended by the deadline (the router's socket timeouts are
  // what was left of it), so what was answered stands, a master that gave no
  // reply failing only its own users (user_status) and leaving its map entries
  // unknown (docs/CONTENT.md rule 5). Before issue 52 a call that ended a
  // moment past its deadline failed every user, the answered ones too.
  return Status::Ok();
}

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

Status Client::Impl::ClusterCommands(std::string_view key,
                                     const std::vector<std::vector<std::string>>& commands,
                                     Clock::time_point start, Clock::time_point deadline,
                                     std::vector<ef::RedisReply>* replies) {
  ef::client::Pooled<RouterSlot> pr(routers);
  Status st = PrepareRouter(pr, start, deadline);
  if (st.ok()) {
    const uint16_t slot = ef::KeySlot(key);
    std::vector<ef::ClusterRouter::SlotCommand> in_slot;
    in_slot.reserve(commands.size());
    for (const std::vector<std::string>& args : commands) in_slot.push_back({slot, args});
    auto r = pr.conn()->router.Commands(in_slot);
    if (!r.ok()) {
      st = r.status();
    } else {
      *replies = std::move(*r);
      if (Clock::now() > deadline) st = DeadlineError(start, deadline, "waiting for Redis Cluster");
    }
  }
  if (!st.ok() && pr.conn()) pr.conn()->meta_due = true;
  return st;
}

}  // namespace exposure_filter
