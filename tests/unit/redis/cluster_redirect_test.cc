// Redis Cluster redirects and node addresses (src/redis/cluster.h), as Redis
// prints them: `MOVED <slot> <endpoint>:<port>`, `ASK ...`; the endpoint is an
// IPv4 address, an IPv6 address without brackets, a host name, or empty.
#include <catch2/catch.hpp>
#include <string>

#include "redis/cluster.h"

namespace ef {
namespace {

TEST_CASE("ParseRedirect: MOVED and ASK with IPv4, IPv6, host name and empty endpoints",
          "[cluster]") {
  struct Case {
    const char* text;
    Redirect::Kind kind;
    int slot;
    const char* host;
    int port;
  };
  const Case cases[] = {
      {"MOVED 3999 127.0.0.1:6381", Redirect::Kind::kMoved, 3999, "127.0.0.1", 6381},
      {"ASK 3999 127.0.0.1:6381", Redirect::Kind::kAsk, 3999, "127.0.0.1", 6381},
      {"MOVED 0 10.1.2.3:1", Redirect::Kind::kMoved, 0, "10.1.2.3", 1},
      {"MOVED 16383 10.1.2.3:65535", Redirect::Kind::kMoved, 16383, "10.1.2.3", 65535},
      // IPv6 as Redis prints it (no brackets; the last ':' ends the address).
      {"MOVED 12182 ::1:7002", Redirect::Kind::kMoved, 12182, "::1", 7002},
      {"ASK 5 2001:db8::7:30001", Redirect::Kind::kAsk, 5, "2001:db8::7", 30001},
      {"MOVED 12182 [::1]:7002", Redirect::Kind::kMoved, 12182, "::1", 7002},
      {"MOVED 7 redis-2.cache.example.com:6379", Redirect::Kind::kMoved, 7,
       "redis-2.cache.example.com", 6379},
      // cluster-preferred-endpoint-type unknown-endpoint: same host, this port.
      {"MOVED 3999 :6380", Redirect::Kind::kMoved, 3999, "", 6380},
      {"ASK 1 :6380", Redirect::Kind::kAsk, 1, "", 6380},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::optional<Redirect> r = ParseRedirect(c.text);
    REQUIRE(r.has_value());
    CHECK(r->kind == c.kind);
    CHECK(r->slot == c.slot);
    CHECK(r->address.host == c.host);
    CHECK(r->address.port == c.port);
  }
}

TEST_CASE("ParseRedirect: rejects other errors and garbage", "[cluster]") {
  for (const char* text : {
           "",
           "MOVED",
           "MOVED ",
           "MOVED 3999",
           "MOVED 3999 ",
           "MOVED 3999 127.0.0.1",        // no port
           "MOVED 3999 127.0.0.1:",       // empty port
           "MOVED 3999 127.0.0.1:0",      // port 0
           "MOVED 3999 127.0.0.1:65536",  // port too large
           "MOVED 3999 127.0.0.1:63x1",   // port not a number
           "MOVED 3999 127.0.0.1:-1",
           "MOVED 16384 127.0.0.1:6381",  // slot out of range
           "MOVED 99999999999 127.0.0.1:6381",
           "MOVED -1 127.0.0.1:6381",
           "MOVED x 127.0.0.1:6381",
           "MOVED  3999 127.0.0.1:6381",  // two spaces
           "MOVED 3999 127.0.0.1:6381 extra",
           "MOVED 3999 127.0.0.1:6381\r\n",
           "MOVED 3999 [::1:6381",
           "MOVED 3999 []:6381",
           "moved 3999 127.0.0.1:6381",  // Redis prints upper case
           "MOVEDX 3999 127.0.0.1:6381",
           "ASKING",
           "ASK 3999",
           "CLUSTERDOWN The cluster is down",
           "TRYAGAIN Multiple keys request during rehashing of slot",
           "ERR MOVED 3999 127.0.0.1:6381",
           "CROSSSLOT Keys in request don't hash to the same slot",
       }) {
    INFO("'" << text << "'");
    CHECK_FALSE(ParseRedirect(text).has_value());
  }
}

TEST_CASE("ParseNodeAddress / ParseSeedList: host:port lists, IPv6, clear errors", "[cluster]") {
  auto a = ParseNodeAddress("127.0.0.1:7000");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 7000);
  CHECK(a->ToString() == "127.0.0.1:7000");
  auto v6 = ParseNodeAddress("[::1]:7000");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->ToString() == "[::1]:7000");
  CHECK(ParseNodeAddress(v6->ToString())->host == "::1");
  for (const char* bad :
       {"", ":7000", "host", "host:", "host:0", "host:70000", "a b:1", "[::1]", "[::1]7000"}) {
    INFO(bad);
    const auto r = ParseNodeAddress(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("'" + std::string(bad) + "'"));
  }

  auto seeds = ParseSeedList("10.0.0.1:6379, 10.0.0.2:6380 ,[fe80::1]:6381");
  REQUIRE(seeds.ok());
  REQUIRE(seeds->size() == 3);
  CHECK((*seeds)[0] == NodeAddress{"10.0.0.1", 6379});
  CHECK((*seeds)[1] == NodeAddress{"10.0.0.2", 6380});
  CHECK((*seeds)[2] == NodeAddress{"fe80::1", 6381});
  auto one = ParseSeedList("redis:6379");
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  for (const char* bad : {"", "a:1,", ",a:1", "a:1,,b:2", "a:1,b"}) {
    INFO(bad);
    const auto r = ParseSeedList(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("seed list"));
  }
}

}  // namespace
}  // namespace ef
