// RedisOptionsFromConfig: rediss:// entries and the redis.tls.* keys.
#include "redis/options.h"

#include <catch2/catch.hpp>

#include "redis/tls.h"

namespace ef {
namespace {

TEST_CASE("rediss:// entries turn TLS on and leave host:port seeds", "[redis][tls]") {
  RedisConfig c;
  c.address = "rediss://10.0.0.1:6380, 10.0.0.2:6380";
  c.tls_ca_file = "";  // the system's CAs
  auto o = RedisOptionsFromConfig(c);
  REQUIRE(o.ok());
  CHECK(o->tls.enabled);
  CHECK(o->host == "10.0.0.1");
  CHECK(o->port == 6380);
  const std::vector<std::string> seeds = {"10.0.0.1:6380", "10.0.0.2:6380"};
  CHECK(o->addresses == seeds);

  c.address = "127.0.0.1:6379";
  auto plain = RedisOptionsFromConfig(c);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->tls.enabled);
}

TEST_CASE("redis.tls keys reach the options and their files are checked", "[redis][tls]") {
  RedisConfig c;
  c.tls_enabled = true;
  c.tls_server_name = "redis.internal";
  c.tls_verify = false;
  auto o = RedisOptionsFromConfig(c);
  REQUIRE(o.ok());
  CHECK(o->tls.enabled);
  CHECK(o->tls.server_name == "redis.internal");
  CHECK_FALSE(o->tls.verify);

  c.tls_ca_file = "/nonexistent/ca.pem";
  auto missing = RedisOptionsFromConfig(c);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kInvalidArgument);
  CHECK(missing.status().message() ==
        "redis.tls.ca_file: cannot read '/nonexistent/ca.pem': No such file or directory");

  // With TLS off the files are not read.
  c.tls_enabled = false;
  CHECK(RedisOptionsFromConfig(c).ok());
}

}  // namespace
}  // namespace ef
