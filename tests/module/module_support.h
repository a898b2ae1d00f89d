// Helpers of the module tests: redis-servers that load the module built by this
// build (EF_REDIS_MODULE_PATH), packed positions, commands that must not fail,
// the batches the write-mode tests write.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bloom/bit_batch.h"
#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "redis/connection.h"
#include "support/items_key.h"
#include "support/redis_server.h"

namespace ef::test {

inline const char* ModulePath() { return EF_REDIS_MODULE_PATH; }

// A redis-server started with `--loadmodule <our module>` plus `extra` args
// (and no 5 s wait before it sends a full sync to a new replica).
inline std::unique_ptr<RedisServer> ServerWithModule(std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--loadmodule", ModulePath(), "--repl-diskless-sync-delay", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<RedisServer>(std::move(args));
}

// Positions as EF.SETBITS takes them: packed little-endian uint32.
inline std::string Pack(const std::vector<uint32_t>& positions) {
  std::string out;
  for (uint32_t p : positions) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((p >> (8 * i)) & 0xff));
  }
  return out;
}

// One command; the test fails on a connection error.
inline RedisReply Cmd(RedisConnection& conn, const std::vector<std::string>& args) {
  auto r = conn.Command(args);
  INFO(args[0] << ": " << (r.ok() ? "" : r.status().message()));
  REQUIRE(r.ok());
  return r.value();
}

// The server's clock (TIME) in ms.
inline int64_t ServerNowMs(RedisConnection& conn) {
  RedisReply t = Cmd(conn, {"TIME"});
  REQUIRE(t.elements.size() == 2);
  return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
}

// The expiry of every key the batches below write: 30 days from the test's start.
inline const int64_t kExpireAt = static_cast<int64_t>(std::time(nullptr)) + 30 * 86400;

// One key of a batch: n items "<tag>-<i>", expiring at kExpireAt.
inline KeyBits ItemsKey(const Layout& l, const std::string& key, const std::string& tag, int n) {
  return ItemsKey(l, key, tag, n, kExpireAt);
}

// Batches over `users` users (keys "<prefix>{u<n>}:20400"): light users (1-2
// items), dense ones (users 2-5: 10-40 items), two heavy ones (users 0-1: 60-120
// items, which advance v2 stages); each batch is also written a second time (a
// redelivery).
inline std::vector<BitBatch> Batches(const Layout& l, uint32_t seed, int users = 12) {
  std::mt19937 rng(seed);
  std::vector<BitBatch> out;
  for (int b = 0; b < 6; ++b) {
    BitBatch batch;
    for (int u = 0; u < users; ++u) {
      if (rng() % 3 == 0 && u >= 2) continue;
      int n = 1 + static_cast<int>(rng() % 2);
      if (u < 2)
        n = 60 + static_cast<int>(rng() % 61);
      else if (u < 6)
        n = 10 + static_cast<int>(rng() % 31);
      const std::string key = l.prefix + "{u" + std::to_string(u) + "}:20400";
      batch.keys.push_back(ItemsKey(l, key, "b" + std::to_string(b) + "u" + std::to_string(u), n));
    }
    batch.size = batch.keys.size();
    out.push_back(batch);
    out.push_back(batch);
  }
  return out;
}

// Bytes as lower-case hex (readable in a failed CHECK).
inline std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace ef::test
