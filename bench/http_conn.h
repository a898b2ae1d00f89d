// HttpConn: the read benchmark's load generator connection (bench/read_bench.cc).
// One keep-alive HTTP/1.1 connection over blocking TCP, one request in flight,
// responses framed by Content-Length (what `exposure-filter serve` sends; chunked
// responses are reported as errors). Lean on purpose, like wrk: a request is one
// send of pre-built bytes and a response usually one recv, so on a 2-core machine
// the load generator takes little of the CPU that serve and Redis share with it.
// Not thread-safe: one per load-generating thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bench {

class HttpConn {
 public:
  HttpConn(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~HttpConn() { Close(); }
  HttpConn(const HttpConn&) = delete;
  HttpConn& operator=(const HttpConn&) = delete;

  // A complete keep-alive request to `host_port` (its Host header): POST `path`
  // with a JSON `body`, or GET `path`.
  static std::string Post(std::string_view host_port, std::string_view path, std::string_view body);
  static std::string Get(std::string_view host_port, std::string_view path);

  // Sends `request` and reads one response (connecting first if needed, with
  // TCP_NODELAY and a 5 s receive timeout). Returns its status code, or -1 on a
  // connect, I/O, timeout or framing error, with the reason in error(); the
  // connection is then closed and the next call connects again. With `body`, the
  // response's body is copied there (else it is not copied at all).
  int RoundTrip(std::string_view request, std::string* body = nullptr);
  const std::string& error() const { return error_; }

 private:
  bool Connect();
  int Fail(std::string why);
  void Close();

  std::string host_;
  int port_;
  int fd_ = -1;
  std::string buf_;  // buf_[0, used_): received bytes not yet consumed
  size_t used_ = 0;
  std::string error_;
};

}  // namespace bench
