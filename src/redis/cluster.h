// Redis Cluster routing (issue 12): the slot map, redirect parsing and a small
// router. Hand-written because Debian packages no C or C++ Redis Cluster client;
// kept small: what the daemon, the readers and the tools need, no more.
//
// Slots: KeySlot (bloom/keys.h) gives a key's slot (CRC16/XMODEM of its hash tag,
// mod 16384). All of a user's keys share one slot (FORMAT.md rule 4), so a
// user's commands always go to one node.
//
// ClusterRouter contract
// - Thread-compatible: one thread uses a router at a time. Commands() itself
//   starts one std::thread per master per round (none for a single master),
//   each on its own connection: a non-hot-path API.
// - Topology: read with CLUSTER SLOTS from the first seed that answers
//   (Discover), then re-read (Refresh, at most once per refresh_interval_ms) on a
//   MOVED, on CLUSTERDOWN/READONLY/MASTERDOWN, on a lost connection, and when a
//   slot has no master. A MOVED also points its slot at the new owner at once.
// - Connections: one RedisConnection per master, made on first use, dropped on
//   an I/O error or a READONLY/MASTERDOWN reply and made again on the next use.
// - Retried (within deadline_ms of the call, with exponential backoff between
//   rounds that made no progress): MOVED (to the new owner), ASK (`ASKING` then
//   the command on the target; ASKING's +OK is consumed here, never returned),
//   TRYAGAIN (unless return_tryagain), CLUSTERDOWN, LOADING, BUSY (a script),
//   MASTERDOWN, READONLY, and lost or refused connections. Every other reply, error replies
//   included (WRONGTYPE, OOM, syntax, ...), is the command's result, returned in place.
// - A retried command may have been executed already (its reply lost with the
//   connection), so callers send idempotent commands only (SETBIT, BITFIELD SET,
//   EXPIREAT, HSET of a fixed value, reads).
// - Failure: kUnavailable once deadline_ms is used up, one line naming the node
//   and its last error; kPermissionDenied (AUTH refused) and kFailedPrecondition
//   (e.g. SELECT) at once, since retrying cannot help.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace ef {

inline constexpr int kClusterSlots = 16384;

// A node's address as Redis prints it: host is an IPv4 or IPv6 address (without
// brackets) or a host name; "" means "the host the reply came from" (a node
// with an unknown endpoint: `MOVED 3999 :6381`, NULL in CLUSTER SLOTS).
struct NodeAddress {
  std::string host;
  int port = 0;
  // "host:port"; "[v6]:port" for an IPv6 host.
  std::string ToString() const;
  auto operator<=>(const NodeAddress&) const = default;
};

// "host:port", "[v6]:port" or "v6:port" (the last ':' ends the host). Port
// 1..65535, host non-empty. Errors quote the text.
StatusOr<NodeAddress> ParseNodeAddress(std::string_view text);
// A comma-separated list of the above (spaces around entries ignored), e.g.
// redis.address "10.0.0.1:6379,10.0.0.2:6379"; at least one entry.
StatusOr<std::vector<NodeAddress>> ParseSeedList(std::string_view text);

// A redirection error reply: "MOVED <slot> <host>:<port>" or "ASK <slot>
// <host>:<port>" (host as above, may be empty). nullopt for any other text,
// including a slot outside 0..16383, a bad port or trailing garbage.
struct Redirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  uint16_t slot = 0;
  NodeAddress address;
};
std::optional<Redirect> ParseRedirect(std::string_view error_text);

// Which master (and replicas) serves each of the 16384 slots.
class SlotMap {
 public:
  struct Shard {
    NodeAddress master;
    std::string master_id;  // node ID ("" if the reply had none)
    std::vector<NodeAddress> replicas;
  };

  SlotMap();  // no slot covered

  // From a CLUSTER SLOTS reply: [[start, end, [host, port, id, ...], replica...],
  // ...]. An empty, NULL or "?" host stands for `queried_host` (the node the
  // reply came from). Masters that own several ranges become one shard.
  // kInternal on a malformed reply (naming the entry), a slot outside 0..16383
  // or a slot listed twice.
  static StatusOr<SlotMap> FromClusterSlots(const RedisReply& reply, std::string_view queried_host);

  const std::vector<Shard>& shards() const { return shards_; }
  // Index into shards() of the slot's master; -1 if no node serves the slot.
  int ShardOf(uint16_t slot) const { return slot_shard_[slot & (kClusterSlots - 1)]; }
  // The slot's master; nullptr if no node serves it.
  const NodeAddress* MasterOf(uint16_t slot) const;
  size_t CoveredSlots() const;
  bool AllCovered() const { return CoveredSlots() == kClusterSlots; }
  // Points `slot` at `master` (a MOVED), adding a shard if it is a new node.
  void Assign(uint16_t slot, const NodeAddress& master);
  // Every master, then every replica, each once.
  std::vector<NodeAddress> AllNodes() const;

 private:
  int ShardIndexOf(const NodeAddress& master, std::string_view id);
  std::vector<Shard> shards_;
  std::vector<int16_t> slot_shard_;  // kClusterSlots entries
};

struct ClusterRouterOptions {
  RedisOptions redis;  // AUTH and timeouts for every node; host/port unused; db must be 0
  std::vector<NodeAddress> seeds;     // tried in order by Discover
  int64_t deadline_ms = 10000;        // how long one Command/Commands call may retry
  int64_t refresh_interval_ms = 100;  // least time between two topology reads
  int64_t backoff_min_ms = 10;        // first wait after a round without progress
  int64_t backoff_max_ms = 500;       // doubling up to this
  // true: a TRYAGAIN reply (a multi-key command whose keys are split between the
  // two nodes of a migrating slot) is returned as the command's result instead of
  // being retried until the migration ends: for readers that can split the
  // command themselves (exposure_filter::Client sends one GET per key then).
  bool return_tryagain = false;
};

class ClusterRouter {
 public:
  // One command for a slot.
  struct SlotCommand {
    uint16_t slot = 0;
    std::vector<std::string> args;
  };
  struct Stats {
    uint64_t topology_reads = 0;  // successful CLUSTER SLOTS reads
    uint64_t moved = 0;           // MOVED replies followed
    uint64_t asked = 0;           // ASK replies followed
    uint64_t retries = 0;         // commands resent after a retriable error or lost connection
    uint64_t connects = 0;        // connections made to masters
  };

  explicit ClusterRouter(ClusterRouterOptions options);
  ~ClusterRouter();
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // Reads the topology from the first seed that answers (then any node already
  // known). kFailedPrecondition and not_a_cluster() true when that node answered
  // that it has cluster support disabled (a single Redis: `redis.cluster: auto`
  // falls back to it); kUnavailable (naming every seed and its error) when none
  // answered; kInvalidArgument if db != 0. Slots without a master are allowed
  // (slot_map().AllCovered() tells): commands for them retry until the deadline.
  Status Discover();
  bool not_a_cluster() const { return not_a_cluster_; }
  // After a topology read that no node answered: each node's error, in the
  // order asked (each names its node).
  const std::vector<std::string>& unanswered() const { return unanswered_; }
  // Re-reads the topology, or, if it was read less than refresh_interval_ms ago,
  // marks it stale so that the first call after the interval re-reads it.
  Status Refresh();

  const SlotMap& slot_map() const { return map_; }
  const Stats& stats() const { return stats_; }
  // How long each later Command/CommandInSlot/Commands call may retry (> 0);
  // readers set it before each call to what is left of their own deadline.
  void set_deadline_ms(int64_t deadline_ms) { options_.deadline_ms = deadline_ms; }
  int64_t deadline_ms() const { return options_.deadline_ms; }

  // One command routed by the slot of `key` (KeySlot) or by `slot`.
  StatusOr<RedisReply> Command(std::string_view key, std::vector<std::string> args);
  StatusOr<RedisReply> CommandInSlot(uint16_t slot, std::vector<std::string> args);
  // Replies in input order. Commands are grouped by master; each group is one
  // pipeline; groups run in parallel. Fails (no replies) if any command has no
  // final reply when the deadline passes, unless `unanswered` is given: then the
  // call succeeds with the replies it has, and (*unanswered)[i] is kUnavailable
  // naming the last error for each command i without one (its reply is empty),
  // OK for the others; a master down then fails only its own commands. Errors no
  // retry can mend (an ACL refusal, an empty command) fail the call either way.
  StatusOr<std::vector<RedisReply>> Commands(const std::vector<SlotCommand>& commands,
                                             std::vector<Status>* unanswered = nullptr);

  // For callers that pipeline themselves (the writer's hot path): the pooled
  // connection to `master`, made if needed. Valid until DropConnection of that
  // node or the next Discover/Refresh/Command/CommandInSlot/Commands (Connection
  // for other nodes keeps it valid), so: take every node's connection on one
  // thread, then pipeline on each from its own thread. DropConnection after an
  // I/O error or READONLY/MASTERDOWN on it.
  StatusOr<RedisConnection*> Connection(const NodeAddress& master);
  void DropConnection(const NodeAddress& master);

 private:
  using Clock = std::chrono::steady_clock;
  Status ReadTopology(const std::vector<NodeAddress>& candidates);
  RedisOptions OptionsFor(const NodeAddress& node) const;

  ClusterRouterOptions options_;
  SlotMap map_;
  bool have_map_ = false;
  bool not_a_cluster_ = false;
  std::vector<std::string> unanswered_;  // see unanswered()
  bool stale_ = false;                   // a refresh was wanted but rate-limited
  NodeAddress last_answered_;            // the node of the last topology read
  Clock::time_point call_deadline_ = Clock::time_point::max();  // of the running call
  Clock::time_point last_read_{};
  std::map<NodeAddress, std::unique_ptr<RedisConnection>> connections_;
  Stats stats_;
};

// For `redis.cluster: auto`: true if the first seed that answers is a cluster
// node, false if it has cluster support disabled; kUnavailable if none answers,
// with each seed's error ("redis 127.0.0.1:6379: cannot connect: Connection
// refused"): it may be a single Redis that is down, so no "cluster" is said.
StatusOr<bool> DetectCluster(const RedisOptions& options, const std::vector<NodeAddress>& seeds);

// From redis.* (RedisOptionsFromConfig): the seeds are every redis.address entry;
// the call deadline is redis.command_timeout. Errors name redis.address.
StatusOr<ClusterRouterOptions> ClusterOptionsFrom(const RedisOptions& redis);

// Whether the programs talk Redis Cluster: redis.cluster true or false as set;
// auto asks the seeds (DetectCluster). kUnavailable if auto and no seed answers.
StatusOr<bool> UseCluster(const RedisOptions& redis);

}  // namespace ef
