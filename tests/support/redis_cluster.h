// LocalRedisCluster: a real Redis Cluster on 127.0.0.1 for tests (issue 12):
// masters × (1 + replicas_per_master) redis-server processes with
// `--cluster-enabled yes`, each in its own scratch directory on a free port whose
// cluster bus port (+10000) is free too, joined by `redis-cli --cluster create
// ... --cluster-replicas n --cluster-yes`. The constructor returns once every
// node reports cluster_state:ok, all 16384 slots are served and all nodes agree
// on the slot map (AwaitHealthy). cluster-node-timeout is short (1 s by
// default), so a killed master's replica takes over within a few seconds;
// replicas sync without the diskless-sync delay. No persistence: a node killed
// and started again comes back with its cluster config (nodes.conf) but no
// data, and resyncs from its master if it is a replica by then. Every process
// is killed (SIGKILL) when the object goes.
//
// Options::extra_args go on every node's redis-server command line after its
// redis.conf (e.g. {"--loadmodule", path}), except on the nodes listed in
// Options::without_extra_args; a node started again (Start) gets the same
// command line. redis-cli --cluster create on one host makes nodes
// 0..masters-1 the first masters and the others their replicas (which replica
// goes to which master is redis-cli's choice: ask Nodes() or ReplicaOf()).
//
// Nodes are numbered 0..size()-1 for the life of the object; their roles change
// with failovers, so roles are always read from the cluster, never cached.
// Failures (a command refused, a wait that times out) throw std::runtime_error
// with what and which node. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "redis/cluster.h"
#include "redis/connection.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/tls_certs.h"

namespace ef::test {

// A free 127.0.0.1 port p whose cluster bus port p + 10000 exists and is free
// (redis-server with --cluster-enabled refuses to start otherwise), not in
// `taken` (nor p +- 10000).
int FreeClusterPort(const std::set<int>& taken = {});

class LocalRedisCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas_per_master = 1;
    int node_timeout_ms = 1000;  // cluster-node-timeout: failure detection time
    // Appended to every node's redis-server command line (after its redis.conf).
    std::vector<std::string> extra_args;
    // Node indices started without extra_args (e.g. one replica without a module).
    std::set<int> without_extra_args;
    // TLS only (port 0, tls-port, tls-cluster and tls-replication yes), with
    // these certificates; clients use ClientTls(*tls) (support/tls_certs.h).
    std::optional<TlsCerts> tls;
  };
  struct Node {
    int index = -1;
    int port = 0;
    std::string id;  // the 40-hex node ID
    bool master = false;
    int master_index = -1;  // a replica's master; -1 for a master
    bool running = false;
    std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  };

  LocalRedisCluster();
  explicit LocalRedisCluster(Options options);
  ~LocalRedisCluster();
  LocalRedisCluster(const LocalRedisCluster&) = delete;
  LocalRedisCluster& operator=(const LocalRedisCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  // "127.0.0.1:p0,127.0.0.1:p1,..." (every node: a redis.address value).
  std::string seeds() const;
  // Options for one connection to node `node` (TLS when the cluster is).
  RedisOptions NodeOptions(int node) const;
  // Options for a ClusterRouter over this cluster: every node a seed.
  ClusterRouterOptions RouterOptions(int64_t deadline_ms = 20000) const;
  int port(int node) const { return nodes_.at(static_cast<size_t>(node))->port; }
  std::string address(int node) const { return "127.0.0.1:" + std::to_string(port(node)); }
  const std::string& id(int node) const { return nodes_.at(static_cast<size_t>(node))->id; }
  bool running(int node) const;

  // Every node with its role as a running node sees it now (CLUSTER NODES).
  std::vector<Node> Nodes() const;
  std::vector<int> Masters() const;  // indices of the current masters
  // The node serving `slot` now (CLUSTER SLOTS of a running node); -1 if none.
  int MasterForSlot(uint16_t slot) const;
  // A replica of master `master` (index), -1 if it has none.
  int ReplicaOf(int master) const;

  // One command on one node over a fresh connection; throws if it cannot connect.
  RedisReply Command(int node, const std::vector<std::string>& args) const;

  // SIGKILL, no wait for the cluster to notice.
  void Kill(int node);
  // Starts a killed node again on its port with its nodes.conf; waits for PING.
  void Start(int node);
  // `CLUSTER FAILOVER` on replica `replica`; waits until it is a master and the
  // cluster is healthy.
  void FailoverTo(int replica);
  // Waits until every running node reports cluster_state:ok and 16384 slots ok,
  // all running nodes agree on the slot map and on every running node's role
  // (master, or replica of which master), every slot's master is running, no
  // running node is flagged failing, and every running replica's link to its
  // master is up. Throws, with the last reason, after `timeout`.
  void AwaitHealthy(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Slot migration by hand, as redis-cli does it, one step at a time so tests
  // can act between steps:
  // CLUSTER SETSLOT <slot> IMPORTING on `to`, then MIGRATING on `from`.
  void BeginMigration(uint16_t slot, int from, int to);
  // Moves up to `count` keys of the slot from the source to the target
  // (CLUSTER GETKEYSINSLOT + MIGRATE ... KEYS); returns how many moved.
  size_t MoveKeys(uint16_t slot, size_t count);
  // Moves the remaining keys, then CLUSTER SETSLOT <slot> NODE <to> on the
  // target, the source and every other master; waits until all running nodes
  // agree.
  void FinishMigration(uint16_t slot);
  // `redis-cli --cluster reshard` of `slots` slots from master `from` to master
  // `to`, then AwaitHealthy.
  void Reshard(int from, int to, int slots);

 private:
  struct NodeState {
    int port = 0;
    std::string id;
    std::vector<std::string> args;  // the redis-server command line, kept for Start
    std::unique_ptr<TempDir> dir;
    std::unique_ptr<Process> process;
  };
  void StartProcess(NodeState& n);
  // Why the cluster is not healthy now, "" if it is.
  std::string Unhealthy() const;
  int AnyRunning() const;
  int IndexOfPort(int port) const;

  Options options_;
  std::vector<std::unique_ptr<NodeState>> nodes_;
  std::map<uint16_t, std::pair<int, int>> migrations_;  // slot -> (from, to)
};

}  // namespace ef::test
