// Redis answering READONLY, then switching back (issue 9, part 2): a manual
// failover behind a fixed address. The daemon's redis.address is node R1; a
// second redis-server R2 replicates it. Mid-stream an operator fails over to R2
// (R1 becomes R2's replica and answers writes with READONLY), and after a while
// fails back. The daemon keeps R1's address throughout, so it must drop the
// connection on READONLY, reconnect, commit nothing it did not write, and
// resume once R1 is a master again.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/fault_stream.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

int64_t InfoInt(RedisConnection& conn, const std::string& section, const std::string& field) {
  const std::string v = RedisServer::InfoField(conn, section, field);
  return v.empty() ? 0 : std::stoll(v);
}

// READONLY error replies `conn`'s server has sent so far (INFO errorstats:
// "errorstat_READONLY:count=N").
int64_t ReadonlyReplies(RedisConnection& conn) {
  const std::string v = RedisServer::InfoField(conn, "errorstats", "errorstat_READONLY");
  return v.rfind("count=", 0) == 0 ? std::stoll(v.substr(6)) : 0;
}

// Runs one command on `conn`; throws naming it on a connection failure or an
// error reply.
void Run(RedisConnection& conn, const std::vector<std::string>& args) {
  auto r = conn.Command(args);
  if (!r.ok()) throw std::runtime_error(args[0] + ": " + r.status().message());
  if (r.value().type == RedisReply::Type::kError)
    throw std::runtime_error(args[0] + " on " + conn.address() + ": " + r.value().str);
}

}  // namespace

TEST_CASE(
    "redis faults: Redis answering READONLY after a failover behind its address, then switching "
    "back, loses nothing",
    "[robustness][redis][failover]") {
  Stack stack(4);
  RedisServer& r1 = stack.redis();
  RedisServer r2;
  r2.ReplicaOf(&r1);
  REQUIRE(r2.AwaitInSync(r1, 20s));
  const std::string config = stack.WriteConfig();
  Stream stream(stack, "rfail", 5, 10ms);
  auto daemon = stack.StartDaemonAwaitingCommit(config);
  CommitGapMonitor monitor(stack);
  // One connection of the test's own to R1, so the server's connection count
  // tells the daemon's reconnects.
  auto r1_conn = r1.Connect();

  // The failover, as an operator does it: stop writes on R1, let R2 catch up,
  // promote R2, make R1 its replica.
  const auto failover_start = std::chrono::steady_clock::now();
  Run(*r1_conn, {"CLIENT", "PAUSE", "10000", "WRITE"});
  REQUIRE(r2.AwaitInSync(r1, 10s));
  r2.ReplicaOf(nullptr);
  r1.ReplicaOf(&r2);
  Run(*r1_conn, {"CLIENT", "UNPAUSE"});
  const double failover_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - failover_start).count();
  const int64_t committed_at_switch = stack.TotalCommitted();
  const int64_t connections_at_switch = InfoInt(*r1_conn, "stats", "total_connections_received");
  const int64_t readonly_at_switch = ReadonlyReplies(*r1_conn);
  // R1 read-only for 8 s while events keep arriving. After 2 s whatever R1
  // acknowledged before the pause has been committed (commit interval 200 ms);
  // from then on nothing may be committed.
  std::this_thread::sleep_for(2s);
  const int64_t committed_early = stack.TotalCommitted();
  std::this_thread::sleep_for(6s);
  const int64_t committed_during = stack.TotalCommitted();
  const int64_t reconnects =
      InfoInt(*r1_conn, "stats", "total_connections_received") - connections_at_switch;
  const int64_t readonly_replies = ReadonlyReplies(*r1_conn) - readonly_at_switch;
  const bool r1_was_replica = RedisServer::InfoField(*r1_conn, "replication", "role") == "slave";

  // Switch back: R1 catches up with R2 (which took no writes), is promoted
  // again, and R2 goes back to replicating it.
  REQUIRE(r1.AwaitInSync(r2, 20s));
  r1.ReplicaOf(nullptr);
  r2.ReplicaOf(&r1);
  std::this_thread::sleep_for(2s);  // keep producing after the switch back
  stream.Stop();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  monitor.Stop();
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const auto events = stream.events();
  const int64_t processed = MessagesProcessed(daemon->Output());
  const auto missing = MissingItems(*r1.Connect(), DefaultTestLayout(), events);
  std::printf(
      "redis-failover: injected a manual failover of R1 (the daemon's address) to its replica R2 "
      "mid-stream (CLIENT PAUSE WRITE, R2 in sync, R2 promoted, R1 made its replica: %.0f ms), R1 "
      "read-only 8 s, then switched back\n",
      failover_s * 1000);
  std::printf(
      "redis-failover: R1 answered %lld READONLY replies and accepted %lld new connections while "
      "read-only; %zu events produced, daemon processed %lld (%lld re-read), committed %lld at "
      "the switch, %lld after 2 s and %lld after 8 s read-only, all committed at the end, longest "
      "commit gap %.1f s, %zu false negatives (read from R1)\n",
      static_cast<long long>(readonly_replies), static_cast<long long>(reconnects), events.size(),
      static_cast<long long>(processed),
      static_cast<long long>(processed - static_cast<int64_t>(events.size())),
      static_cast<long long>(committed_at_switch), static_cast<long long>(committed_early),
      static_cast<long long>(committed_during), monitor.MaxGapSeconds(), missing.size());
  CHECK(r1_was_replica);
  CHECK(stream.failed() == 0);
  // The fault was seen: the daemon's writes got READONLY, and it reconnected.
  CHECK(readonly_replies > 0);
  CHECK(reconnects > 0);
  // Nothing committed that R1 did not acknowledge before it went read-only.
  CHECK(committed_during <= committed_at_switch + 2000);
  CHECK(committed_during == committed_early);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());
}

}  // namespace ef::test
