#include "support/redis_server.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "support/redis_cluster.h"
#include "support/wait.h"

namespace ef::test {

RedisServer::RedisServer() : port_(FreePort()) { Start(); }

RedisServer::RedisServer(std::vector<std::string> extra_args)
    : port_(std::find(extra_args.begin(), extra_args.end(), "--cluster-enabled") != extra_args.end()
                ? FreeClusterPort()
                : FreePort()),
      extra_args_(std::move(extra_args)) {
  Start();
}

RedisServer::RedisServer(RedisTls tls, std::vector<std::string> extra_args)
    : port_(std::find(extra_args.begin(), extra_args.end(), "--cluster-enabled") != extra_args.end()
                ? FreeClusterPort()
                : FreePort()),
      extra_args_(std::move(extra_args)),
      tls_(std::move(tls)) {
  Start();
}

RedisOptions RedisServer::ClientOptions() const {
  RedisOptions o;
  o.port = port_;
  if (tls_) o.tls = ClientTls(tls_->certs, tls_->auth_clients != "no");
  return o;
}

RedisServer::~RedisServer() {
  if (process_) process_->Stop(SIGKILL, std::chrono::seconds(5));
}

void RedisServer::Start() {
  std::string listen = "port " + std::to_string(port_) + "\n";
  if (tls_) {
    listen = "port 0\ntls-port " + std::to_string(port_) + "\ntls-cert-file " +
             tls_->certs.server_cert + "\ntls-key-file " + tls_->certs.server_key +
             "\ntls-ca-cert-file " + tls_->certs.ca + "\ntls-auth-clients " + tls_->auth_clients +
             "\n";
  }
  dir_.Write("redis.conf", listen + "bind 127.0.0.1\ndir " + dir_.path() +
                               "\nappendonly yes\nappendfsync always\nsave \"\"\n"
                               "daemonize no\nlogfile \"\"\n");
  std::vector<std::string> argv{"redis-server", dir_.File("redis.conf")};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  process_ = std::make_unique<Process>(std::move(argv), dir_.File("redis.log"));
  bool up = WaitFor(
      [&] {
        RedisOptions o = ClientOptions();
        o.connect_timeout_ms = 200;
        return RedisConnection::Connect(o).ok();
      },
      std::chrono::seconds(10));
  if (!up)
    throw std::runtime_error("redis-server did not start on port " + std::to_string(port_) + ": " +
                             process_->Output());
}

void RedisServer::Stop() {
  if (process_) process_->Stop(SIGTERM, std::chrono::seconds(10));
  process_.reset();
}

void RedisServer::RestartEmpty() {
  Stop();
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("appendonly", 0) == 0 || name == "dump.rdb")
      std::filesystem::remove_all(entry.path());
  }
  Start();
}

std::string RedisServer::Log() const { return dir_.Read("redis.log"); }

void RedisServer::Signal(int sig) const {
  if (process_) process_->Signal(sig);
}

std::unique_ptr<RedisConnection> RedisServer::Connect() const {
  auto c = RedisConnection::Connect(ClientOptions());
  if (!c.ok()) throw std::runtime_error(c.status().message());
  return std::move(c.value());
}

RedisReply RedisServer::Command(const std::vector<std::string>& args) const {
  auto r = Connect()->Command(args);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r.value();
}

std::string RedisServer::InfoField(RedisConnection& conn, const std::string& section,
                                   const std::string& field) {
  auto r = conn.Command({"INFO", section});
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return InfoValue(r.value().str, field);
}

std::string RedisServer::InfoValue(const std::string& text, const std::string& field) {
  const std::string key = field + ":";
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find("\r\n", pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, key.size(), key) == 0)
      return text.substr(pos + key.size(), end - pos - key.size());
    pos = end + 2;
  }
  return "";
}

void RedisServer::ReplicaOf(const RedisServer* master) const {
  auto r = master ? Command({"REPLICAOF", "127.0.0.1", std::to_string(master->port())})
                  : Command({"REPLICAOF", "NO", "ONE"});
  if (r.type == RedisReply::Type::kError)
    throw std::runtime_error("REPLICAOF on " + address() + ": " + r.str);
}

bool RedisServer::AwaitInSync(const RedisServer& master, std::chrono::milliseconds timeout) const {
  auto self = Connect();
  auto other = master.Connect();
  return WaitFor(
      [&] {
        if (InfoField(*self, "replication", "master_link_status") != "up") return false;
        const std::string mine = InfoField(*self, "replication", "master_repl_offset");
        return !mine.empty() && mine == InfoField(*other, "replication", "master_repl_offset");
      },
      timeout);
}

}  // namespace ef::test
