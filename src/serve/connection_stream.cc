#include "serve/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace ef::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How long one blocking recv waits before the caller looks at its deadline and
// at `stopping` again (httplib's keep-alive wait polls every 10 ms as well).
constexpr std::chrono::microseconds kReceiveSlice{10'000};

timeval ToTimeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(d.count() % 1'000'000);
  return tv;
}

// The numeric address and port of the socket's peer (`peer`) or its own end.
void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  ip.clear();
  port = 0;
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) ip = text;
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) != nullptr) ip = text;
    port = ntohs(in6->sin6_port);
  }
}

// The stream of the connection this worker thread serves (CloseAfterResponse).
thread_local ConnectionStream* t_current = nullptr;

}  // namespace

void ConnectionStream::CloseAfterResponse() {
  if (t_current != nullptr) t_current->close_after_ = true;
}

ConnectionStream::ConnectionStream(int fd, std::chrono::microseconds read_timeout,
                                   std::chrono::microseconds write_timeout)
    : fd_(fd), read_timeout_(read_timeout), in_(new char[kReadBuffer]) {
  const timeval slice = ToTimeval(kReceiveSlice);
  const timeval send = ToTimeval(std::max(write_timeout, std::chrono::microseconds(1)));
  const int one = 1;
  // These fail only on a socket that is closed or not TCP, where recv and send
  // fail too and end the connection.
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send, sizeof send);
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

ConnectionStream::~ConnectionStream() = default;

ConnectionStream::Fill ConnectionStream::FillUntil(Clock::time_point deadline,
                                                   const std::function<bool()>* stopping) {
  if (in_begin_ > 0) {  // only a partial head is ever left unread here
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  for (;;) {
    const ssize_t n = recv(fd_, in_.get() + in_end_, kReadBuffer - in_end_, 0);
    if (n > 0) {
      in_end_ += static_cast<size_t>(n);
      return Fill::kData;
    }
    if (n == 0) return Fill::kEnd;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Fill::kError;
    if (stopping != nullptr && (*stopping)()) return Fill::kTimeout;
    if (Clock::now() >= deadline) return Fill::kTimeout;
  }
}

bool ConnectionStream::AwaitRequest(std::chrono::microseconds keep_alive,
                                    const std::function<bool()>& stopping) {
  in_request_ = false;
  if (stopping() || !Flush()) return false;
  if (in_begin_ < in_end_) return true;  // pipelined: already here
  return FillUntil(Clock::now() + keep_alive, &stopping) == Fill::kData;
}

ConnectionStream::Head ConnectionStream::BeginRequest() {
  in_request_ = true;
  timed_out_ = false;
  deadline_ = Clock::now() + read_timeout_;
  size_t searched = 0;  // head bytes already searched for the blank line
  for (;;) {
    const std::string_view head(in_.get() + in_begin_,
                                std::min(in_end_ - in_begin_, kMaxHeadBytes));
    const size_t blank = head.find("\r\n\r\n", searched < 3 ? 0 : searched - 3);
    if (blank != std::string_view::npos) {
      // Lines before the blank one: the request line, then the fields.
      const auto lines = std::count(head.begin(), head.begin() + blank + 2, '\n');
      return static_cast<size_t>(lines) > kMaxHeaderFields + 1 ? Head::kTooLarge : Head::kComplete;
    }
    if (head.size() == kMaxHeadBytes) return Head::kTooLarge;
    searched = head.size();
    const Fill got = FillUntil(deadline_, nullptr);
    if (got == Fill::kData) continue;
    read_failed_ = true;
    timed_out_ = got == Fill::kTimeout;
    return got == Fill::kTimeout ? Head::kTimeout : got == Fill::kEnd ? Head::kEnd : Head::kError;
  }
}

bool ConnectionStream::SendAll(const char* data, size_t size) {
  if (failed_) return false;
  iovec iov[2] = {{out_.data(), out_.size()}, {const_cast<char*>(data), size}};
  size_t first = 0;
  while (first < 2 && iov[first].iov_len == 0) ++first;
  while (first < 2) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = 2 - first;
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // error, or no progress within the send timeout (EAGAIN)
      failed_ = true;
      out_.clear();
      return false;
    }
    size_t sent = static_cast<size_t>(n);
    while (first < 2 && sent >= iov[first].iov_len) sent -= iov[first++].iov_len;
    if (first < 2) {
      ++partial_sends_;
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + sent;
      iov[first].iov_len -= sent;
    }
  }
  out_.clear();
  return true;
}

bool ConnectionStream::Flush() { return out_.empty() ? !failed_ : SendAll(nullptr, 0); }

bool ConnectionStream::is_readable() const {
  if (in_begin_ < in_end_) return true;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

bool ConnectionStream::is_writable() const { return !failed_; }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (in_begin_ == in_end_) {
    // The peer may wait for what we wrote (100 Continue).
    const Clock::time_point deadline = in_request_ ? deadline_ : Clock::now() + read_timeout_;
    const Fill got = Flush() ? FillUntil(deadline, nullptr) : Fill::kError;
    if (got != Fill::kData) {
      read_failed_ = true;
      timed_out_ = timed_out_ || (in_request_ && got == Fill::kTimeout);
      return got == Fill::kEnd ? 0 : -1;
    }
  }
  const size_t n = std::min(size, in_end_ - in_begin_);
  std::memcpy(ptr, in_.get() + in_begin_, n);
  in_begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (failed_) return -1;
  if (out_.size() + size <= kWriteBuffer) {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  return SendAll(ptr, size) ? static_cast<ssize_t>(size) : -1;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  if (remote_port_ < 0) AddressOf(fd_, true, remote_ip_, remote_port_);
  ip = remote_ip_;
  port = remote_port_;
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  if (local_port_ < 0) AddressOf(fd_, false, local_ip_, local_port_);
  ip = local_ip_;
  port = local_port_;
}

HttpServer::HttpServer() {
  httplib::Server::set_error_handler(
      HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (t_current != nullptr && !t_current->Reusable()) {
          // httplib answers 400 to a body that stopped coming: it was its deadline.
          if (res.status == 400 && t_current->TimedOut()) res.status = 408;
          // Ended after this answer (httplib still adds its Keep-Alive header).
          if (!res.has_header("Connection")) res.set_header("Connection", "close");
        }
        return error_handler_fn_ ? error_handler_fn_(req, res) : HandlerResponse::Unhandled;
      }));
}

HttpServer& HttpServer::set_error_handler(HandlerWithResponse handler) {
  error_handler_fn_ = std::move(handler);
  return *this;
}

HttpServer& HttpServer::set_logger(httplib::Logger logger) {
  logger_fn_ = logger;
  httplib::Server::set_logger(std::move(logger));
  return *this;
}

void HttpServer::Refuse(ConnectionStream& strm, int status) {
  httplib::Request req;  // not parsed: method and path empty
  strm.get_remote_ip_and_port(req.remote_addr, req.remote_port);
  strm.get_local_ip_and_port(req.local_addr, req.local_port);
  httplib::Response res;
  res.version = "HTTP/1.1";
  res.status = status;
  if (error_handler_fn_) error_handler_fn_(req, res);
  res.status = status;
  if (!res.has_header("Connection")) res.set_header("Connection", "close");
  if (!res.body.empty() && !res.has_header("Content-Type"))
    res.set_header("Content-Type", "text/plain");
  if (!res.has_header("Content-Length"))
    res.set_header("Content-Length", std::to_string(res.body.size()));
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " +
                    (status == 408 ? "Request Timeout" : "Request Header Fields Too Large") +
                    "\r\n";
  for (const auto& [name, value] : res.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  out += res.body;
  strm.write(out.data(), out.size());
  if (logger_fn_) logger_fn_(req, res);
}

void HttpServer::ListenInBackground() {
  listener_ = std::thread([this] {
    listen_after_bind();
    listen_returned_ = true;
  });
  while (!is_running() && !listen_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::StopListening() {
  if (!listener_.joinable()) return;
  stop();
  listener_.join();
}

bool HttpServer::process_and_close_socket(int sock) {
  // Closed however this ends (a handler or the logger may throw).
  struct Closer {
    int fd;
    ~Closer() {
      shutdown(fd, SHUT_RDWR);
      close(fd);
    }
  } closer{sock};
  ConnectionStream strm(
      sock, std::chrono::seconds(read_timeout_sec_) + std::chrono::microseconds(read_timeout_usec_),
      std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_));
  struct Current {  // ConnectionStream::CloseAfterResponse's target
    explicit Current(ConnectionStream* s) { t_current = s; }
    ~Current() { t_current = nullptr; }
  } current(&strm);
  const std::function<bool()> stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  const std::chrono::microseconds keep_alive = std::chrono::seconds(keep_alive_timeout_sec_);
  // As httplib's own loop: at most keep_alive_max_count_ requests, the last one
  // answered with "Connection: close"; and none after a broken request.
  bool ret = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!strm.AwaitRequest(keep_alive, stopping)) break;
    const ConnectionStream::Head head = strm.BeginRequest();
    if (head == ConnectionStream::Head::kTooLarge || head == ConnectionStream::Head::kTimeout) {
      Refuse(strm, head == ConnectionStream::Head::kTimeout ? 408 : 431);
      break;
    }
    // After an end of stream, httplib parses what came (400 if it is not whole).
    if (head == ConnectionStream::Head::kError) break;
    bool connection_closed = false;
    ret = process_request(strm, left == 1, connection_closed, nullptr);
    if (!ret || connection_closed || !strm.Reusable()) break;
  }
  strm.Flush();  // the last response, when the loop ended after it
  return ret;
}

}  // namespace ef::serve
