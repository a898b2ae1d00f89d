// serve's HTTP connections (serve/connection_stream.h): an HttpServer with test
// routes on a loopback port, driven by raw sockets, so that each test controls
// exactly which bytes arrive when (pipelining, 100-continue, split and stalled
// requests, clients that vanish) and reads the bytes the server sent.
#include "serve/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

namespace ef::serve {
namespace {

using namespace std::chrono_literals;

// A byte pattern that shows misplaced or lost bytes.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);
  return s;
}

class TestServer {
 public:
  explicit TestServer(void (*configure)(HttpServer&) = nullptr) {
    http_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    http_.Get("/big", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(Pattern(std::stoul(req.get_param_value("n"))), "text/plain");
    });
    http_.Get("/addr", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.remote_addr + ":" + std::to_string(req.remote_port) + " " +
                          req.local_addr + ":" + std::to_string(req.local_port),
                      "text/plain");
    });
    http_.set_keep_alive_max_count(1000);  // as serve (httplib's default is 5)
    if (configure != nullptr) configure(http_);
    port_ = http_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~TestServer() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  HttpServer http_;
  int port_ = -1;
  std::thread thread_;
};

// One raw client connection.
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const timeval tv{10, 0};  // a test that would hang fails instead
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Conn() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      off += static_cast<size_t>(n);
    }
  }
  // The local "ip:port" of this end.
  std::string LocalAddress() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
  }

  struct Response {
    std::string head;  // status line and headers, without the blank line
    std::string body;
    int status = -1;
  };
  // The next response (Content-Length framed); status -1 if the connection
  // ended or timed out first.
  Response Read() {
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!More()) return r;
    }
    r.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r.status = std::stoi(r.head.substr(9, 3));
    size_t length = 0;
    const size_t at = r.head.find("Content-Length: ");
    if (at != std::string::npos) length = std::stoul(r.head.substr(at + 16));
    while (buf_.size() < length) {
      if (!More()) {
        r.status = -1;
        return r;
      }
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }
  // True when the server closed the connection (end of stream, nothing more).
  bool ServerClosed() {
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 && buf_.empty();
  }

 private:
  bool More() {
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
};

std::string PostEcho(const std::string& body, const std::string& extra_headers = "") {
  return "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_CASE("HttpServer: keep-alive requests, pipelined requests and addresses", "[serve-http]") {
  TestServer server;
  Conn c(server.port());
  for (int i = 0; i < 50; ++i) {
    const std::string body = Pattern(static_cast<size_t>(i * 97));
    c.Send(PostEcho(body));
    Conn::Response r = c.Read();
    REQUIRE(r.status == 200);
    CHECK(r.body == body);
  }
  // Three requests in one send: three answers, in order.
  c.Send(PostEcho("one") + PostEcho("two") + "GET /big?n=5 HTTP/1.1\r\nHost: t\r\n\r\n");
  CHECK(c.Read().body == "one");
  CHECK(c.Read().body == "two");
  CHECK(c.Read().body == Pattern(5));
  c.Send("GET /addr HTTP/1.1\r\nHost: t\r\n\r\n");
  Conn::Response a = c.Read();
  CHECK(a.body == c.LocalAddress() + " 127.0.0.1:" + std::to_string(server.port()));
}

TEST_CASE("HttpServer: bodies larger than the buffers, both ways", "[serve-http]") {
  TestServer server([](HttpServer& h) { h.set_payload_max_length(8u << 20); });
  Conn c(server.port());
  for (size_t n :
       {ConnectionStream::kReadBuffer - 1, ConnectionStream::kReadBuffer + 1, size_t{3} << 20}) {
    const std::string body = Pattern(n);
    c.Send(PostEcho(body));
    Conn::Response r = c.Read();
    REQUIRE(r.status == 200);
    CHECK(r.body.size() == n);
    CHECK(r.body == body);
  }
  // A response that cannot fit the socket buffers: partial sends resume.
  c.Send("GET /big?n=" + std::to_string(size_t{5} << 20) + " HTTP/1.1\r\nHost: t\r\n\r\n");
  Conn::Response big = c.Read();
  REQUIRE(big.status == 200);
  CHECK(big.body == Pattern(size_t{5} << 20));
}

TEST_CASE("HttpServer: Expect 100-continue is answered before the body is read", "[serve-http]") {
  // Held back, the 100 would deadlock the client until the read timeout.
  TestServer server([](HttpServer& h) { h.set_read_timeout(30, 0); });
  Conn c(server.port());
  const std::string body = Pattern(1000);
  const std::string request = PostEcho(body, "Expect: 100-continue\r\n");
  c.Send(request.substr(0, request.size() - body.size()));
  Conn::Response cont = c.Read();
  REQUIRE(cont.status == 100);
  c.Send(body);
  Conn::Response r = c.Read();
  REQUIRE(r.status == 200);
  CHECK(r.body == body);
}

TEST_CASE("HttpServer: a request in pieces is assembled, a stalled one times out", "[serve-http]") {
  TestServer server([](HttpServer& h) {
    h.set_read_timeout(0, 300'000);
    h.set_keep_alive_timeout(1);
  });
  Conn c(server.port());
  const std::string request = PostEcho(Pattern(5000));
  // Pieces: inside the request line, inside a header, inside the body. The
  // pauses shape the arrival (the server reads between pieces); nothing waits
  // on them.
  const size_t cuts[] = {7, 40, request.size() - 1000, request.size()};
  size_t from = 0;
  for (size_t cut : cuts) {
    c.Send(request.substr(from, cut - from));
    from = cut;
    std::this_thread::sleep_for(20ms);
  }
  Conn::Response r = c.Read();
  REQUIRE(r.status == 200);
  CHECK(r.body == Pattern(5000));

  // Half a body, then nothing: the read times out (300 ms) and the server ends
  // the connection instead of holding its worker.
  Conn stalled(server.port());
  stalled.Send(request.substr(0, request.size() - 100));
  Conn::Response s = stalled.Read();
  if (s.status != -1) CHECK(s.status == 400);  // httplib may answer before closing
  CHECK(stalled.ServerClosed());
  // Other connections are still served.
  Conn d(server.port());
  d.Send(PostEcho("still here"));
  CHECK(d.Read().body == "still here");
}

TEST_CASE("HttpServer: the keep-alive count closes the connection after its last answer",
          "[serve-http]") {
  TestServer server([](HttpServer& h) { h.set_keep_alive_max_count(3); });
  Conn c(server.port());
  for (int i = 0; i < 3; ++i) {
    c.Send(PostEcho(std::to_string(i)));
    Conn::Response r = c.Read();
    REQUIRE(r.status == 200);
    CHECK(r.body == std::to_string(i));
    CHECK((r.head.find("Connection: close") != std::string::npos) == (i == 2));
  }
  CHECK(c.ServerClosed());
  // "Connection: close" from the client: answered, then closed.
  Conn d(server.port());
  d.Send(PostEcho("bye", "Connection: close\r\n"));
  CHECK(d.Read().body == "bye");
  CHECK(d.ServerClosed());
}

TEST_CASE("HttpServer: clients that vanish mid-request or mid-response", "[serve-http]") {
  TestServer server([](HttpServer& h) { h.set_payload_max_length(8u << 20); });
  {
    Conn gone(server.port());
    gone.Send(PostEcho(Pattern(10'000)).substr(0, 5000));
  }
  for (int i = 0; i < 4; ++i) {
    // A response bigger than the socket buffers to a client that closed: the
    // failed send ends that connection, and the server goes on.
    Conn gone(server.port());
    gone.Send("GET /big?n=" + std::to_string(size_t{8} << 20) + " HTTP/1.1\r\nHost: t\r\n\r\n");
  }
  Conn c(server.port());
  c.Send(PostEcho("alive"));
  Conn::Response r = c.Read();
  REQUIRE(r.status == 200);
  CHECK(r.body == "alive");
}

TEST_CASE("HttpServer: Stop ends idle keep-alive connections without waiting their timeout",
          "[serve-http]") {
  TestServer server([](HttpServer& h) { h.set_keep_alive_timeout(60); });
  Conn a(server.port()), b(server.port());
  a.Send(PostEcho("a"));
  b.Send(PostEcho("b"));
  REQUIRE(a.Read().body == "a");
  REQUIRE(b.Read().body == "b");
  const auto start = std::chrono::steady_clock::now();
  server.Stop();
  // Bound far below the 60 s keep-alive (the check runs every 10 ms).
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(a.ServerClosed());
  CHECK(b.ServerClosed());
}

}  // namespace
}  // namespace ef::serve
