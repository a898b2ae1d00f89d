// A real redis-server on a free 127.0.0.1 port in a scratch directory, with AOF
// (appendfsync always) so Stop()+Start() keeps the data, like a production
// restart. Stopped (SIGKILL) when destroyed.
#pragma once

#include <memory>
#include <string>

#include "redis/connection.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace ef::test {

class RedisServer {
 public:
  RedisServer();  // starts it; throws if it does not answer PING within 10 s
  ~RedisServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void Start();
  // SIGTERM (Redis writes its AOF and exits), waits.
  void Stop();
  // Stop(), then removes the data files and starts again on the same port: a
  // Redis that came back empty (no persistence, or a lost disk).
  void RestartEmpty();
  std::unique_ptr<RedisConnection> Connect() const;
  // One command; throws on connection failure.
  RedisReply Command(const std::vector<std::string>& args) const;

 private:
  TempDir dir_;
  int port_;
  std::unique_ptr<Process> process_;
};

}  // namespace ef::test
