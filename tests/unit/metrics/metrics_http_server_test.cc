// The daemon's metrics listener (metrics/http_server.h) on loopback ports:
// a busy address is refused with a one-line error, a just-closed one is not.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/http_server.h"
#include "support/loopback.h"
#include "support/proc_net.h"

namespace ef {
namespace {

std::unique_ptr<HttpServer> StartOn(const std::string& listen) {
  auto s = HttpServer::Start(listen, std::make_shared<prometheus::Registry>(), nullptr);
  INFO(s.status().message());
  REQUIRE(s.ok());
  return std::move(s.value());
}

// Sockets in TIME_WAIT with local port `port` (/proc/net/tcp).
int TimeWaitSockets(int port) {
  int n = 0;
  for (const test::ProcTcpSocket& s : test::ProcNetTcp())
    n += s.local_port == port && s.state == "06";
  return n;
}

// Issue 26, item 8: httplib's listeners set SO_REUSEPORT, so a second daemon on
// the same metrics.listen started silently and scrapes alternated between them.
TEST_CASE("metrics listener: a busy address is refused naming it and a just-closed one is reused",
          "[metrics-http]") {
  auto first = StartOn("127.0.0.1:0");
  const int port = first->port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto second = HttpServer::Start(address, std::make_shared<prometheus::Registry>(), nullptr);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message() == "metrics.listen " + address + ": address already in use");

  // The server ends a connection first (Connection: close, the client reads to
  // the end of stream before closing), which leaves the server's end in
  // TIME_WAIT: a restart on the same port still binds (SO_REUSEADDR).
  {
    const int fd = test::ConnectLoopback(port);
    REQUIRE(fd >= 0);
    const std::string get = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    REQUIRE(send(fd, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size()));
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
      reply.append(buf, static_cast<size_t>(n));
    close(fd);
    CHECK(reply.rfind("HTTP/1.1 200", 0) == 0);
  }
  REQUIRE(TimeWaitSockets(port) >= 1);
  first.reset();
  auto again = StartOn(address);
  CHECK(again->port() == port);
}

// httplib's stop() does nothing before the listen loop runs: a server destroyed
// right after Start (a `run` that fails its Redis check at once) waited for
// that loop forever. Seen hanging in the test above.
TEST_CASE("metrics listener: a server destroyed right after Start stops", "[metrics-http]") {
  for (int i = 0; i < 50; ++i) StartOn("127.0.0.1:0").reset();
}

}  // namespace
}  // namespace ef
