// ClusterBitWriter: the BitSink for Redis Cluster (redis.cluster true, or auto on
// a cluster). Each batch is split by the master that owns each key's slot (all of
// a user's keys share one slot), and each master's part is written by its own
// RedisBitWriter (cluster_node mode: its own connection, expire cache and stage
// states), all masters in parallel. The batch is acknowledged only when every
// master acknowledged its part (and, with redis.wait_replicas, WAITed for it).
// redis.write_mode auto is decided per master: each master's RedisBitWriter
// probes that master and its replicas on every (re)connect, so a master with a
// replica lacking the module writes with the hybrid while the others use
// EF.SETBITS (tests/module/write_modes_module_cluster_test.cc).
//
// Redirections: a key a master answers with MOVED is sent to the new owner (the
// slot map is updated at once and re-read, rate-limited); a key answered with ASK
// (its slot is migrating and the key is on the importing node already, or is
// new) is sent to the importing node after ASKING. Both within the same Write,
// for up to kMaxRounds rounds; keys still redirected after that, or a master that
// failed, fail the Write (kUnavailable): the pipeline retries the whole batch,
// which is idempotent (bits only set; EXPIREAT of a fixed value). A failure also
// marks the topology stale, so the retry starts from a fresh CLUSTER SLOTS.
//
// The meta (`<prefix>meta`, one slot like any key) is ensured through a router of
// its own, shared by the node writers under a mutex.
//
// State (all on the thread that runs Write; Send/Await run Write on a helper
// thread, one batch at a time, like RedisBitWriter):
//   router_       the slot map and its refreshes;
//   nodes_        one RedisBitWriter per master address written to, each with a
//                 thread, a connection and an expire cache. After a Write in
//                 which the topology was read again, the writers of addresses
//                 that are not a master of a slot range in the new map are
//                 destroyed (RetireGoneNodes): failovers and re-addressed nodes
//                 cannot make them grow without bound. Safe: a Write awaits every
//                 node write it sent before it returns, so between Writes no node
//                 writer has a batch in flight; an address that is a master again
//                 later gets a new writer, with empty caches;
//   retired_at_reads_  router_.stats().topology_reads when nodes_ was last
//                 compared with the map;
//   parts_        per round, the sub-batches in flight (a node's sub-batch must
//                 outlive its Await).
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "pipeline/sink.h"
#include "redis/cluster.h"
#include "write/bit_writer.h"

namespace ef {

class ClusterBitWriter : public BitSink {
 public:
  // `options` as for one node (options.redis: auth and timeouts; host/port
  // unused); `router` with the seeds. Connects lazily, on the first Write.
  ClusterBitWriter(BitWriterOptions options, ClusterRouterOptions router);
  ~ClusterBitWriter() override;

  Status Write(const BitBatch& batch, WriteStats* stats) override;
  void Send(const BitBatch& batch) override;
  Status Await(WriteStats* stats) override;
  bool Ready() override;
  bool WaitReady(int64_t timeout_ms) override;
  void ForgetKeyStates() override;

  // Error kind of the last failed Write, kNone after a success.
  RedisErrorKind last_error_kind() const { return last_error_; }
  void SetErrorObserver(std::function<void(RedisErrorKind)> observer);
  // The layout in use after the last meta check (see RedisBitWriter).
  const Layout* effective_layout() const override;
  const ClusterRouter::Stats& router_stats() const { return router_.stats(); }
  // The master addresses that have a node writer now, in address order.
  // Thread-safe.
  std::vector<NodeAddress> node_writers() const;

  static constexpr int kMaxRounds = 8;

 private:
  RedisBitWriter& Node(const NodeAddress& master);
  // The Write proper; Write adds RetireGoneNodes once it returned.
  Status WriteRounds(const BitBatch& batch, WriteStats* stats);
  // WriteRounds' steps: routes every key to its slot's master (pending_: all);
  // groups pending_ into parts_ per (node, ASKING) and returns how many; sends
  // and awaits the parts of one wave (ASKING or not) into *r; and takes a part's
  // redirections (route_, r->next, the MOVED/ASK counts).
  Status RouteKeys(const BitBatch& batch);
  size_t MakeParts(const BitBatch& batch);
  // What one round learnt: the most final failure, whether some key was MOVED,
  // the keys to send again (redirected).
  struct Round {
    Status failure;
    RedisErrorKind failure_kind = RedisErrorKind::kNone;
    bool moved = false;
    std::vector<size_t> next;
  };
  struct Part;
  void RunWave(const BitBatch& batch, size_t n_parts, bool asking, WriteStats* total, Round* r,
               std::string* last_redirect);
  void TakeRedirects(const BitBatch& batch, const Part& p, const RedisBitWriter& w, Round* r,
                     std::string* last_redirect);
  // If the topology was read since the last call: destroys the node writers of
  // addresses that are no longer a master in slot_map(). Only between the
  // rounds of Writes (no node writer has a batch in flight).
  void RetireGoneNodes();
  Status EnsureMeta(const Layout& layout, Layout* effective);
  Status Fail(RedisErrorKind kind, Status st);
  // Logs the redirections followed, at most every 10 s.
  void LogRedirects();

  BitWriterOptions options_;
  ClusterRouter router_;
  bool discovered_ = false;
  // Guards nodes_ and observer_ (ForgetKeyStates comes from another thread).
  mutable std::mutex nodes_mu_;
  std::map<NodeAddress, std::unique_ptr<RedisBitWriter>> nodes_;
  uint64_t retired_at_reads_ = 0;
  std::function<void(RedisErrorKind)> observer_;
  // Per Write: each key's route, the keys still to write, the parts of a round.
  struct Route {
    NodeAddress node;
    bool asking = false;
  };
  struct Part {
    NodeAddress node;
    bool asking = false;
    std::vector<size_t> keys;  // batch index of each key of `batch`
    BitBatch batch;
  };
  std::vector<Route> route_;
  std::vector<size_t> pending_;
  std::vector<Part> parts_;
  uint64_t moved_keys_ = 0, asked_keys_ = 0;  // since the last log line
  std::chrono::steady_clock::time_point logged_at_{};
  RedisErrorKind last_error_ = RedisErrorKind::kNone;

  // The meta's own router (the node writers call EnsureMeta from their threads).
  std::mutex meta_mu_;
  ClusterRouter meta_router_;
  std::optional<Layout> effective_;

  std::future<Status> in_flight_;
  WriteStats in_flight_stats_;
};

}  // namespace ef
