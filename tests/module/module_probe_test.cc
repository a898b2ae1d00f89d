// ProbeModule (src/redis/module_probe.h) against real redis-servers with and
// without the module: a master and replicas that have it, a replica that does
// not (and what happens to that replica's data when EF.SETBITS is written
// anyway: it diverges, which is why the probe exists), a replica that cannot be
// reached, and a user whose ACL refuses EF.VERSION.
#include "redis/module_probe.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "module/module_support.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

RedisOptions OptionsFor(const RedisServer& server) {
  RedisOptions o;
  o.port = server.port();
  o.connect_timeout_ms = 1000;
  o.command_timeout_ms = 2000;
  return o;
}

ModuleProbeResult Probe(const RedisOptions& options) {
  auto conn = RedisConnection::Connect(options);
  REQUIRE(conn.ok());
  auto result = ProbeModule(**conn, options);
  INFO(result.status().message());
  REQUIRE(result.ok());
  INFO("reason: " << result->reason);
  return result.value();
}

TEST_CASE("ProbeModule: a master and its replicas with the module are usable", "[module]") {
  auto master = ServerWithModule();
  auto replica1 = ServerWithModule();
  auto replica2 = ServerWithModule();
  replica1->ReplicaOf(master.get());
  replica2->ReplicaOf(master.get());
  REQUIRE(replica1->AwaitInSync(*master, 10s));
  REQUIRE(replica2->AwaitInSync(*master, 10s));

  ModuleProbeResult r = Probe(OptionsFor(*master));
  CHECK(r.usable());
  CHECK(r.reason.empty());
  CHECK(r.module_on_master);
  CHECK(r.master_version >= kMinEfModuleVersion);
  CHECK(r.replicas_total == 2);
  CHECK(r.replicas_with_module == 2);
}

TEST_CASE("ProbeModule: a master without the module is not usable", "[module]") {
  RedisServer plain({"--enable-module-command", "yes"});
  ModuleProbeResult r = Probe(OptionsFor(plain));
  CHECK_FALSE(r.usable());
  CHECK_FALSE(r.module_on_master);
  CHECK(r.master_version == 0);
  CHECK(r.replicas_total == 0);
  CHECK(r.reason == plain.address() + " has no module ef");

  // Loaded at runtime: the next probe (the writer's, on reconnect) sees it.
  auto conn = plain.Connect();
  REQUIRE(Cmd(*conn, {"MODULE", "LOAD", ModulePath()}).str == "OK");
  CHECK(Probe(OptionsFor(plain)).usable());
}

TEST_CASE("ProbeModule: a master without the module does not get its replicas asked",
          "[module]") {
  // write_mode auto (the default) probes on every connect: on a Redis without the
  // module the answer is "not usable" whatever the replicas have, so no connection
  // is made to them (one announced at an address that cannot be reached would
  // cost a connect timeout each time).
  RedisServer plain;
  auto replica = ServerWithModule({"--replica-announce-port", std::to_string(FreePort())});
  replica->ReplicaOf(&plain);
  REQUIRE(replica->AwaitInSync(plain, 10s));

  ModuleProbeResult r = Probe(OptionsFor(plain));
  CHECK_FALSE(r.usable());
  CHECK_FALSE(r.module_on_master);
  CHECK(r.replicas_total == 0);
  CHECK(r.reason == plain.address() + " has no module ef");
}

TEST_CASE("a replica without the module diverges under EF.SETBITS and the probe reports it",
          "[module]") {
  auto master = ServerWithModule();
  RedisServer replica;  // no module
  replica.ReplicaOf(master.get());
  REQUIRE(replica.AwaitInSync(*master, 10s));

  ModuleProbeResult r = Probe(OptionsFor(*master));
  CHECK_FALSE(r.usable());
  CHECK(r.module_on_master);
  CHECK(r.replicas_total == 1);
  CHECK(r.replicas_with_module == 0);
  CHECK(r.reason == master->address() + ": 1 of 1 replicas cannot run EF.SETBITS; replica " +
                        replica.address() + " has no module ef");

  // What a writer that ignored the probe would do to that replica: the master
  // applies and replicates the command, the replica rejects it (it only logs
  // that) and goes on in sync by offset, without the key.
  auto m = master->Connect();
  const std::string e = std::to_string(ServerNowMs(*m) / 1000 + 3600);
  REQUIRE(Cmd(*m, {"EF.SETBITS", "k", Pack({1, 2}), e}).integer == 2);
  REQUIRE(replica.AwaitInSync(*master, 10s));
  auto rc = replica.Connect();
  CHECK(Cmd(*m, {"EXISTS", "k"}).integer == 1);
  CHECK(Cmd(*rc, {"EXISTS", "k"}).integer == 0);
  CHECK(replica.Log().find("unknown command 'EF.SETBITS'") != std::string::npos);
}

TEST_CASE("ProbeModule: a replica it cannot reach counts as without the module", "[module]") {
  auto master = ServerWithModule();
  // The replica announces a port nobody listens on: the master lists it there.
  const int nowhere = FreePort();
  auto replica = ServerWithModule({"--replica-announce-port", std::to_string(nowhere)});
  replica->ReplicaOf(master.get());
  REQUIRE(replica->AwaitInSync(*master, 10s));

  ModuleProbeResult r = Probe(OptionsFor(*master));
  CHECK_FALSE(r.usable());
  CHECK(r.module_on_master);
  CHECK(r.replicas_total == 1);
  CHECK(r.replicas_with_module == 0);
  const std::string expected = master->address() + ": 1 of 1 replicas cannot run EF.SETBITS; " +
                               "replica 127.0.0.1:" + std::to_string(nowhere) + " unreachable: ";
  CHECK(r.reason.rfind(expected, 0) == 0);
}

TEST_CASE("ProbeModule: MODULE LIST answers when the ACL refuses EF.VERSION", "[module]") {
  // MODULE is refused to everyone unless enable-module-command allows it.
  auto master = ServerWithModule({"--enable-module-command", "yes"});
  auto replica = ServerWithModule({"--enable-module-command", "yes"});
  replica->ReplicaOf(master.get());
  REQUIRE(replica->AwaitInSync(*master, 10s));
  for (const RedisServer* server : {master.get(), replica.get()}) {
    auto conn = server->Connect();
    REQUIRE(
        Cmd(*conn, {"ACL", "SETUSER", "writer", "on", ">pw", "~*", "+@all", "-ef.version"}).str ==
        "OK");
    REQUIRE(Cmd(*conn, {"ACL", "SETUSER", "nobody", "on", ">pw", "~*", "+ping", "+info"}).str ==
            "OK");
  }
  RedisOptions writer = OptionsFor(*master);
  writer.username = "writer";
  writer.password = "pw";
  ModuleProbeResult r = Probe(writer);
  CHECK(r.usable());
  CHECK(r.master_version >= kMinEfModuleVersion);
  CHECK(r.replicas_with_module == 1);

  // Neither question allowed: cannot tell, so not usable, and the reason quotes both.
  RedisOptions nobody = writer;
  nobody.username = "nobody";
  r = Probe(nobody);
  INFO(r.reason);
  CHECK_FALSE(r.usable());
  CHECK_FALSE(r.module_on_master);
  CHECK(r.reason.find("cannot tell whether it has module ef: EF.VERSION answered \"NOPERM") !=
        std::string::npos);
  CHECK(r.reason.find("MODULE LIST answered \"NOPERM") != std::string::npos);
}

}  // namespace
}  // namespace ef::test
