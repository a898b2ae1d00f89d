// A real redis-server on a free 127.0.0.1 port in a scratch directory, with AOF
// (appendfsync always) so Stop()+Start() keeps the data, like a production
// restart. Stopped (SIGKILL) when destroyed.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/connection.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/tls_certs.h"

namespace ef::test {

// A redis-server that speaks TLS only (port 0, tls-port on the free port).
struct RedisTls {
  // (A constructor, not an aggregate: RedisServer({"--appendonly", "no"}) must
  // stay the extra-arguments constructor.)
  explicit RedisTls(TlsCerts c, std::string auth = "no")
      : certs(std::move(c)), auth_clients(std::move(auth)) {}
  TlsCerts certs;
  std::string auth_clients;  // tls-auth-clients: no | yes (mutual TLS) | optional
};

class RedisServer {
 public:
  RedisServer();  // starts it; throws if it does not answer PING within 10 s
  // The same, with extra redis-server command-line arguments after the config
  // file, e.g. {"--loadmodule", path}; kept for every Start().
  explicit RedisServer(std::vector<std::string> extra_args);
  // TLS only, with extra arguments as above.
  explicit RedisServer(RedisTls tls, std::vector<std::string> extra_args = {});
  ~RedisServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void Start();
  // SIGTERM (Redis writes its AOF and exits), waits.
  void Stop();
  // Stop(), then removes the data files and starts again on the same port: a
  // Redis that came back empty (no persistence, or a lost disk).
  void RestartEmpty();
  // What Connect() uses: host, port and, for a TLS server, TLS trusting its CA
  // (with the client certificate).
  RedisOptions ClientOptions() const;
  const std::optional<RedisTls>& tls() const { return tls_; }
  std::unique_ptr<RedisConnection> Connect() const;
  // One command; throws on connection failure.
  RedisReply Command(const std::vector<std::string>& args) const;
  // A field of `INFO <section>` (e.g. "replication", "master_repl_offset") read
  // over `conn` (a connection to this server, so polling adds none); "" if the
  // reply has no such field. Throws on connection failure.
  // The value of `field` in the text of an INFO (or CLUSTER INFO) reply; "" if absent.
  static std::string InfoValue(const std::string& info_text, const std::string& field);
  static std::string InfoField(RedisConnection& conn, const std::string& section,
                               const std::string& field);
  // The server's directory (config, AOF, log) and what it printed so far.
  const std::string& dir() const { return dir_.path(); }
  std::string Log() const;
  // Sends `sig` to the server process (e.g. SIGSTOP / SIGCONT: a replica that
  // falls behind its master for a while). No-op when stopped.
  void Signal(int sig) const;
  // `REPLICAOF 127.0.0.1 <master's port>`; nullptr: `REPLICAOF NO ONE`.
  void ReplicaOf(const RedisServer* master) const;
  // Waits until this server, a replica of `master`, has its link up and has
  // processed the master's whole replication stream (equal master_repl_offset).
  bool AwaitInSync(const RedisServer& master, std::chrono::milliseconds timeout) const;

 private:
  TempDir dir_;
  int port_;
  std::vector<std::string> extra_args_;
  std::optional<RedisTls> tls_;
  std::unique_ptr<Process> process_;
};

}  // namespace ef::test
