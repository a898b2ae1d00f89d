// `exposure-filter serve` under connection pools (issue 49): recall services keep
// pools of keep-alive connections open. serve held one worker thread per open
// connection (cpp-httplib's scheduling), so with serve.threads idle pooled
// connections open, the next request waited for one of them to idle out (5 s)
// and /readyz timed out. Here 2,000 idle connections are open on a serve with 2
// workers, and every request, /readyz included, is answered within the 2 s the
// test's sockets wait.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "common/open_files.h"
#include "redis/meta.h"
#include "support/fault_stream.h"
#include "support/loopback.h"
#include "support/process.h"
#include "support/scrape.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

// One raw keep-alive client connection whose reads wait at most 2 s.
class Pooled {
 public:
  explicit Pooled(int port) : fd_(ConnectLoopback(port)) {
    if (fd_ < 0) return;
    const timeval two_s{2, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &two_s, sizeof two_s);
  }
  ~Pooled() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Sends `request` and reads one Content-Length framed response: its status,
  // -1 if none came whole within 2 s of each read.
  int RoundTrip(const std::string& request, std::string* body = nullptr) {
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size()))
      return -1;
    std::string got;
    char chunk[16384];
    size_t head_end;
    while ((head_end = got.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return -1;
      got.append(chunk, static_cast<size_t>(n));
    }
    size_t length = 0;
    const size_t at = got.find("Content-Length: ");
    if (at != std::string::npos && at < head_end) length = std::stoul(got.substr(at + 16));
    while (got.size() < head_end + 4 + length) {
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return -1;
      got.append(chunk, static_cast<size_t>(n));
    }
    if (body != nullptr) *body = got.substr(head_end + 4, length);
    return got.size() > 12 ? std::stoi(got.substr(9, 3)) : -1;
  }

 private:
  int fd_;
};

std::string Get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: serve\r\n\r\n";
}

std::string PostFilter(const std::string& user) {
  const std::string body = R"({"user_id": ")" + user + R"(", "items": ["a", "b", "c"]})";
  return "POST /v1/filter HTTP/1.1\r\nHost: serve\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_CASE(
    "serve: 2000 idle keep-alive connections on 2 workers and requests and /readyz are "
    "answered at once",
    "[integration][serve]") {
  constexpr int kIdle = 2000;
  REQUIRE(RaiseOpenFileLimit() >= kIdle + 500);

  Stack stack(1);
  const std::string config = stack.WriteConfig();
  auto conn = stack.redis().Connect();
  Layout effective;
  REQUIRE(EnsureMeta(*conn, DefaultTestLayout(), &effective).ok());  // as the daemon's first write
  const int port = FreePort();
  auto serve = StartServe(stack, config, port, {"serve.threads=2"}, "pool.log");
  INFO("serve output:\n" << serve->Output());

  // A pool fills up: each connection sends one request, then stays open, idle.
  std::vector<std::unique_ptr<Pooled>> pool;
  for (int i = 0; i < kIdle; ++i) {
    pool.push_back(std::make_unique<Pooled>(port));
    INFO("pooled connection " << i);
    REQUIRE(pool.back()->ok());
    REQUIRE(pool.back()->RoundTrip(PostFilter("u" + std::to_string(i))) == 200);
  }
  // With all of them idle: a new client, a health check, a scrape.
  Pooled fresh(port);
  std::string body;
  CHECK(fresh.RoundTrip(PostFilter("fresh"), &body) == 200);
  CHECK(body.find("\"unseen\"") != std::string::npos);
  Pooled probe(port);
  CHECK(probe.RoundTrip(Get("/readyz"), &body) == 200);
  CHECK(body == "ready\n");
  CHECK(probe.RoundTrip(Get("/metrics"), &body) == 200);
  CHECK(MetricSum(body, "exposure_filter_serve_open_connections") >= kIdle + 2);
  // The first pooled connections were idle the longest: still open, still served.
  for (int i = 0; i < 20; ++i) {
    INFO("pooled connection " << i << " again");
    CHECK(pool[i]->RoundTrip(PostFilter("again")) == 200);
  }
  pool.clear();
  CHECK(WaitFor(
      [&] { return MetricSum(ScrapeText(port), "exposure_filter_serve_open_connections") <= 3; },
      10s));
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

}  // namespace
}  // namespace ef::test
