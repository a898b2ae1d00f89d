#include "serve/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>

namespace ef::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How long one blocking recv of a worker waits before it looks at its request's
// deadline again.
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

// Whether `line` (a header field line, without its CRLF) is the field `name`
// (lower case, with its colon): its value, trimmed, else nullopt.
std::optional<std::string_view> FieldValue(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return std::nullopt;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return std::nullopt;
  std::string_view v = line.substr(name.size());
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool ContainsNoCase(std::string_view text, std::string_view lower) {
  if (lower.size() > text.size()) return false;
  for (size_t i = 0; i + lower.size() <= text.size(); ++i) {
    size_t j = 0;
    while (j < lower.size() && std::tolower(static_cast<unsigned char>(text[i + j])) == lower[j])
      ++j;
    if (j == lower.size()) return true;
  }
  return false;
}

// What a head (request line to the last field's CRLF) says about its request.
struct HeadScan {
  // More than kMaxHeaderFields fields, or a field line over kMaxLineBytes.
  bool too_large = false;
  bool transfer_encoding = false;
  bool expect_continue = false;  // "Expect: 100-continue"
  bool bad_length = false;       // a Content-Length not a number, or two that differ
  std::optional<uint64_t> content_length;
};

HeadScan ScanHead(std::string_view head) {
  HeadScan scan;
  size_t fields = 0;
  for (size_t at = head.find("\r\n") + 2; at < head.size();) {
    const size_t eol = head.find("\r\n", at);
    const std::string_view line = head.substr(at, eol - at);
    at = eol + 2;
    if (++fields > ConnectionStream::kMaxHeaderFields ||
        line.size() > ConnectionStream::kMaxLineBytes)
      scan.too_large = true;
    if (FieldValue(line, "transfer-encoding:")) scan.transfer_encoding = true;
    if (auto v = FieldValue(line, "expect:"); v && ContainsNoCase(*v, "100-continue"))
      scan.expect_continue = true;
    if (auto v = FieldValue(line, "content-length:")) {
      uint64_t n = 0;
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec != std::errc() || end != v->data() + v->size() ||
          (scan.content_length && *scan.content_length != n))
        scan.bad_length = true;
      scan.content_length = n;
    }
  }
  return scan;
}

}  // namespace

void ConnectionStream::CloseAfterResponse() {
  if (t_current != nullptr) t_current->close_after_ = true;
}

ConnectionStream* ConnectionStream::Current() { return t_current; }

ConnectionStream::Serving::Serving(ConnectionStream* s) { t_current = s; }

ConnectionStream::Serving::~Serving() { t_current = nullptr; }

ConnectionStream::ConnectionStream(int fd, std::chrono::microseconds read_timeout,
                                   std::chrono::microseconds write_timeout)
    : fd_(fd), read_timeout_(read_timeout) {
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

void ConnectionStream::Reserve(size_t capacity) {
  const size_t unread = in_end_ - in_begin_;
  if (in_ != nullptr && capacity <= in_capacity_) {
    if (in_begin_ > 0) {
      std::memmove(in_.get(), in_.get() + in_begin_, unread);
      in_begin_ = 0;
      in_end_ = unread;
    }
    return;
  }
  std::unique_ptr<char[]> grown(new char[capacity]);
  if (unread > 0) std::memcpy(grown.get(), in_.get() + in_begin_, unread);
  in_ = std::move(grown);
  in_capacity_ = capacity;
  in_begin_ = 0;
  in_end_ = unread;
}

void ConnectionStream::ReleaseIdleBuffer() {
  if (in_begin_ != in_end_) return;
  in_.reset();
  in_capacity_ = in_begin_ = in_end_ = 0;
}

ConnectionStream::Receive ConnectionStream::ReceiveNow() {
  // Room for at least a buffer's worth; Pending() reserved room for a whole
  // request, so a full buffer holds a whole request (or a refused head) first.
  Reserve(std::max(kReadBuffer, in_capacity_));
  if (in_end_ == in_capacity_) Reserve(in_capacity_ + kReadBuffer);
  for (;;) {
    const ssize_t n = recv(fd_, in_.get() + in_end_, in_capacity_ - in_end_, MSG_DONTWAIT);
    if (n > 0) {
      in_end_ += static_cast<size_t>(n);
      return Receive::kData;
    }
    if (n == 0) return Receive::kEnd;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Receive::kAgain : Receive::kError;
  }
}

ConnectionStream::Request ConnectionStream::Pending(size_t max_body) {
  if (in_begin_ == in_end_) return Request::kNone;
  const std::string_view buffered = Buffered();
  const std::string_view head = buffered.substr(0, kMaxHeadBytes);
  const size_t blank = head.find("\r\n\r\n");
  if (blank == std::string_view::npos)
    return head.size() == kMaxHeadBytes ? Request::kReady : Request::kPartial;  // 431
  const HeadScan scan = ScanHead(head.substr(0, blank + 2));
  // Refused from the head (431, 411, 400), or a body after our 100 Continue.
  if (scan.too_large || scan.transfer_encoding || scan.expect_continue || scan.bad_length)
    return Request::kReady;
  const uint64_t body = scan.content_length.value_or(0);
  if (body > max_body) return Request::kReady;  // 413 from its head
  const size_t whole = blank + 4 + static_cast<size_t>(body);
  if (buffered.size() >= whole) return Request::kReady;
  Reserve(whole);
  return Request::kPartial;
}

ConnectionStream::Fill ConnectionStream::FillUntil(Clock::time_point deadline) {
  Reserve(std::max(kReadBuffer, in_capacity_));  // only a partial head is ever left unread here
  for (;;) {
    if (Clock::now() >= deadline) return Fill::kTimeout;
    const ssize_t n = recv(fd_, in_.get() + in_end_, in_capacity_ - in_end_, 0);
    if (n > 0) {
      in_end_ += static_cast<size_t>(n);
      return Fill::kData;
    }
    if (n == 0) return Fill::kEnd;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Fill::kError;
  }
}

ConnectionStream::Head ConnectionStream::BeginRequest(Clock::time_point start, size_t max_body) {
  in_request_ = true;
  timed_out_ = false;
  deadline_ = start + read_timeout_;
  size_t searched = 0;  // head bytes already searched for the blank line
  for (;;) {
    const std::string_view head = Buffered().substr(0, kMaxHeadBytes);
    const size_t blank = head.find("\r\n\r\n", searched < 3 ? 0 : searched - 3);
    if (blank != std::string_view::npos) {
      const HeadScan scan = ScanHead(head.substr(0, blank + 2));
      if (scan.too_large) return Head::kTooLarge;
      if (!scan.bad_length && scan.content_length.value_or(0) > max_body)
        return Head::kBodyTooLarge;
      return Head::kComplete;
    }
    if (head.size() == kMaxHeadBytes) return Head::kTooLarge;
    searched = head.size();
    const Fill got = FillUntil(deadline_);
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
    const Fill got = Flush() ? FillUntil(deadline) : Fill::kError;
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

}  // namespace ef::serve
