// Helpers of the module tests: redis-servers that load the module built by this
// build (EF_REDIS_MODULE_PATH), packed positions, commands that must not fail.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis/connection.h"
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

}  // namespace ef::test
