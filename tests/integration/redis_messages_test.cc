// What the programs say when Redis does not answer, or is not what redis.cluster
// says (issue 27): the timeout that fired with its value and the real time
// waited; a single Redis is not called a cluster.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <string>

#include "support/process.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

SplitRunResult Check(const RedisServer& redis, const std::vector<std::string>& sets) {
  // The item first: --set takes every word after it.
  std::vector<std::string> argv = {EF_BINARY, "check", "-u", "u1", "item"};
  argv.push_back("--set");
  argv.push_back("redis.address=" + redis.address());
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  return RunCommandWithEnv(argv, {}, "", 60s);
}

}  // namespace

TEST_CASE("redis messages: a silent Redis is reported with the timeout that fired and the wait",
          "[integration][redis][messages]") {
  RedisServer redis;
  redis.Signal(SIGSTOP);  // accepts connections (the kernel's backlog), answers nothing
  // redis.cluster: auto first asks whether it is a cluster: that wait is the one
  // reported, not a second attempt with what was left of the deadline ("PING:
  // timed out after 1 ms" after 5 s).
  const auto start = std::chrono::steady_clock::now();
  const SplitRunResult r = Check(redis, {"redis.command_timeout=1500ms"});
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  redis.Signal(SIGCONT);
  INFO("stderr: " << r.err << "\nwall: " << wall << " s");
  CHECK(r.code != 0);
  std::smatch m;
  REQUIRE(std::regex_search(
      r.err, m,
      std::regex("redis " + redis.address() +
                 ": PING: no answer within redis\\.command_timeout \\(1500 ms\\); waited "
                 "([0-9.]+) s")));
  const double waited = std::stod(m[1].str());
  CHECK(waited >= 1.5);
  CHECK(waited <= wall);
  CHECK(wall - waited < 0.5);                   // the message accounts for the whole wait
  CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
}

TEST_CASE("redis messages: redis.cluster true on a single Redis says so and what to set",
          "[integration][redis][messages]") {
  RedisServer redis;
  const SplitRunResult r = Check(redis, {"redis.cluster=true"});
  INFO("stderr: " << r.err);
  CHECK(r.code != 0);
  CHECK(r.err == "exposure-filter: redis " + redis.address() +
                     " is not a cluster (cluster support disabled); set redis.cluster=false\n");
}

TEST_CASE("redis messages: run against a single Redis that is down does not speak of a cluster",
          "[integration][redis][messages]") {
  Stack stack(1);
  const int dead = FreePort();
  auto daemon = stack.StartDaemon(stack.WriteConfig(
      "ef.yaml", "redis:\n  address: \"127.0.0.1:" + std::to_string(dead) + "\"\n"));
  const std::string expected =
      "redis 127.0.0.1:" + std::to_string(dead) + ": cannot connect: Connection refused";
  const bool said =
      WaitFor([&] { return daemon->Output().find(expected) != std::string::npos; }, 30s);
  const std::string log = daemon->Output();
  INFO("daemon log:\n" << log);
  CHECK(said);
  CHECK(log.find("cluster") == std::string::npos);
  daemon->Stop(SIGINT, 30s);  // (its exit code while waiting for Redis is not the point)
}

}  // namespace ef::test
