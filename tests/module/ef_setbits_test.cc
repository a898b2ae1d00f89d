// EF.SETBITS (redis-module/) through real redis-servers that load the module:
// the bits equal SETBIT's byte for byte, the reply counts the bits that were 0,
// the expiry is set only when missing, bad arguments are refused without effect,
// replicas with the module end up equal to their master, the AOF replays it, and
// the module loads at runtime (MODULE LOAD) and refuses what it must.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "module/module_support.h"
#include "redis/module_probe.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

std::string Resp(const std::vector<std::string>& args) {
  std::string out;
  AppendRespArrayHeader(args.size(), &out);
  for (const auto& a : args) AppendRespBulk(a, &out);
  return out;
}

TEST_CASE("EF.SETBITS sets the bits SETBIT sets and replies with the bits that were 0",
          "[module]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t expireat = ServerNowMs(*conn) / 1000 + 3600;
  // Keys that already hold a string: their bits count as set.
  Cmd(*conn, {"SET", "m:old", "hello"});
  Cmd(*conn, {"SET", "s:old", "hello"});

  std::mt19937 rng(13);
  const std::vector<std::string> keys{"old", "a", "b", "c", "d"};
  int64_t total_new = 0;
  for (int round = 0; round < 8; ++round) {
    for (const std::string& key : keys) {
      std::vector<uint32_t> positions;
      const int n = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) positions.push_back(rng() % (round < 4 ? 64 : 5000));
      positions.push_back(positions.front());               // a repeat counts once
      if (round == 6) positions.push_back((1u << 20) + 3);  // grows the string to 128 KiB
      RedisReply ours =
          Cmd(*conn, {"EF.SETBITS", "m:" + key, Pack(positions), std::to_string(expireat)});
      int64_t were_zero = 0;
      for (uint32_t p : positions) {
        RedisReply old = Cmd(*conn, {"SETBIT", "s:" + key, std::to_string(p), "1"});
        REQUIRE(old.type == RedisReply::Type::kInteger);
        if (old.integer == 0) ++were_zero;
      }
      INFO("round " << round << " key " << key << ": " << ours.str);
      REQUIRE(ours.type == RedisReply::Type::kInteger);
      CHECK(ours.integer == were_zero);
      total_new += ours.integer;
      RedisReply ours_bits = Cmd(*conn, {"GET", "m:" + key});
      RedisReply setbit_bits = Cmd(*conn, {"GET", "s:" + key});
      REQUIRE(ours_bits.str.size() == setbit_bits.str.size());
      REQUIRE(ours_bits.str == setbit_bits.str);
    }
  }
  CHECK(total_new > 0);
  // Bits of the first and last bit of a byte, and the grown length.
  Cmd(*conn, {"EF.SETBITS", "edge", Pack({0, 15}), std::to_string(expireat)});
  CHECK(Cmd(*conn, {"GET", "edge"}).str == std::string("\x80\x01", 2));
  CHECK(Cmd(*conn, {"STRLEN", "m:a"}).integer == (1 << 17) + 1);
}

TEST_CASE("EF.SETBITS sets the expiry only on a key that has none", "[module]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t now_ms = ServerNowMs(*conn);
  const int64_t expireat = now_ms / 1000 + 3600;
  const std::string e = std::to_string(expireat);

  // A new key gets expireat, to the millisecond.
  REQUIRE(Cmd(*conn, {"EF.SETBITS", "new", Pack({3}), e}).integer == 1);
  CHECK(Cmd(*conn, {"PEXPIRETIME", "new"}).integer == expireat * 1000);
  const int64_t pttl = Cmd(*conn, {"PTTL", "new"}).integer;
  CHECK(pttl > 0);
  CHECK(pttl <= expireat * 1000 - now_ms);
  // ... and keeps it when a later call names another time.
  Cmd(*conn, {"EF.SETBITS", "new", Pack({4}), std::to_string(expireat + 600)});
  CHECK(Cmd(*conn, {"EXPIRETIME", "new"}).integer == expireat);

  // A key with a TTL keeps it.
  const int64_t other_ms = (now_ms / 1000 + 7200) * 1000 + 123;
  Cmd(*conn, {"SET", "with_ttl", "x", "PXAT", std::to_string(other_ms)});
  REQUIRE(Cmd(*conn, {"EF.SETBITS", "with_ttl", Pack({100}), e}).integer == 1);
  CHECK(Cmd(*conn, {"PEXPIRETIME", "with_ttl"}).integer == other_ms);

  // A key without one gets expireat, also when no bit changes.
  Cmd(*conn, {"SET", "no_ttl", std::string("\xff", 1)});
  REQUIRE(Cmd(*conn, {"EF.SETBITS", "no_ttl", Pack({0, 1, 7}), e}).integer == 0);
  CHECK(Cmd(*conn, {"EXPIRETIME", "no_ttl"}).integer == expireat);
  CHECK(Cmd(*conn, {"GET", "no_ttl"}).str == std::string("\xff", 1));
}

TEST_CASE("EF.SETBITS sets the expiry on a Redis whose EXPIREAT is renamed away", "[module]") {
  auto redis = ServerWithModule({"--rename-command", "EXPIREAT", ""});
  auto conn = redis->Connect();
  REQUIRE(Cmd(*conn, {"EXPIREAT", "x", "1"}).str.rfind("ERR unknown command", 0) == 0);
  const int64_t expireat = ServerNowMs(*conn) / 1000 + 3600;
  REQUIRE(Cmd(*conn, {"EF.SETBITS", "new", Pack({3}), std::to_string(expireat)}).integer == 1);
  // Milliseconds from now then: Redis adds its clock, up to 1 ms later than ours.
  const int64_t at = Cmd(*conn, {"PEXPIRETIME", "new"}).integer;
  CHECK(at >= expireat * 1000);
  CHECK(at <= expireat * 1000 + 1);
}

TEST_CASE("EF.SETBITS refuses bad arguments and other types, and changes nothing then",
          "[module]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t now_s = ServerNowMs(*conn) / 1000;
  const std::string e = std::to_string(now_s + 3600);
  const std::string ok_positions = Pack({1, 2});

  struct Case {
    std::vector<std::string> args;
    std::string error_start;
  };
  const std::vector<Case> cases{
      {{"EF.SETBITS", "k", "", e}, "ERR EF.SETBITS positions must be packed"},
      {{"EF.SETBITS", "k", "abc", e}, "ERR EF.SETBITS positions must be packed"},
      {{"EF.SETBITS", "k", "abcde", e}, "ERR EF.SETBITS positions must be packed"},
      {{"EF.SETBITS", "k", ok_positions, "soon"}, "ERR EF.SETBITS expireat must be an integer"},
      {{"EF.SETBITS", "k", ok_positions, "1.5"}, "ERR EF.SETBITS expireat must be an integer"},
      {{"EF.SETBITS", "k", ok_positions, "0"}, "ERR EF.SETBITS expireat must be an integer"},
      {{"EF.SETBITS", "k", ok_positions, "-5"}, "ERR EF.SETBITS expireat must be an integer"},
      {{"EF.SETBITS", "k", ok_positions, "99999999999999"},
       "ERR EF.SETBITS expireat must be an integer"},
      {{"EF.SETBITS", "k", ok_positions, std::to_string(now_s - 10)},
       "ERR EF.SETBITS expireat " + std::to_string(now_s - 10) + " is not in the future"},
      {{"EF.SETBITS", "k", ok_positions}, "ERR wrong number of arguments for 'ef.setbits'"},
      {{"EF.SETBITS", "k", ok_positions, e, "extra"},
       "ERR wrong number of arguments for 'ef.setbits'"},
      {{"EF.SETBITS"}, "ERR wrong number of arguments for 'ef.setbits'"},
      {{"EF.VERSION", "x"}, "ERR wrong number of arguments for 'ef.version'"},
  };
  for (const Case& c : cases) {
    RedisReply r = Cmd(*conn, c.args);
    INFO(c.args.size() << " args, reply: " << r.str);
    REQUIRE(r.type == RedisReply::Type::kError);
    CHECK(r.str.rfind(c.error_start, 0) == 0);
    CHECK(Cmd(*conn, {"EXISTS", "k"}).integer == 0);
  }

  // Another type: the standard WRONGTYPE, the value untouched.
  Cmd(*conn, {"RPUSH", "list", "a", "b"});
  Cmd(*conn, {"HSET", "hash", "f", "v"});
  for (const std::string key : {"list", "hash"}) {
    RedisReply r = Cmd(*conn, {"EF.SETBITS", key, ok_positions, e});
    REQUIRE(r.type == RedisReply::Type::kError);
    CHECK(r.str == "WRONGTYPE Operation against a key holding the wrong kind of value");
    CHECK(Cmd(*conn, {"TTL", key}).integer == -1);
  }
  CHECK(Cmd(*conn, {"LRANGE", "list", "0", "-1"}).elements.size() == 2);
  CHECK(Cmd(*conn, {"HGET", "hash", "f"}).str == "v");
}

TEST_CASE("a replica with the module ends up with its master's bits and expiries", "[module]") {
  auto master = ServerWithModule();
  auto replica = ServerWithModule();
  auto m = master->Connect();
  const int64_t expireat = ServerNowMs(*m) / 1000 + 3600;
  const std::string e = std::to_string(expireat);
  const int64_t other_ms = (expireat + 3600) * 1000 + 7;
  // Some state before the replica attaches (full sync), some after (the stream).
  Cmd(*m, {"EF.SETBITS", "k1", Pack({1, 2, 3}), e});
  replica->ReplicaOf(master.get());
  REQUIRE(replica->AwaitInSync(*master, 10s));
  Cmd(*m, {"SET", "k2", "x", "PXAT", std::to_string(other_ms)});
  Cmd(*m, {"SET", "k3", "y"});
  for (const std::string key : {"k1", "k2", "k3", "k4"})
    Cmd(*m, {"EF.SETBITS", key, Pack({5, 900, 77777, 5}), e});
  Cmd(*m, {"EF.SETBITS", "k1", Pack({1}), e});  // nothing changes: not sent
  REQUIRE(replica->AwaitInSync(*master, 10s));

  auto r = replica->Connect();
  for (const std::string key : {"k1", "k2", "k3", "k4"}) {
    INFO(key);
    RedisReply on_master = Cmd(*m, {"GET", key});
    REQUIRE(on_master.type == RedisReply::Type::kString);
    CHECK(Cmd(*r, {"GET", key}).str == on_master.str);
    const int64_t master_at = Cmd(*m, {"PEXPIRETIME", key}).integer;
    CHECK(Cmd(*r, {"PEXPIRETIME", key}).integer == master_at);
    if (key == "k2")
      CHECK(master_at == other_ms);
    else
      CHECK(Cmd(*m, {"EXPIRETIME", key}).integer == expireat);
  }
  // A replica refuses writes of its own.
  RedisReply refused = Cmd(*r, {"EF.SETBITS", "k5", Pack({1}), e});
  CHECK(refused.str.rfind("READONLY", 0) == 0);
}

TEST_CASE("a replica that applies EF.SETBITS after its expireat passed still sets the bits",
          "[module]") {
  auto master = ServerWithModule();
  auto replica = ServerWithModule();
  replica->ReplicaOf(master.get());
  auto m = master->Connect();
  const int64_t long_ms = (ServerNowMs(*m) / 1000 + 7200) * 1000;
  Cmd(*m, {"SET", "kept", std::string(1, '\0'), "PXAT", std::to_string(long_ms)});
  REQUIRE(replica->AwaitInSync(*master, 10s));

  // The replica stands still while the master writes with an expireat one
  // second ahead and that second passes.
  replica->Signal(SIGSTOP);
  const int64_t expireat = ServerNowMs(*m) / 1000 + 1;
  REQUIRE(Cmd(*m, {"EF.SETBITS", "kept", Pack({9}), std::to_string(expireat)}).integer == 1);
  REQUIRE(WaitFor([&] { return ServerNowMs(*m) > expireat * 1000; }, 5s));
  replica->Signal(SIGCONT);
  REQUIRE(replica->AwaitInSync(*master, 10s));

  auto r = replica->Connect();
  CHECK(Cmd(*r, {"GET", "kept"}).str == std::string("\0\x40", 2));
  CHECK(Cmd(*r, {"GET", "kept"}).str == Cmd(*m, {"GET", "kept"}).str);
  CHECK(Cmd(*r, {"PEXPIRETIME", "kept"}).integer == long_ms);
}

TEST_CASE("EF.SETBITS replayed from the AOF after its expireat passed still sets the bits",
          "[module]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t now_s = ServerNowMs(*conn) / 1000;
  const int64_t long_ms = (now_s + 7200) * 1000;
  Cmd(*conn, {"SET", "kept", std::string(1, '\0'), "PXAT", std::to_string(long_ms)});
  conn.reset();
  redis->Stop();
  // What the AOF holds when the server went down after an EF.SETBITS whose
  // expireat has passed since (the master checked it was ahead).
  std::filesystem::path incr;
  for (const auto& f : std::filesystem::directory_iterator(redis->dir() + "/appendonlydir"))
    if (f.path().string().find(".incr.aof") != std::string::npos) incr = f.path();
  REQUIRE(!incr.empty());
  const std::string past = std::to_string(now_s - 60);
  std::ofstream(incr, std::ios::app) << Resp({"EF.SETBITS", "kept", Pack({9}), past})
                                     << Resp({"EF.SETBITS", "gone", Pack({9}), past});
  redis->Start();

  conn = redis->Connect();
  // The key with a TTL of its own got the bit and kept its TTL.
  CHECK(Cmd(*conn, {"GET", "kept"}).str == std::string("\0\x40", 2));
  CHECK(Cmd(*conn, {"PEXPIRETIME", "kept"}).integer == long_ms);
  // The new key expired at load, as its expireat was past.
  CHECK(Cmd(*conn, {"EXISTS", "gone"}).integer == 0);
}

TEST_CASE("EF.SETBITS on a Redis Cluster node: key routing and the expiry", "[module]") {
  auto node =
      ServerWithModule({"--cluster-enabled", "yes", "--cluster-require-full-coverage", "no"});
  auto conn = node->Connect();
  REQUIRE(Cmd(*conn, {"CLUSTER", "ADDSLOTSRANGE", "0", "8191"}).str == "OK");
  const std::string pos = Pack({0});
  const std::string e = std::to_string(ServerNowMs(*conn) / 1000 + 3600);
  // The key is found where the key spec says (argv[1]) ...
  RedisReply keys = Cmd(*conn, {"COMMAND", "GETKEYS", "EF.SETBITS", "{u1}k", pos, e});
  REQUIRE(keys.elements.size() == 1);
  CHECK(keys.elements[0].str == "{u1}k");
  // ... and its slot decides: served here (4574) or not (15495).
  REQUIRE(Cmd(*conn, {"CLUSTER", "KEYSLOT", "{u1}k"}).integer == 4574);
  REQUIRE(Cmd(*conn, {"CLUSTER", "KEYSLOT", "a"}).integer == 15495);
  REQUIRE(WaitFor([&] { return Cmd(*conn, {"EF.SETBITS", "{u1}k", pos, e}).integer == 1; }, 5s));
  CHECK(Cmd(*conn, {"PEXPIRETIME", "{u1}k"}).integer == std::stoll(e) * 1000);
  CHECK(Cmd(*conn, {"EF.SETBITS", "a", pos, e}).str == "CLUSTERDOWN Hash slot not served");
  CHECK(Cmd(*conn, {"EXISTS", "a"}).str.rfind("CLUSTERDOWN", 0) == 0);
}

TEST_CASE("the module loads at runtime, refuses arguments and a second load", "[module]") {
  RedisServer redis({"--enable-module-command", "yes"});  // Redis 7 refuses MODULE LOAD by default
  auto conn = redis.Connect();
  CHECK(Cmd(*conn, {"EF.VERSION"}).str.rfind("ERR unknown command", 0) == 0);

  RedisReply with_args = Cmd(*conn, {"MODULE", "LOAD", ModulePath(), "extra"});
  CHECK(with_args.type == RedisReply::Type::kError);
  CHECK(redis.Log().find("<ef> not loaded: the module takes no arguments, got 1") !=
        std::string::npos);

  RedisReply loaded = Cmd(*conn, {"MODULE", "LOAD", ModulePath()});
  REQUIRE(loaded.str == "OK");
  CHECK(redis.Log().find("<ef> version " + std::to_string(EF_MODULE_VERSION) + " loaded") !=
        std::string::npos);
  RedisReply list = Cmd(*conn, {"MODULE", "LIST"});
  REQUIRE(list.elements.size() == 1);
  CHECK(list.elements[0].elements[1].str == "ef");
  CHECK(list.elements[0].elements[3].integer == Cmd(*conn, {"EF.VERSION"}).integer);
  CHECK(Cmd(*conn, {"EF.VERSION"}).integer >= 1);

  const std::string e = std::to_string(ServerNowMs(*conn) / 1000 + 60);
  CHECK(Cmd(*conn, {"EF.SETBITS", "k", Pack({0}), e}).integer == 1);
  CHECK(Cmd(*conn, {"MODULE", "LOAD", ModulePath()}).type == RedisReply::Type::kError);
  CHECK(Cmd(*conn, {"EF.SETBITS", "k", Pack({1}), e}).integer == 1);
  CHECK(Cmd(*conn, {"GET", "k"}).str == "\xc0");
  // Cluster routing reads the key position from the command table.
  RedisReply info = Cmd(*conn, {"COMMAND", "INFO", "EF.SETBITS"});
  REQUIRE(info.elements.size() == 1);
  REQUIRE(info.elements[0].elements.size() >= 6);
  CHECK(info.elements[0].elements[3].integer == 1);  // first key
  CHECK(info.elements[0].elements[4].integer == 1);  // last key
  CHECK(info.elements[0].elements[5].integer == 1);  // step
}

}  // namespace
// Issue 27: the module's version is the project's (major*10000 + minor*100 +
// patch), as CMake passes it to both.
TEST_CASE("EF.VERSION is the project version as an integer", "[module][version]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const RedisReply v = Cmd(*conn, {"EF.VERSION"});
  REQUIRE(v.type == RedisReply::Type::kInteger);
  CHECK(v.integer == EF_MODULE_VERSION);
  int major = 0, minor = 0, patch = 0;
  REQUIRE(std::sscanf(EF_VERSION, "%d.%d.%d", &major, &minor, &patch) == 3);
  CHECK(v.integer == major * 10000 + minor * 100 + patch);
  CHECK(v.integer >= kMinEfModuleVersion);
}

}  // namespace ef::test
