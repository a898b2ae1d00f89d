#include "support/redis_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

#include "support/redis_server.h"
#include "support/wait.h"

namespace ef::test {

namespace {

// True if 127.0.0.1:port can be bound now.
bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// "127.0.0.1:7000@17000" (or ":7000@17000", "host:7000@17000,hostname") -> 7000.
int PortOfNodeAddress(const std::string& a) {
  const size_t at = a.find('@');
  const std::string hp = a.substr(0, at);
  const size_t colon = hp.rfind(':');
  if (colon == std::string::npos) return -1;
  return std::atoi(hp.c_str() + colon + 1);
}

}  // namespace

// A free client port whose cluster bus port (port + 10000) exists and is free:
// redis-server refuses to start otherwise.
int FreeClusterPort(const std::set<int>& taken) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int p = FreePort();
    if (p + 10000 > 65535 || taken.count(p) || taken.count(p + 10000) || taken.count(p - 10000) ||
        !PortFree(p + 10000))
      continue;
    return p;
  }
  throw std::runtime_error("no free port pair (p, p+10000) for a cluster node");
}

LocalRedisCluster::LocalRedisCluster() : LocalRedisCluster(Options()) {}

LocalRedisCluster::LocalRedisCluster(Options options) : options_(options) {
  const int total = options_.masters * (1 + options_.replicas_per_master);
  std::set<int> taken;
  for (int i = 0; i < total; ++i) {
    auto n = std::make_unique<NodeState>();
    n->port = FreeClusterPort(taken);
    taken.insert(n->port);
    taken.insert(n->port + 10000);
    n->dir = std::make_unique<TempDir>();
    std::string listen = "port " + std::to_string(n->port) + "\n";
    if (options_.tls) {
      const TlsCerts& t = *options_.tls;
      listen = "port 0\ntls-port " + std::to_string(n->port) + "\ntls-cert-file " + t.server_cert +
               "\ntls-key-file " + t.server_key + "\ntls-ca-cert-file " + t.ca +
               "\ntls-auth-clients no\ntls-cluster yes\ntls-replication yes\n";
    }
    n->dir->Write("redis.conf",
                  listen + "bind 127.0.0.1\ndir " + n->dir->path() +
                      "\ncluster-enabled yes\ncluster-config-file nodes.conf\n"
                      "cluster-node-timeout " +
                      std::to_string(options_.node_timeout_ms) +
                      "\ncluster-replica-validity-factor 0\n"
                      "cluster-allow-replica-migration no\nrepl-diskless-sync-delay 0\n"
                      "appendonly no\nsave \"\"\ndaemonize no\nlogfile \"\"\n");
    n->args = {"redis-server", n->dir->File("redis.conf")};
    if (!options_.without_extra_args.count(i))
      n->args.insert(n->args.end(), options_.extra_args.begin(), options_.extra_args.end());
    nodes_.push_back(std::move(n));
  }
  for (auto& n : nodes_) StartProcess(*n);
  for (int i = 0; i < total; ++i) {
    const RedisReply r = Command(i, {"CLUSTER", "MYID"});
    if (r.type != RedisReply::Type::kString)
      throw std::runtime_error("CLUSTER MYID on " + address(i) + ": " + r.str);
    nodes_[static_cast<size_t>(i)]->id = r.str;
  }
  std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
  for (int i = 0; i < total; ++i) create.push_back(address(i));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                               "--cluster-yes"});
  if (options_.tls) create.insert(create.end(), {"--tls", "--cacert", options_.tls->ca});
  const RunResult r = RunCommand(create);
  if (r.code != 0) throw std::runtime_error("redis-cli --cluster create failed: " + r.out);
  AwaitHealthy();
}

LocalRedisCluster::~LocalRedisCluster() {
  for (auto& n : nodes_) {
    if (n->process) n->process->Stop(SIGKILL, std::chrono::seconds(5));
  }
}

void LocalRedisCluster::StartProcess(NodeState& n) {
  n.process = std::make_unique<Process>(n.args, n.dir->File("redis.log"));
  const bool up = WaitFor(
      [&] {
        RedisOptions o;
        o.port = n.port;
        if (options_.tls) o.tls = ClientTls(*options_.tls, false);
        o.connect_timeout_ms = 200;
        return RedisConnection::Connect(o).ok();
      },
      std::chrono::seconds(10));
  if (!up)
    throw std::runtime_error("redis-server (cluster node) did not start on port " +
                             std::to_string(n.port) + ": " + n.process->Output());
}

std::string LocalRedisCluster::seeds() const {
  std::string out;
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + address(i);
  return out;
}

ClusterRouterOptions LocalRedisCluster::RouterOptions(int64_t deadline_ms) const {
  ClusterRouterOptions o;
  auto seeds = ParseSeedList(this->seeds());
  if (!seeds.ok()) throw std::runtime_error("cluster seeds: " + seeds.status().message());
  o.seeds = *seeds;
  o.deadline_ms = deadline_ms;
  if (options_.tls) o.redis.tls = ClientTls(*options_.tls, false);
  return o;
}

bool LocalRedisCluster::running(int node) const {
  const auto& p = nodes_.at(static_cast<size_t>(node))->process;
  return p && p->Running();
}

int LocalRedisCluster::AnyRunning() const {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) return i;
  }
  throw std::runtime_error("no cluster node is running");
}

int LocalRedisCluster::IndexOfPort(int port) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)]->port == port) return i;
  }
  return -1;
}

RedisOptions LocalRedisCluster::NodeOptions(int node) const {
  RedisOptions o;
  o.port = port(node);
  if (options_.tls) o.tls = ClientTls(*options_.tls, false);
  return o;
}

RedisReply LocalRedisCluster::Command(int node, const std::vector<std::string>& args) const {
  RedisOptions o = NodeOptions(node);
  o.connect_timeout_ms = 1000;
  auto c = RedisConnection::Connect(o);
  if (!c.ok()) throw std::runtime_error(c.status().message());
  auto r = (*c)->Command(args);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

std::vector<LocalRedisCluster::Node> LocalRedisCluster::Nodes() const {
  std::vector<Node> out(static_cast<size_t>(size()));
  std::map<std::string, int> by_id;
  for (int i = 0; i < size(); ++i) {
    Node& n = out[static_cast<size_t>(i)];
    n.index = i;
    n.port = port(i);
    n.id = id(i);
    n.running = running(i);
    by_id[n.id] = i;
  }
  // A running node's role as it says itself (its "myself" line); a stopped
  // node's as some running node last saw it.
  auto apply = [&](const std::string& line) {
    const std::vector<std::string> f = Split(line, ' ');
    if (f.size() < 8) return;
    const auto it = by_id.find(f[0]);
    if (it == by_id.end()) return;
    Node& n = out[static_cast<size_t>(it->second)];
    n.master = f[2].find("master") != std::string::npos;
    n.master_index = n.master || !by_id.count(f[3]) ? -1 : by_id[f[3]];
  };
  for (const std::string& line : Split(Command(AnyRunning(), {"CLUSTER", "NODES"}).str, '\n'))
    apply(line);
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    for (const std::string& line : Split(Command(i, {"CLUSTER", "NODES"}).str, '\n')) {
      if (line.find("myself") != std::string::npos) apply(line);
    }
  }
  return out;
}

std::vector<int> LocalRedisCluster::Masters() const {
  std::vector<int> out;
  for (const Node& n : Nodes()) {
    if (n.master) out.push_back(n.index);
  }
  return out;
}

int LocalRedisCluster::MasterForSlot(uint16_t slot) const {
  const RedisReply r = Command(AnyRunning(), {"CLUSTER", "SLOTS"});
  for (const RedisReply& e : r.elements) {
    if (e.elements.size() < 3) continue;
    if (e.elements[0].integer <= slot && slot <= e.elements[1].integer)
      return IndexOfPort(static_cast<int>(e.elements[2].elements.at(1).integer));
  }
  return -1;
}

int LocalRedisCluster::ReplicaOf(int master) const {
  for (const Node& n : Nodes()) {
    if (!n.master && n.master_index == master) return n.index;
  }
  return -1;
}

void LocalRedisCluster::Kill(int node) {
  auto& n = *nodes_.at(static_cast<size_t>(node));
  if (n.process) n.process->Stop(SIGKILL, std::chrono::seconds(5));
}

void LocalRedisCluster::Start(int node) {
  auto& n = *nodes_.at(static_cast<size_t>(node));
  if (n.process && n.process->Running())
    throw std::runtime_error("Start: node " + address(node) + " is running");
  StartProcess(n);
}

void LocalRedisCluster::FailoverTo(int replica) {
  const RedisReply r = Command(replica, {"CLUSTER", "FAILOVER"});
  if (r.type == RedisReply::Type::kError)
    throw std::runtime_error("CLUSTER FAILOVER on " + address(replica) + ": " + r.str);
  const bool promoted = WaitFor(
      [&] {
        return RedisServer::InfoValue(Command(replica, {"INFO", "replication"}).str, "role") ==
               "master";
      },
      std::chrono::seconds(30));
  if (!promoted)
    throw std::runtime_error("CLUSTER FAILOVER: " + address(replica) +
                             " did not become a master within 30 s");
  AwaitHealthy();
}

std::string LocalRedisCluster::Unhealthy() const {
  std::string agreed_slots, agreed_roles;
  int first = -1;
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    const std::string where = address(i) + ": ";
    RedisOptions o = NodeOptions(i);
    o.connect_timeout_ms = 500;
    auto c = RedisConnection::Connect(o);
    if (!c.ok()) return c.status().message();
    RedisConnection& conn = **c;
    auto info = conn.Command({"CLUSTER", "INFO"});
    if (!info.ok()) return info.status().message();
    if (RedisServer::InfoValue(info->str, "cluster_state") != "ok")
      return where + "cluster_state is not ok";
    if (RedisServer::InfoValue(info->str, "cluster_slots_ok") != "16384")
      return where + "cluster_slots_ok is " + RedisServer::InfoValue(info->str, "cluster_slots_ok");
    // The slot map, as "start-end:port" ranges, must be the same on every node.
    auto slots = conn.Command({"CLUSTER", "SLOTS"});
    if (!slots.ok()) return slots.status().message();
    std::vector<std::string> ranges;
    for (const RedisReply& e : slots->elements) {
      if (e.elements.size() < 3 || e.elements[2].elements.size() < 2)
        return where + "bad CLUSTER SLOTS";
      const int master_port = static_cast<int>(e.elements[2].elements[1].integer);
      const int m = IndexOfPort(master_port);
      if (m < 0 || !running(m)) return where + "slots served by a stopped node";
      ranges.push_back(std::to_string(e.elements[0].integer) + "-" +
                       std::to_string(e.elements[1].integer) + ":" + std::to_string(master_port));
    }
    std::sort(ranges.begin(), ranges.end());
    std::string joined;
    for (const auto& s : ranges) joined += s + " ";
    if (first < 0) {
      first = i;
      agreed_slots = joined;
    } else if (joined != agreed_slots) {
      return where + "slot map differs from " + address(first) + "'s";
    }
    // No running node flagged failing, and the same roles, as this node sees it.
    auto nodes = conn.Command({"CLUSTER", "NODES"});
    if (!nodes.ok()) return nodes.status().message();
    std::vector<std::string> roles;
    for (const std::string& line : Split(nodes->str, '\n')) {
      const std::vector<std::string> f = Split(line, ' ');
      if (f.size() < 8) continue;
      const int n = IndexOfPort(PortOfNodeAddress(f[1]));
      if (n < 0 || !running(n)) continue;
      if (f[2].find("fail") != std::string::npos)
        return where + "sees " + address(n) + " as " + f[2];
      const bool master = f[2].find("master") != std::string::npos;
      roles.push_back(f[0] + (master ? " master" : " replica of " + f[3]));
    }
    std::sort(roles.begin(), roles.end());
    std::string joined_roles;
    for (const auto& r : roles) joined_roles += r + "; ";
    if (i == first) {
      agreed_roles = joined_roles;
    } else if (joined_roles != agreed_roles) {
      return where + "roles differ from " + address(first) + "'s";
    }
    auto repl = conn.Command({"INFO", "replication"});
    if (!repl.ok()) return repl.status().message();
    if (RedisServer::InfoValue(repl->str, "role") == "slave" &&
        RedisServer::InfoValue(repl->str, "master_link_status") != "up")
      return where + "replica link is not up";
  }
  return "";
}

void LocalRedisCluster::AwaitHealthy(std::chrono::milliseconds timeout) {
  std::string why;
  const bool healthy = WaitFor(
      [&] {
        try {
          why = Unhealthy();
        } catch (const std::exception& e) {
          why = e.what();
        }
        return why.empty();
      },
      timeout);
  if (!healthy)
    throw std::runtime_error("redis cluster not healthy after " + std::to_string(timeout.count()) +
                             " ms: " + why);
}

void LocalRedisCluster::BeginMigration(uint16_t slot, int from, int to) {
  const std::string s = std::to_string(slot);
  RedisReply r = Command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  if (r.type == RedisReply::Type::kError)
    throw std::runtime_error("SETSLOT " + s + " IMPORTING on " + address(to) + ": " + r.str);
  r = Command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
  if (r.type == RedisReply::Type::kError)
    throw std::runtime_error("SETSLOT " + s + " MIGRATING on " + address(from) + ": " + r.str);
  migrations_[slot] = {from, to};
}

size_t LocalRedisCluster::MoveKeys(uint16_t slot, size_t count) {
  const auto it = migrations_.find(slot);
  if (it == migrations_.end())
    throw std::runtime_error("MoveKeys: slot " + std::to_string(slot) + " is not migrating");
  const auto [from, to] = it->second;
  const RedisReply keys =
      Command(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), std::to_string(count)});
  if (keys.type != RedisReply::Type::kArray)
    throw std::runtime_error("GETKEYSINSLOT on " + address(from) + ": " + keys.str);
  if (keys.elements.empty()) return 0;
  std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(port(to)), "", "0",
                                      "10000",   "KEYS"};
  for (const RedisReply& k : keys.elements) migrate.push_back(k.str);
  const RedisReply r = Command(from, migrate);
  if (r.type == RedisReply::Type::kError)
    throw std::runtime_error("MIGRATE on " + address(from) + ": " + r.str);
  return keys.elements.size();
}

void LocalRedisCluster::FinishMigration(uint16_t slot) {
  const auto it = migrations_.find(slot);
  if (it == migrations_.end())
    throw std::runtime_error("FinishMigration: slot " + std::to_string(slot) + " is not migrating");
  const auto [from, to] = it->second;
  while (MoveKeys(slot, 100) > 0) {
  }
  std::vector<int> order = {to, from};
  for (int m : Masters()) {
    if (m != to && m != from && running(m)) order.push_back(m);
  }
  for (int n : order) {
    const RedisReply r = Command(n, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id(to)});
    if (r.type == RedisReply::Type::kError)
      throw std::runtime_error("SETSLOT " + std::to_string(slot) + " NODE on " + address(n) + ": " +
                               r.str);
  }
  migrations_.erase(slot);
  AwaitHealthy();
}

void LocalRedisCluster::Reshard(int from, int to, int slots) {
  const RunResult r = RunCommand({"redis-cli", "--cluster", "reshard", address(from),
                                  "--cluster-from", id(from), "--cluster-to", id(to),
                                  "--cluster-slots", std::to_string(slots), "--cluster-yes"});
  if (r.code != 0)
    throw std::runtime_error("redis-cli --cluster reshard " + address(from) + " -> " + address(to) +
                             " failed: " + r.out);
  AwaitHealthy();
}

}  // namespace ef::test
