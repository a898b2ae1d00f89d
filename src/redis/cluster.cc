#include "redis/cluster.h"

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

#include "bloom/keys.h"

namespace ef {

namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A host as Redis prints it: no spaces, control bytes, commas or brackets.
bool ValidHost(std::string_view host) {
  for (unsigned char c : host) {
    if (c <= ' ' || c == 0x7f || c == ',' || c == '[' || c == ']') return false;
  }
  return true;
}

std::optional<NodeAddress> ParseAddress(std::string_view text, bool allow_empty_host) {
  NodeAddress out;
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    if (host.empty()) return std::nullopt;
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if ((host.empty() && !allow_empty_host) || !ValidHost(host)) return std::nullopt;
  int p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
    return std::nullopt;
  out.host = std::string(host);
  out.port = p;
  return out;
}

// Error replies after which the same command may succeed later (see cluster.h).
bool RetriableReply(std::string_view text) {
  return StartsWith(text, "TRYAGAIN") || StartsWith(text, "CLUSTERDOWN") ||
         StartsWith(text, "LOADING") || StartsWith(text, "BUSY ") ||
         StartsWith(text, "MASTERDOWN") || StartsWith(text, "READONLY");
}

// Retriable replies that say our view of the topology may be wrong.
bool CallsForRefresh(std::string_view text) {
  return StartsWith(text, "CLUSTERDOWN") || StartsWith(text, "MASTERDOWN") ||
         StartsWith(text, "READONLY");
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// A connection's timeouts (connect, and each reply, the handshake's too) within
// what is left of a call's deadline, named so in their errors.
void ClampTimeouts(int64_t left_ms, RedisOptions* o) {
  if (left_ms < o->connect_timeout_ms) {
    o->connect_timeout_ms = left_ms;
    o->connect_timeout_name = "what was left of the call's deadline";
  }
  if (left_ms < o->command_timeout_ms) {
    o->command_timeout_ms = left_ms;
    o->command_timeout_name = "what was left of the call's deadline";
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Addresses and redirects
// ---------------------------------------------------------------------------

std::string NodeAddress::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

StatusOr<NodeAddress> ParseNodeAddress(std::string_view text) {
  std::optional<NodeAddress> a = ParseAddress(text, /*allow_empty_host=*/false);
  if (!a) return InvalidArgument("expected host:port, got '" + std::string(text) + "'");
  return *a;
}

StatusOr<std::vector<NodeAddress>> ParseSeedList(std::string_view text) {
  std::vector<NodeAddress> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = text.find(',', pos);
    std::string_view entry =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    StatusOr<NodeAddress> a = ParseNodeAddress(entry);
    if (!a.ok()) return a.status().Prefixed("in seed list '" + std::string(text) + "'");
    out.push_back(*a);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

// MOVED <slot> <endpoint>:<port>  /  ASK <slot> <endpoint>:<port>
std::optional<Redirect> ParseRedirect(std::string_view text) {
  Redirect r;
  if (StartsWith(text, "MOVED ")) {
    r.kind = Redirect::Kind::kMoved;
    text.remove_prefix(6);
  } else if (StartsWith(text, "ASK ")) {
    r.kind = Redirect::Kind::kAsk;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = text.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  unsigned slot = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + space, slot);
  if (ec != std::errc() || end != text.data() + space || slot >= kClusterSlots) return std::nullopt;
  r.slot = static_cast<uint16_t>(slot);
  std::optional<NodeAddress> a = ParseAddress(text.substr(space + 1), /*allow_empty_host=*/true);
  if (!a) return std::nullopt;
  r.address = std::move(*a);
  return r;
}

// ---------------------------------------------------------------------------
// SlotMap
// ---------------------------------------------------------------------------

SlotMap::SlotMap() : slot_shard_(kClusterSlots, -1) {}

const NodeAddress* SlotMap::MasterOf(uint16_t slot) const {
  const int s = ShardOf(slot);
  return s < 0 ? nullptr : &shards_[static_cast<size_t>(s)].master;
}

size_t SlotMap::CoveredSlots() const {
  return static_cast<size_t>(
      std::count_if(slot_shard_.begin(), slot_shard_.end(), [](int16_t s) { return s >= 0; }));
}

int SlotMap::ShardIndexOf(const NodeAddress& master, std::string_view id) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i].master == master) return static_cast<int>(i);
  }
  shards_.push_back(Shard{master, std::string(id), {}});
  return static_cast<int>(shards_.size() - 1);
}

void SlotMap::Assign(uint16_t slot, const NodeAddress& master) {
  slot_shard_[slot & (kClusterSlots - 1)] = static_cast<int16_t>(ShardIndexOf(master, ""));
}

std::vector<NodeAddress> SlotMap::AllNodes() const {
  std::vector<NodeAddress> out;
  auto add = [&](const NodeAddress& a) {
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  for (const Shard& s : shards_) add(s.master);
  for (const Shard& s : shards_) {
    for (const NodeAddress& r : s.replicas) add(r);
  }
  return out;
}

namespace {

using ReplyType = RedisReply::Type;

std::string SlotsEntry(size_t entry) { return "CLUSTER SLOTS entry " + std::to_string(entry); }

// A node of CLUSTER SLOTS entry `entry`: [host, port, id, ...]; an empty, NULL
// or "?" host is `queried_host`. *id (if given): the node ID, "" if none.
StatusOr<NodeAddress> ReadSlotsNode(const RedisReply& n, size_t entry,
                                    std::string_view queried_host, std::string* id) {
  if (n.type != ReplyType::kArray || n.elements.size() < 2 ||
      n.elements[1].type != ReplyType::kInteger)
    return Internal(SlotsEntry(entry) + ": a node is not [host, port, ...]");
  const RedisReply& h = n.elements[0];
  if (h.type != ReplyType::kString && h.type != ReplyType::kNil)
    return Internal(SlotsEntry(entry) + ": a node's host is not a string");
  NodeAddress a;
  a.host = h.type == ReplyType::kNil || h.str.empty() || h.str == "?" ? std::string(queried_host)
                                                                      : h.str;
  if (n.elements[1].integer < 1 || n.elements[1].integer > 65535 || !ValidHost(a.host))
    return Internal(SlotsEntry(entry) + ": bad node address '" + a.host + ":" +
                    std::to_string(n.elements[1].integer) + "'");
  a.port = static_cast<int>(n.elements[1].integer);
  if (id)
    *id =
        n.elements.size() > 2 && n.elements[2].type == ReplyType::kString ? n.elements[2].str : "";
  return a;
}

// The slot range of CLUSTER SLOTS entry `entry`: [start, end, master, replicas...].
StatusOr<std::pair<long long, long long>> ReadSlotRange(const RedisReply& r, size_t entry) {
  if (r.type != ReplyType::kArray || r.elements.size() < 3 ||
      r.elements[0].type != ReplyType::kInteger || r.elements[1].type != ReplyType::kInteger)
    return Internal(SlotsEntry(entry) + ": not [start, end, master, replicas...]");
  const long long start = r.elements[0].integer, end = r.elements[1].integer;
  if (start < 0 || end < start || end >= kClusterSlots)
    return Internal(SlotsEntry(entry) + ": bad slot range " + std::to_string(start) + "-" +
                    std::to_string(end));
  return std::make_pair(start, end);
}

}  // namespace

StatusOr<SlotMap> SlotMap::FromClusterSlots(const RedisReply& reply,
                                            std::string_view queried_host) {
  if (reply.type != ReplyType::kArray) {
    return Internal("CLUSTER SLOTS: expected an array, got " +
                    (reply.type == ReplyType::kError ? "error '" + reply.str + "'"
                                                     : std::string("another reply type")));
  }
  SlotMap map;
  for (size_t e = 0; e < reply.elements.size(); ++e) {
    const RedisReply& r = reply.elements[e];
    StatusOr<std::pair<long long, long long>> range = ReadSlotRange(r, e);
    if (!range.ok()) return range.status();
    std::string id;
    StatusOr<NodeAddress> master = ReadSlotsNode(r.elements[2], e, queried_host, &id);
    if (!master.ok()) return master.status();
    const int shard = map.ShardIndexOf(*master, id);
    for (size_t i = 3; i < r.elements.size(); ++i) {
      StatusOr<NodeAddress> replica = ReadSlotsNode(r.elements[i], e, queried_host, nullptr);
      if (!replica.ok()) return replica.status();
      auto& replicas = map.shards_[static_cast<size_t>(shard)].replicas;
      if (std::find(replicas.begin(), replicas.end(), *replica) == replicas.end())
        replicas.push_back(*replica);
    }
    for (long long s = range->first; s <= range->second; ++s) {
      if (map.slot_shard_[static_cast<size_t>(s)] >= 0)
        return Internal(SlotsEntry(e) + ": slot " + std::to_string(s) + " listed twice");
      map.slot_shard_[static_cast<size_t>(s)] = static_cast<int16_t>(shard);
    }
  }
  return map;
}

// ---------------------------------------------------------------------------
// ClusterRouter
// ---------------------------------------------------------------------------

ClusterRouter::ClusterRouter(ClusterRouterOptions options) : options_(std::move(options)) {}

ClusterRouter::~ClusterRouter() = default;

RedisOptions ClusterRouter::OptionsFor(const NodeAddress& node) const {
  RedisOptions o = options_.redis;
  o.host = node.host;
  o.port = node.port;
  return o;
}

Status ClusterRouter::ReadTopology(const std::vector<NodeAddress>& candidates) {
  std::vector<std::string> errors;
  // The node that answered last time first: a dead master is not tried first on
  // every refresh of a failover.
  std::vector<NodeAddress> order = candidates;
  const auto good = std::find(order.begin(), order.end(), last_answered_);
  if (good != order.end()) std::rotate(order.begin(), good, good + 1);
  for (const NodeAddress& node : order) {
    RedisOptions o = OptionsFor(node);
    o.db = 0;  // SELECT is refused in cluster mode; Discover checks db once it knows
    // Within the deadline of the call that asked for the read, if any.
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(call_deadline_ - Clock::now())
            .count();
    if (left <= 0) {
      errors.push_back("deadline reached before " + node.ToString() + " was asked");
      break;
    }
    ClampTimeouts(left, &o);
    auto conn = RedisConnection::Connect(o);
    if (!conn.ok()) {
      if (conn.status().code() == StatusCode::kPermissionDenied) return conn.status();
      errors.push_back(conn.status().message());
      continue;
    }
    auto reply = (*conn)->Command({"CLUSTER", "SLOTS"});
    if (!reply.ok()) {
      errors.push_back(reply.status().message());
      continue;
    }
    if (reply->type == RedisReply::Type::kError &&
        RedisConnection::ClassifyErrorReply(reply->str) == RedisErrorKind::kAuth) {
      // Not "not a cluster": an ACL refusal says nothing about what the node is,
      // and asking again will not change it.
      return PermissionDenied(
          "redis " + node.ToString() + ": CLUSTER SLOTS: " + reply->str +
          " (redis.cluster: auto asks it to tell a Redis Cluster from a single node: grant "
          "the ACL user '+cluster|slots', or set redis.cluster to false or true)");
    }
    if (reply->type == RedisReply::Type::kError &&
        reply->str.find("cluster support disabled") != std::string::npos) {
      not_a_cluster_ = true;
      return FailedPrecondition("redis " + node.ToString() +
                                " is not a cluster (cluster support disabled); set "
                                "redis.cluster=false");
    }
    StatusOr<SlotMap> map = SlotMap::FromClusterSlots(*reply, node.host);
    if (!map.ok()) {
      errors.push_back("redis " + node.ToString() + ": " + map.status().message());
      continue;
    }
    if (map->CoveredSlots() == 0) {
      errors.push_back("redis " + node.ToString() + ": CLUSTER SLOTS lists no slot");
      continue;
    }
    not_a_cluster_ = false;
    stale_ = false;
    last_answered_ = node;
    map_ = std::move(*map);
    have_map_ = true;
    last_read_ = Clock::now();
    ++stats_.topology_reads;
    // Keep connections to masters only; others are made again if needed.
    for (auto it = connections_.begin(); it != connections_.end();) {
      bool master = false;
      for (const auto& s : map_.shards()) master = master || s.master == it->first;
      it = master ? std::next(it) : connections_.erase(it);
    }
    return Status::Ok();
  }
  last_read_ = Clock::now();
  unanswered_ = errors;
  return Unavailable("redis cluster: no node answered CLUSTER SLOTS: " + Join(errors, "; "));
}

Status ClusterRouter::Discover() {
  std::vector<NodeAddress> candidates = options_.seeds;
  for (const NodeAddress& a : map_.AllNodes()) {
    if (std::find(candidates.begin(), candidates.end(), a) == candidates.end())
      candidates.push_back(a);
  }
  if (candidates.empty()) return InvalidArgument("redis cluster: no seed address given");
  EF_RETURN_IF_ERROR(ReadTopology(candidates));
  if (options_.redis.db != 0)
    return InvalidArgument("redis.db must be 0 with Redis Cluster (got " +
                           std::to_string(options_.redis.db) + ")");
  return Status::Ok();
}

Status ClusterRouter::Refresh() {
  if (!have_map_) return Discover();
  if (Clock::now() - last_read_ < std::chrono::milliseconds(options_.refresh_interval_ms)) {
    stale_ = true;  // read at the start of a later call
    return Status::Ok();
  }
  std::vector<NodeAddress> candidates = map_.AllNodes();
  for (const NodeAddress& a : options_.seeds) {
    if (std::find(candidates.begin(), candidates.end(), a) == candidates.end())
      candidates.push_back(a);
  }
  return ReadTopology(candidates);
}

StatusOr<RedisConnection*> ClusterRouter::Connection(const NodeAddress& master) {
  std::unique_ptr<RedisConnection>& conn = connections_[master];
  if (!conn) {
    auto c = RedisConnection::Connect(OptionsFor(master));
    if (!c.ok()) return c.status();
    conn = std::move(*c);
    ++stats_.connects;
  }
  return conn.get();
}

void ClusterRouter::DropConnection(const NodeAddress& master) { connections_.erase(master); }

StatusOr<RedisReply> ClusterRouter::Command(std::string_view key, std::vector<std::string> args) {
  return CommandInSlot(KeySlot(key), std::move(args));
}

StatusOr<RedisReply> ClusterRouter::CommandInSlot(uint16_t slot, std::vector<std::string> args) {
  std::vector<SlotCommand> one(1);
  one[0].slot = slot;
  one[0].args = std::move(args);
  auto r = Commands(one);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

namespace {

// Where one Commands call stands between its rounds.
struct CallProgress {
  explicit CallProgress(size_t n) : replies(n), pending(n), ask(n), redirects(n, 0) {
    for (size_t i = 0; i < n; ++i) pending[i] = i;
  }
  std::vector<RedisReply> replies;              // the final reply of each command
  std::vector<size_t> pending;                  // commands without one, in send order
  std::vector<std::optional<NodeAddress>> ask;  // an ASK to follow on the next send
  std::vector<int> redirects;                   // redirections followed, per command
  std::string last_error;                       // for the error if the deadline passes
};

// The pipeline to one master in a round, then what came of it.
struct RoundGroup {
  std::vector<size_t> items;                         // commands, in send order
  std::unique_ptr<RedisConnection>* conn = nullptr;  // the pooled connection slot
  std::optional<RedisOptions> connect;               // set when there is no connection yet
  bool connected = false;                            // a connection was made for it
  Status status;                                     // of the exchange
  std::vector<RedisReply> replies;                   // ASKING's +OK included
};

// One round: the pending commands by master, and those whose slot has none.
struct RoundPlan {
  std::map<NodeAddress, RoundGroup> groups;
  std::vector<size_t> unrouted;
};

// What a round leaves for the next one.
struct RoundOutcome {
  std::vector<size_t> still_pending;
  bool need_refresh = false;
  bool need_backoff = false;
};

// Each pending command to the master of an ASK it follows, else of its slot.
RoundPlan PlanRound(const std::vector<ClusterRouter::SlotCommand>& commands, const CallProgress& p,
                    const SlotMap& map) {
  RoundPlan plan;
  for (size_t i : p.pending) {
    const NodeAddress* target = p.ask[i] ? &*p.ask[i] : map.MasterOf(commands[i].slot);
    if (target) {
      plan.groups[*target].items.push_back(i);
    } else {
      plan.unrouted.push_back(i);
    }
  }
  return plan;
}

// Commands whose slot has no master wait for a refresh and a backoff; the last
// error names the slot, unless there is no map at all and the last discovery
// error says more.
RoundOutcome HoldUnrouted(const std::vector<ClusterRouter::SlotCommand>& commands,
                          const std::vector<size_t>& unrouted, bool have_map, CallProgress* p) {
  RoundOutcome out;
  for (size_t i : unrouted) {
    if (have_map || p->last_error.empty())
      p->last_error = "slot " + std::to_string(commands[i].slot) + " has no master";
    out.still_pending.push_back(i);
    out.need_refresh = out.need_backoff = true;
  }
  return out;
}

// One group's pipeline, ASKING before each command that follows an ASK.
void ExchangeGroup(const std::vector<ClusterRouter::SlotCommand>& commands,
                   const std::vector<std::optional<NodeAddress>>& ask, int64_t budget_ms,
                   int64_t command_timeout_ms, RoundGroup& g) {
  if (!*g.conn) {
    // The handshake's replies (AUTH, HELLO, PING) within the budget too: a node
    // that accepts connections but answers nothing (paused, hung) must not hold
    // the call for redis.command_timeout.
    RedisOptions o = *g.connect;
    ClampTimeouts(budget_ms, &o);
    auto c = RedisConnection::Connect(o);
    if (!c.ok()) {
      g.status = c.status();
      return;
    }
    *g.conn = std::move(*c);
    g.connected = true;
  }
  (*g.conn)->SetCommandTimeout(std::min(command_timeout_ms, budget_ms));
  std::vector<std::vector<std::string>> batch;
  batch.reserve(g.items.size());
  for (size_t i : g.items) {
    if (ask[i]) batch.push_back({"ASKING"});
    batch.push_back(commands[i].args);
  }
  g.status = (*g.conn)->Commands(batch, &g.replies);
}

// Every group of the round, in parallel when there are several.
void ExchangeRound(const std::vector<ClusterRouter::SlotCommand>& commands,
                   const std::vector<std::optional<NodeAddress>>& ask, int64_t budget_ms,
                   int64_t command_timeout_ms, RoundPlan& plan) {
  if (plan.groups.size() == 1) {
    ExchangeGroup(commands, ask, budget_ms, command_timeout_ms, plan.groups.begin()->second);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(plan.groups.size());
  for (auto& [node, g] : plan.groups) {
    threads.emplace_back(
        [&, group = &g] { ExchangeGroup(commands, ask, budget_ms, command_timeout_ms, *group); });
  }
  for (std::thread& t : threads) t.join();
}

// A group whose exchange failed: its commands go again (ASKs dropped) after a
// refresh and a backoff. An ACL refusal or a failed precondition is returned:
// no retry mends it.
Status TakeFailedGroup(RoundGroup& g, CallProgress* p, ClusterRouter::Stats* stats,
                       RoundOutcome* out) {
  const StatusCode code = g.status.code();
  if (code == StatusCode::kPermissionDenied || code == StatusCode::kFailedPrecondition)
    return g.status;
  p->last_error = g.status.message();
  g.conn->reset();
  out->need_refresh = out->need_backoff = true;
  stats->retries += g.items.size();
  for (size_t i : g.items) {
    p->ask[i].reset();
    out->still_pending.push_back(i);
  }
  return Status::Ok();
}

// A MOVED (the map learns the slot's master) or an ASK (the next send asks
// that node) for command i.
void FollowRedirect(const NodeAddress& node, size_t i, Redirect redirect, const std::string& text,
                    CallProgress* p, SlotMap* map, ClusterRouter::Stats* stats, RoundOutcome* out) {
  if (redirect.address.host.empty()) redirect.address.host = node.host;
  if (redirect.kind == Redirect::Kind::kMoved) {
    map->Assign(redirect.slot, redirect.address);
    out->need_refresh = true;
    ++stats->moved;
  } else {
    p->ask[i] = redirect.address;
    ++stats->asked;
  }
  // Nodes that disagree (mid-migration) may bounce a command: slow down.
  if (++p->redirects[i] > 5) out->need_backoff = true;
  p->last_error = "redis " + node.ToString() + ": " + text;
  out->still_pending.push_back(i);
}

// Whether an error reply is worth sending the command again for: a redirect
// is, and so is a retriable error unless TRYAGAIN is to be returned.
bool RetryReply(const std::string& text, bool return_tryagain) {
  return RetriableReply(text) && !(return_tryagain && StartsWith(text, "TRYAGAIN"));
}

// A group whose exchange succeeded: each command's reply is final, a redirect
// to follow, or a retriable error to send again.
void TakeGroupReplies(const NodeAddress& node, RoundGroup& g, bool return_tryagain, CallProgress* p,
                      SlotMap* map, ClusterRouter::Stats* stats, RoundOutcome* out) {
  bool reconnect = false;
  size_t r = 0;
  for (size_t i : g.items) {
    if (p->ask[i]) {
      ++r;  // ASKING's +OK (an error here shows in the command's own reply)
      p->ask[i].reset();
    }
    RedisReply& reply = g.replies[r++];
    if (reply.type == RedisReply::Type::kError) {
      if (std::optional<Redirect> redirect = ParseRedirect(reply.str)) {
        FollowRedirect(node, i, *redirect, reply.str, p, map, stats, out);
        continue;
      }
      if (RetryReply(reply.str, return_tryagain)) {
        p->last_error = "redis " + node.ToString() + ": " + reply.str;
        out->need_backoff = true;
        out->need_refresh = out->need_refresh || CallsForRefresh(reply.str);
        reconnect = reconnect || RedisConnection::CallsForReconnect(reply.str);
        ++stats->retries;
        out->still_pending.push_back(i);
        continue;
      }
    }
    p->replies[i] = std::move(reply);
  }
  if (reconnect) g.conn->reset();
}

// Every group's outcome, in address order. Stops at an error no retry mends.
Status TakeRound(RoundPlan& plan, bool return_tryagain, CallProgress* p, SlotMap* map,
                 ClusterRouter::Stats* stats, RoundOutcome* out) {
  for (auto& [node, g] : plan.groups) {
    if (g.connected) ++stats->connects;
    if (g.status.ok()) {
      TakeGroupReplies(node, g, return_tryagain, p, map, stats, out);
    } else {
      EF_RETURN_IF_ERROR(TakeFailedGroup(g, p, stats, out));
    }
  }
  return Status::Ok();
}

// The call's result once no command is pending or the deadline passed.
StatusOr<std::vector<RedisReply>> Answer(CallProgress& p, size_t n, int64_t deadline_ms,
                                         std::vector<Status>* unanswered) {
  if (unanswered) unanswered->assign(n, Status::Ok());
  if (p.pending.empty()) return std::move(p.replies);
  const Status failed = Unavailable(
      "redis cluster: " + std::to_string(p.pending.size()) + " of " + std::to_string(n) +
      " commands without a reply after " + std::to_string(deadline_ms) +
      " ms; last error: " + (p.last_error.empty() ? "none" : p.last_error));
  if (!unanswered) return failed;
  for (size_t i : p.pending) (*unanswered)[i] = failed;
  return std::move(p.replies);
}

}  // namespace

StatusOr<std::vector<RedisReply>> ClusterRouter::Commands(const std::vector<SlotCommand>& commands,
                                                          std::vector<Status>* unanswered) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  auto remaining_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  };
  for (const SlotCommand& c : commands) {
    if (c.args.empty()) return InvalidArgument("redis cluster: empty command");
  }
  CallProgress p(commands.size());
  int64_t backoff_ms = options_.backoff_min_ms;
  call_deadline_ = deadline;
  struct ResetDeadline {
    Clock::time_point* d;
    ~ResetDeadline() { *d = Clock::time_point::max(); }
  } reset_deadline{&call_deadline_};

  if (!have_map_ || stale_) {
    Status st = Refresh();
    if (!st.ok() && st.code() != StatusCode::kUnavailable) return st;
    if (!st.ok()) p.last_error = st.message();
  }

  while (!p.pending.empty()) {
    RoundPlan plan = PlanRound(commands, p, map_);
    RoundOutcome out = HoldUnrouted(commands, plan.unrouted, have_map_, &p);
    const int64_t budget_ms = remaining_ms();
    if (budget_ms <= 0) break;
    for (auto& [node, g] : plan.groups) {
      g.conn = &connections_[node];
      if (!*g.conn) g.connect = OptionsFor(node);
    }
    ExchangeRound(commands, p.ask, budget_ms, options_.redis.command_timeout_ms, plan);

    EF_RETURN_IF_ERROR(TakeRound(plan, options_.return_tryagain, &p, &map_, &stats_, &out));
    p.pending = std::move(out.still_pending);
    if (p.pending.empty()) break;
    if (remaining_ms() <= 0) break;
    bool backoff = out.need_backoff;
    if (out.need_refresh) {
      Status st = Refresh();
      if (st.code() == StatusCode::kPermissionDenied) return st;
      if (!st.ok()) {
        p.last_error = st.message();
        backoff = true;
      }
    }
    if (backoff) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::max<int64_t>(0, std::min(backoff_ms, remaining_ms()))));
      backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
    }
  }
  return Answer(p, commands.size(), options_.deadline_ms, unanswered);
}

StatusOr<bool> DetectCluster(const RedisOptions& options, const std::vector<NodeAddress>& seeds) {
  ClusterRouterOptions o;
  o.redis = options;
  o.redis.db = 0;
  o.seeds = seeds;
  ClusterRouter router(std::move(o));
  Status st = router.Discover();
  if (st.ok()) return true;
  if (router.not_a_cluster()) return false;
  // Not known to be a cluster: each seed's own error (it names the seed), not
  // "redis cluster: ..." about what may well be a single Redis that is down.
  if (st.code() == StatusCode::kUnavailable && !router.unanswered().empty())
    return Unavailable(Join(router.unanswered(), "; "));
  return st;
}

StatusOr<ClusterRouterOptions> ClusterOptionsFrom(const RedisOptions& redis) {
  ClusterRouterOptions o;
  o.redis = redis;
  for (const std::string& a : redis.addresses) {
    auto node = ParseNodeAddress(a);
    if (!node.ok()) return InvalidArgument("redis.address: " + node.status().message());
    o.seeds.push_back(*node);
  }
  if (o.seeds.empty()) o.seeds.push_back({redis.host, redis.port});
  o.deadline_ms = redis.command_timeout_ms;
  return o;
}

StatusOr<bool> UseCluster(const RedisOptions& redis) {
  if (redis.cluster == "true") return true;
  if (redis.cluster == "false") return false;
  auto o = ClusterOptionsFrom(redis);
  if (!o.ok()) return o.status();
  return DetectCluster(redis, o->seeds);
}

}  // namespace ef
