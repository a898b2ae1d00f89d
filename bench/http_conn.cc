#include "http_conn.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace bench {

namespace {

constexpr size_t kRecvChunk = 64 * 1024;

// The value of header `name` (case-insensitive) in `head` (status line and headers,
// CRLF-separated), or npos.
size_t FindHeader(std::string_view head, std::string_view name) {
  for (size_t p = head.find("\r\n"); p != std::string_view::npos; p = head.find("\r\n", p + 2)) {
    const size_t line = p + 2;
    if (head.size() - line > name.size() && head[line + name.size()] == ':' &&
        strncasecmp(head.data() + line, name.data(), name.size()) == 0) {
      size_t v = line + name.size() + 1;
      while (v < head.size() && head[v] == ' ') ++v;
      return v;
    }
  }
  return std::string_view::npos;
}

}  // namespace

namespace {

std::string Head(std::string_view method, std::string_view host_port, std::string_view path) {
  std::string r(method);
  r += ' ';
  r.append(path);
  r += " HTTP/1.1\r\nHost: ";
  r.append(host_port);
  r += "\r\n";
  return r;
}

}  // namespace

std::string HttpConn::Get(std::string_view host_port, std::string_view path) {
  return Head("GET", host_port, path) + "\r\n";
}

std::string HttpConn::Post(std::string_view host_port, std::string_view path,
                           std::string_view body) {
  std::string r =
      Head("POST", host_port, path) +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n";
  r.append(body);
  return r;
}

bool HttpConn::Connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(port_);
  if (int rc = getaddrinfo(host_.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error_ = host_ + ":" + port + ": " + gai_strerror(rc);
    return false;
  }
  error_ = host_ + ":" + port + ": no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      timeval tv{5, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      fd_ = fd;
      break;
    }
    error_ = host_ + ":" + port + ": connect: " + std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  used_ = 0;
  return fd_ >= 0;
}

void HttpConn::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  used_ = 0;
}

int HttpConn::Fail(std::string why) {
  error_ = std::move(why);
  Close();
  return -1;
}

int HttpConn::RoundTrip(std::string_view request, std::string* body) {
  if (fd_ < 0 && !Connect()) return -1;
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(std::string("send: ") + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  size_t head_end = std::string::npos;  // offset of the body
  size_t need = std::string::npos;      // head + body bytes
  int status = 0;
  bool close_after = false;  // "Connection: close": the next request connects again
  for (;;) {
    if (head_end == std::string::npos) {
      const size_t p = std::string_view(buf_.data(), used_).find("\r\n\r\n");
      if (p != std::string_view::npos) {
        head_end = p + 4;
        const std::string_view head(buf_.data(), p + 2);
        if (head.size() < 12 || head.compare(0, 5, "HTTP/") != 0)
          return Fail("response does not start with HTTP/");
        const size_t sp = head.find(' ');
        if (sp == std::string_view::npos ||
            std::from_chars(head.data() + sp + 1, head.data() + head.size(), status).ec !=
                std::errc())
          return Fail("bad status line");
        const size_t cl = FindHeader(head, "Content-Length");
        size_t len = 0;
        if (cl == std::string_view::npos ||
            std::from_chars(head.data() + cl, head.data() + head.size(), len).ec != std::errc())
          return Fail("response without Content-Length");
        need = head_end + len;
        const size_t conn = FindHeader(head, "Connection");
        close_after =
            conn != std::string_view::npos && strncasecmp(head.data() + conn, "close", 5) == 0;
      }
    }
    if (need != std::string::npos && used_ >= need) break;
    // Grown, never shrunk: steady state receives without allocating or zeroing.
    if (buf_.size() < used_ + kRecvChunk) buf_.resize(2 * (used_ + kRecvChunk));
    ssize_t n = recv(fd_, buf_.data() + used_, kRecvChunk, 0);
    if (n > 0) used_ += static_cast<size_t>(n);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Fail("connection closed by server");
    if (n < 0)
      return Fail(errno == EAGAIN || errno == EWOULDBLOCK
                      ? "timed out after 5 s"
                      : std::string("recv: ") + std::strerror(errno));
  }
  if (body) body->assign(buf_.data() + head_end, need - head_end);
  std::memmove(buf_.data(), buf_.data() + need, used_ - need);
  used_ -= need;
  if (close_after) Close();
  return status;
}

}  // namespace bench
