// EF.CLASSKEY (redis-module/, layout v4's creation step done natively) through
// real redis-servers that load the module: for the same histories it creates the
// same value, with the same expiry, as the writer's Lua creation script (the
// reference, write/class_create.h) and as ChooseClassFrom; an existing key is
// returned untouched; bad arguments and other types are refused with nothing
// created; a replica without the module gets the key (the effect is replicated);
// ProbeModule tells whether a user may run it; EF.CLASSKEY and the script racing
// on the same keys agree; and a module-mode writer creates
// layout v4's keys with it, not with the script.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "common/sha1.h"
#include "config/config.h"
#include "module/module_support.h"
#include "redis/module_probe.h"
#include "support/class_rule.h"
#include "write/bit_writer.h"
#include "write/class_create.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kDay = 86400;

int64_t Today() { return BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay); }

// EF.CLASSKEY with the script's arguments for `user`'s key of bucket `start`.
std::vector<std::string> NativeArgs(const Layout& l, const std::string& user, int64_t start) {
  std::vector<std::string> args = {"EF.CLASSKEY"};
  for (std::string& a : ClassKeyCall(l, MakeKey(l.prefix, user, start, kDay), start))
    args.push_back(std::move(a));
  return args;
}

// A random previous value of `start`'s bucket under `l` ("" = no key).
std::string RandomHistory(const Layout& l, int64_t items, int64_t start, std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 7);
  if (kind == 0) return "";
  if (kind == 1) return std::string(1 + rng() % 40, '\0');  // an empty filter
  if (!l.HasClass(start))
    return Filled(l.stage_table, 0, static_cast<int>(rng() % std::min<int64_t>(3000, 30 * items)),
                  rng());
  const auto c = static_cast<uint32_t>(rng() % l.class_tables.size());
  // Up to about 3 times the class's design (at most 3,000 items: Filled is slow).
  const int most = std::min(3000, static_cast<int>(SizeClassBytes(c)) / 2);
  std::string v =
      Filled(l.class_tables[c], static_cast<int>(c) + 1, static_cast<int>(rng() % most), rng());
  if (kind == 2) v[0] = 0;  // names no class
  if (kind == 3) v[0] = static_cast<char>(l.class_tables.size() + 1 + rng() % 3);
  return v;
}

// The calls of `command` in an INFO commandstats text (0 if never called).
int64_t Calls(const std::string& stats, const std::string& command) {
  const std::string field = "cmdstat_" + command + ":calls=";
  const size_t at = stats.find(field);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + field.size()));
}

}  // namespace

TEST_CASE("EF.CLASSKEY creates the value the creation script creates, for every history",
          "[module][v4]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t today = Today();
  std::mt19937_64 rng(5301);
  struct Shape {
    int64_t items;
    uint32_t stages;
    int64_t v4_from;  // yesterday: the day before's keys are version 3's
  };
  int kept_apart = 0;
  std::map<uint32_t, int> classes;
  for (const Shape& shape : {Shape{200, 8, today - kDay}, Shape{10, 8, 0}, Shape{50, 1, 0},
                             Shape{1000, 12, today - kDay}}) {
    const Layout script = V4Layout("cs:", shape.items, shape.stages, shape.v4_from);
    const Layout native = V4Layout("cn:", shape.items, shape.stages, shape.v4_from);
    INFO("items_per_bucket " << shape.items << ", stages " << shape.stages);
    for (int u = 0; u < 80; ++u) {
      const std::string user = "u" + std::to_string(shape.items) + "-" + std::to_string(u);
      std::string history[2];
      for (int back = 1; back <= 2; ++back) {
        const int64_t start = today - back * kDay;
        history[back - 1] = RandomHistory(script, shape.items, start, rng);
        if (history[back - 1].empty()) continue;
        for (const Layout* l : {&script, &native})
          Cmd(*conn, {"SET", MakeKey(l->prefix, user, start, kDay), history[back - 1]});
      }
      const RedisReply want = Cmd(*conn, CreateClassKeyArgs(script, user, today));
      const RedisReply got = Cmd(*conn, NativeArgs(native, user, today));
      INFO("user " << user << ": " << got.str.substr(0, 60));
      REQUIRE(want.type == RedisReply::Type::kString);
      REQUIRE(got.type == RedisReply::Type::kString);
      REQUIRE_FALSE(got.str.empty());
      CHECK(Hex(got.str) == Hex(want.str));
      const uint32_t c = static_cast<uint8_t>(got.str[0]) - 1;
      CHECK(c == ChooseClassFrom(native, today, history[0], history[1]));
      ++classes[c];
      const std::string key = MakeKey(native.prefix, user, today, kDay);
      CHECK(Cmd(*conn, {"GET", key}).str == got.str);
      CHECK(Cmd(*conn, {"EXPIRETIME", key}).integer ==
            ExpireAt(today, kDay, native.window_seconds));
      // Yesterday's class chosen (by the estimate or by hysteresis).
      kept_apart += !history[0].empty() && history[0][0] != 0 &&
                    c == static_cast<uint8_t>(history[0][0]) - 1u;
    }
  }
  CHECK(classes.size() >= 10);  // the histories reach many classes
  CHECK(kept_apart >= 10);      // and yesterday's class is often the one chosen
}

TEST_CASE("EF.CLASSKEY and the creation script racing on the same keys agree on every key",
          "[module][v4]") {
  // Two writers during a rolling module upgrade: one creates with EF.CLASSKEY,
  // the other with the script, pipelined in opposite orders over 300 users.
  auto redis = ServerWithModule();
  const int64_t today = Today();
  const Layout l = V4Layout("cx:", 200, 8, 0);
  {
    auto conn = redis->Connect();
    for (int u = 0; u < 300; ++u)
      Cmd(*conn, {"SET", MakeKey(l.prefix, "r" + std::to_string(u), today - kDay, kDay),
                  Filled(l.class_tables[u % 20], u % 20 + 1, 40 * (u % 30), u)});
  }
  std::vector<std::vector<std::string>> got(2, std::vector<std::string>(300));
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      auto conn = redis->Connect();
      std::vector<std::vector<std::string>> cmds;
      for (int u = 0; u < 300; ++u) {
        const std::string user = "r" + std::to_string(w == 0 ? u : 299 - u);
        cmds.push_back(w == 0 ? NativeArgs(l, user, today) : CreateClassKeyArgs(l, user, today));
      }
      std::vector<RedisReply> replies;
      if (!conn->Commands(cmds, &replies).ok() || replies.size() != 300) return;
      for (int u = 0; u < 300; ++u) got[w][w == 0 ? u : 299 - u] = replies[u].str;
    });
  }
  for (auto& t : writers) t.join();
  auto conn = redis->Connect();
  std::set<int> classes;
  for (int u = 0; u < 300; ++u) {
    INFO("user r" << u);
    const std::string stored =
        Cmd(*conn, {"GET", MakeKey(l.prefix, "r" + std::to_string(u), today, kDay)}).str;
    REQUIRE_FALSE(stored.empty());
    CHECK(got[0][u] == stored);
    CHECK(got[1][u] == stored);
    // Whichever won, the rule's class.
    const std::string past =
        Cmd(*conn, {"GET", MakeKey(l.prefix, "r" + std::to_string(u), today - kDay, kDay)}).str;
    CHECK(static_cast<uint8_t>(stored[0]) - 1u == ChooseClassFrom(l, today, past, ""));
    classes.insert(static_cast<uint8_t>(stored[0]));
  }
  CHECK(classes.size() > 5);
}

TEST_CASE("EF.CLASSKEY returns an existing key as stored and refuses bad arguments unchanged",
          "[module][v4]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t today = Today();
  const Layout l = V4Layout("ce:", 200, 8, 0);
  const std::string key = MakeKey(l.prefix, "u", today, kDay);

  // An existing key, even one the rule would not have created: as stored, TTL kept.
  Cmd(*conn, {"SET", key, std::string("\x03\x00\x10zz", 5)});
  Cmd(*conn, {"EXPIREAT", key, "4000000000"});
  CHECK(Cmd(*conn, NativeArgs(l, "u", today)).str == std::string("\x03\x00\x10zz", 5));
  CHECK(Cmd(*conn, {"EXPIRETIME", key}).integer == 4000000000);
  // ... whatever the arguments, as the script, which reads none of them then.
  std::vector<std::string> odd = NativeArgs(l, "u", today);
  odd[6] = "x";  // k
  CHECK(Cmd(*conn, odd).str == std::string("\x03\x00\x10zz", 5));

  // Arity, and each integer argument out of range: an error naming it, no key.
  Cmd(*conn, {"DEL", key});
  CHECK(Cmd(*conn, {"EF.CLASSKEY", key}).str ==
        "ERR wrong number of arguments for 'ef.classkey' command");
  const std::vector<std::string> good = NativeArgs(l, "u", today);
  const char* names[] = {"expireat", "m",        "k",     "growth",   "k_step",
                         "stages",   "fill_ppm", "count", "classed1", "classed2"};
  for (int i = 0; i < 10; ++i) {
    for (const std::string bad : {"x", "-1", "99999999999999"}) {
      std::vector<std::string> args = good;
      args[4 + i] = bad;
      const RedisReply r = Cmd(*conn, args);
      INFO("argument " << names[i] << " = " << bad << ": " << r.str);
      CHECK(r.type == RedisReply::Type::kError);
      CHECK(r.str.rfind(std::string("ERR EF.CLASSKEY ") + names[i] + " must be an integer", 0) ==
            0);
    }
  }
  CHECK(Cmd(*conn, {"EXISTS", key}).integer == 0);

  // Another type at the key, or at a previous bucket's key: WRONGTYPE, nothing created.
  Cmd(*conn, {"LPUSH", key, "x"});
  CHECK(Cmd(*conn, good).str.rfind("WRONGTYPE", 0) == 0);
  Cmd(*conn, {"DEL", key});
  Cmd(*conn, {"LPUSH", MakeKey(l.prefix, "u", today - kDay, kDay), "x"});
  CHECK(Cmd(*conn, good).str.rfind("WRONGTYPE", 0) == 0);
  CHECK(Cmd(*conn, {"EXISTS", key}).integer == 0);

  // Keys of two slots: refused by a cluster, but a single Redis takes them as
  // the script would; the module's key spec names all three keys.
  const RedisReply info = Cmd(*conn, {"COMMAND", "GETKEYS", "EF.CLASSKEY", "a", "b", "c", "1", "1",
                                      "1", "1", "1", "1", "1", "1", "0", "0"});
  REQUIRE(info.elements.size() == 3);
  CHECK(info.elements[2].str == "c");
}

TEST_CASE("EF.CLASSKEY is replicated as its effect: a replica without the module has the key",
          "[module][v4]") {
  auto master = ServerWithModule();
  RedisServer replica;  // no module
  replica.ReplicaOf(master.get());
  REQUIRE(replica.AwaitInSync(*master, 10s));
  auto m = master->Connect();
  const int64_t today = Today();
  const Layout l = V4Layout("cr:", 200, 8, 0);
  Cmd(*m,
      {"SET", MakeKey(l.prefix, "u", today - kDay, kDay), Filled(l.class_tables[9], 10, 2000, 7)});
  const std::string value = Cmd(*m, NativeArgs(l, "u", today)).str;
  REQUIRE(value.size() > 1);
  CHECK(static_cast<uint8_t>(value[0]) - 1u ==
        ChooseClassFrom(l, today, Cmd(*m, {"GET", MakeKey(l.prefix, "u", today - kDay, kDay)}).str,
                        ""));
  REQUIRE(replica.AwaitInSync(*master, 10s));
  auto r = replica.Connect();
  const std::string key = MakeKey(l.prefix, "u", today, kDay);
  CHECK(Cmd(*r, {"GET", key}).str == value);
  CHECK(Cmd(*r, {"EXPIRETIME", key}).integer == ExpireAt(today, kDay, l.window_seconds));
  CHECK(replica.Log().find("unknown command") == std::string::npos);
}

TEST_CASE("ProbeModule: EF.CLASSKEY is found, and not when the ACL refuses it", "[module][v4]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  Cmd(*conn, {"ACL", "SETUSER", "old", "on", ">pw", "~*", "+@all", "-ef.classkey"});
  for (const bool allowed : {true, false}) {
    RedisOptions o;
    o.port = redis->port();
    if (!allowed) {
      o.username = "old";
      o.password = "pw";
    }
    auto c = RedisConnection::Connect(o);
    REQUIRE(c.ok());
    auto r = ProbeModule(**c, o);
    REQUIRE(r.ok());
    INFO("allowed " << allowed << ": " << r->reason);
    CHECK(r->usable());  // EF.SETBITS is usable either way
    CHECK(r->class_key == allowed);
  }
  // Out of memory (maxmemory reached, noeviction): the write command is refused
  // with OOM before its arity is checked, and still exists.
  Cmd(*conn, {"CONFIG", "SET", "maxmemory", "1"});
  REQUIRE(Cmd(*conn, {"EF.CLASSKEY"}).str.rfind("OOM", 0) == 0);
  RedisOptions o;
  o.port = redis->port();
  auto c = RedisConnection::Connect(o);
  REQUIRE(c.ok());
  auto r = ProbeModule(**c, o);
  REQUIRE(r.ok());
  CHECK(r->class_key);
  Cmd(*conn, {"CONFIG", "SET", "maxmemory", "0"});
}

TEST_CASE("a module-mode writer creates layout v4's keys with EF.CLASSKEY, else with the script",
          "[module][v4][write_mode]") {
  auto redis = ServerWithModule();
  auto admin = redis->Connect();
  Cmd(*admin, {"ACL", "SETUSER", "old", "on", ">pw", "~*", "+@all", "-ef.classkey"});
  FilterConfig f;
  f.items_per_bucket = 10;
  f.layout_version = 4;
  f.key_prefix = "cw:";
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  const int64_t today = Today();
  std::map<bool, std::map<std::string, std::string>> values;
  std::map<bool, int64_t> classkey_calls, script_calls;
  for (const bool native : {true, false}) {
    INFO("native " << native);
    Cmd(*admin, {"FLUSHALL"});
    Cmd(*admin, {"CONFIG", "RESETSTAT"});
    BitWriterOptions o;
    o.redis.port = redis->port();
    if (!native) {
      o.redis.username = "old";
      o.redis.password = "pw";
    }
    o.mode = WriteMode::kModule;
    o.layout = *layout;
    RedisBitWriter writer(o);
    for (const int64_t day : {today - kDay, today}) {  // history, then today's keys
      BitBatch batch;
      for (int u = 0; u < 20; ++u) {
        const std::string key = MakeKey(layout->prefix, "u" + std::to_string(u), day, kDay);
        batch.keys.push_back(ItemsKey(*layout, key,
                                      "d" + std::to_string(day) + "-" + std::to_string(u),
                                      1 + 3 * u, ExpireAt(day, kDay, layout->window_seconds)));
      }
      batch.size = batch.keys.size();
      WriteStats stats;
      Status st = writer.Write(batch, &stats);
      INFO(st.message());
      REQUIRE(st.ok());
    }
    const std::string stats = Cmd(*admin, {"INFO", "commandstats"}).str;
    INFO(stats);
    classkey_calls[native] = Calls(stats, "ef.classkey");
    script_calls[native] = Calls(stats, "eval") + Calls(stats, "evalsha");
    for (const auto& k : Cmd(*admin, {"KEYS", "cw:{*"}).elements)
      values[native][k.str] = Cmd(*admin, {"GET", k.str}).str;
  }
  // Each key of the two days created once, and the probe's call (an arity error).
  CHECK(classkey_calls[true] == 41);
  CHECK(classkey_calls[false] == 0);  // the probe's was refused (NOPERM): no call
  // The script's 40 creations (EVAL, then EVALSHA) are gone; the growth script's
  // calls (a stage started) are the same in both.
  CHECK(script_calls[false] - script_calls[true] == 40);
  CHECK(values[true].size() == 40);
  CHECK(values[true] == values[false]);  // the same keys, byte for byte
}

}  // namespace ef::test

namespace ef::test {

// Hidden (`ef_module_tests "[.measure]"`): Redis CPU per new key, the creation
// script (EVALSHA) against EF.CLASSKEY, on 20,000 users whose yesterday's key
// holds one of 50 values (classes 4-19, each holding a twelfth to a third of its
// bytes in items); 5
// alternations, each creating every user's key of today with one and then the
// other (`INFO cpu` deltas over a pipelined round of all 20,000, and INFO
// commandstats' usec_per_call). Quoted in redis-module/README.md and docs/DESIGN.md.
TEST_CASE("EF.CLASSKEY against the creation script: Redis CPU per new key", "[.measure]") {
  auto redis = ServerWithModule();
  auto conn = redis->Connect();
  const int64_t today = Today();
  const Layout l = V4Layout("cm:", 200, 8, 0);
  std::mt19937_64 rng(77);
  std::vector<std::string> history;
  for (int i = 0; i < 50; ++i) {
    const auto c = static_cast<uint32_t>(4 + rng() % 16);
    const auto design = static_cast<int>(SizeClassBytes(c) / 6);
    history.push_back(Filled(l.class_tables[c], static_cast<int>(c) + 1,
                             design / 2 + static_cast<int>(rng() % (1 + 3 * design / 2)), rng()));
  }
  constexpr int kUsers = 20000;
  std::vector<std::vector<std::string>> sets;
  for (int u = 0; u < kUsers; ++u)
    sets.push_back({"SET", MakeKey(l.prefix, "u" + std::to_string(u), today - kDay, kDay),
                    history[u % history.size()]});
  std::vector<RedisReply> replies;
  REQUIRE(conn->Commands(sets, &replies).ok());
  Cmd(*conn, CreateClassKeyArgs(l, "warm-up", today));  // the script cached
  const auto cpu_s = [&] {
    const std::string info = Cmd(*conn, {"INFO", "cpu"}).str;
    double total = 0;
    for (const char* field : {"used_cpu_sys:", "used_cpu_user:"})
      total += std::stod(info.substr(info.find(field) + std::string(field).size()));
    return total;
  };
  std::map<bool, std::vector<double>> us_per_key, usec_per_call;
  for (int round = 0; round < 5; ++round) {
    for (const bool native : {false, true}) {
      std::vector<std::vector<std::string>> calls, dels;
      for (int u = 0; u < kUsers; ++u) {
        const std::string user = "u" + std::to_string(u);
        std::vector<std::string> args =
            native ? NativeArgs(l, user, today) : CreateClassKeyArgs(l, user, today);
        if (!native) {  // EVALSHA of the cached script
          args[0] = "EVALSHA";
          args[1] = Sha1Hex(kCreateClassKeyScript);
        }
        calls.push_back(std::move(args));
        dels.push_back({"DEL", MakeKey(l.prefix, user, today, kDay)});
      }
      REQUIRE(conn->Commands(dels, &replies).ok());
      Cmd(*conn, {"CONFIG", "RESETSTAT"});
      const double before = cpu_s();
      REQUIRE(conn->Commands(calls, &replies).ok());
      const double after = cpu_s();
      REQUIRE(replies.size() == kUsers);
      CHECK(replies[kUsers - 1].type == RedisReply::Type::kString);
      us_per_key[native].push_back((after - before) * 1e6 / kUsers);
      const std::string stats = Cmd(*conn, {"INFO", "commandstats"}).str;
      const std::string name = native ? "cmdstat_ef.classkey:" : "cmdstat_evalsha:";
      const size_t at = stats.find("usec_per_call=", stats.find(name));
      usec_per_call[native].push_back(std::stod(stats.substr(at + 14)));
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "classkey-measure: Redis CPU per new key (INFO cpu, median of 5): script %.2f us, "
      "EF.CLASSKEY %.2f us (%.2fx); usec_per_call script %.2f, EF.CLASSKEY %.2f\n",
      median(us_per_key[false]), median(us_per_key[true]),
      median(us_per_key[true]) / median(us_per_key[false]), median(usec_per_call[false]),
      median(usec_per_call[true]));
  CHECK(median(us_per_key[true]) > 0);
}

}  // namespace ef::test
