// serve's HTTP connections: cpp-httplib parses, routes and writes each request;
// this file owns the bytes on the socket (serve/http_server.h decides when a
// connection's bytes are read and by which thread).
//
// Why: httplib's own SocketStream polls before every read and twice before every
// write (writable, then "still alive"), reads in 4 KiB pieces, sends a
// response's headers and body in two sends and asks the kernel for both
// addresses on every request: ~17 system calls for one POST /v1/filter of 1,000
// candidates (strace). ConnectionStream makes that 2-3: one recv that usually
// holds the whole request, one sendmsg for the whole response. The protocol
// handling stays httplib's (Server::process_request is its extension point, as
// SSLServer uses it); the Debian package ships httplib compiled, so its buffer
// sizes and polling cannot be configured away.
//
// Contract of ConnectionStream (one accepted, blocking TCP socket; used by one
// thread at a time: HttpServer's event loop while the connection waits for a
// request, a worker while it serves one):
//   - ReceiveNow() is the event loop's read: one recv that does not wait, into
//     the input buffer. Pending() says whether what is buffered is a request
//     the worker can serve without waiting for more bytes: its head whole (or
//     over the limits: refused 431), and its body whole when it has a
//     Content-Length within the body limit (the buffer grows to hold it), no
//     "Expect: 100-continue" (the client waits for our 100 before sending it)
//     and no Transfer-Encoding (refused by serve).
//   - The input buffer is allocated when bytes arrive and released by
//     ReleaseIdleBuffer() when nothing is buffered (HttpServer: after a second
//     idle): an idle connection holds no buffer (thousands of them are cheap).
//   - BeginRequest(start) starts a request whose first byte arrived at `start`:
//     its deadline is the read timeout after it. It reads until the head is
//     buffered (it usually already is), at most kMaxHeadBytes bytes with at most
//     kMaxHeaderFields fields of at most kMaxLineBytes each, else kTooLarge
//     (httplib kept every field of an endless head), and a Content-Length
//     within the body limit, else kBodyTooLarge (httplib would read the body
//     it refuses, to skip it).
//   - read() returns buffered bytes, else flushes pending output, then waits
//     for more: > 0 bytes, 0 at the peer's end of stream, -1 on timeout or
//     error (httplib's SocketStream contract). Within a request it waits no
//     later than the request's deadline: head and body must arrive whole
//     within it, however the bytes trickle in. Outside a request, up to the
//     read timeout.
//   - write() takes every byte or fails (-1); bytes may be held until the next
//     read(), Flush() or until 64 KiB are pending, and a write that does not fit
//     goes out with the pending bytes in one sendmsg. A send that makes no
//     progress within the write timeout fails, and every later write fails.
//   - Nothing written is lost on a clean path: HttpServer flushes after each
//     request and before closing.
//   - Not for streamed responses: output a content provider writes is held
//     like any other until the response ends or 64 KiB are pending (serve sends
//     whole bodies).
//   - The connection is not reused (HttpServer ends it after the response) once
//     a read met the end of stream, a timeout or an error in the middle of a
//     request (httplib would answer 400 and read the rest as a next request), a
//     send failed, or a handler called CloseAfterResponse().
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ef::serve {

class ConnectionStream final : public httplib::Stream {
 public:
  // Sets the socket's receive timeout to a short slice (a worker's read looks
  // at its request's deadline between slices), its send timeout to
  // `write_timeout`, and TCP_NODELAY.
  ConnectionStream(int fd, std::chrono::microseconds read_timeout,
                   std::chrono::microseconds write_timeout);
  ~ConnectionStream() override;

  enum class Receive {
    kData,   // bytes were added to the buffer
    kAgain,  // none there now
    kEnd,    // the peer's end of stream
    kError,  // the socket failed
  };
  // One recv that does not wait (the event loop's read; see the contract).
  Receive ReceiveNow();
  enum class Request {
    kNone,     // nothing buffered
    kPartial,  // part of a request: wait for more bytes
    kReady,    // serve it now (whole, or refused from its head, or its body is read while served)
  };
  // What the buffered bytes are, for a body limit of `max_body` bytes; grows the
  // buffer to hold a whole request with a Content-Length body within it.
  Request Pending(size_t max_body);
  // The buffered bytes (what the event loop looks at to route a request).
  std::string_view Buffered() const {
    return std::string_view(in_.get() + in_begin_, in_end_ - in_begin_);
  }
  // Frees the input buffer if nothing is buffered (an idle connection).
  void ReleaseIdleBuffer();

  enum class Head {
    kComplete,      // the head is buffered, within the limits
    kTooLarge,      // more than kMaxHeadBytes or kMaxHeaderFields, or a field over kMaxLineBytes
    kBodyTooLarge,  // a Content-Length over the body limit
    kTimeout,       // not whole by the request's deadline
    kEnd,           // the peer's end of stream first (what came is buffered)
    kError,         // the socket failed
  };
  // Starts a request whose first byte arrived at `start`: its deadline is the
  // read timeout after it. Then reads until its head is buffered (usually
  // already is) and checks it against the limits, the body's against
  // `max_body` bytes. Ends the previous request.
  Head BeginRequest(std::chrono::steady_clock::time_point start, size_t max_body);
  // Ends the current request: reads outside a request wait up to the read timeout.
  void EndRequest() { in_request_ = false; }
  // Whether a read of the current request ended at its deadline.
  bool TimedOut() const { return timed_out_; }
  // Sends every pending byte; false if the socket failed or timed out.
  bool Flush();
  // sendmsg calls that returned with bytes left to send (the socket's buffer full
  // at the write timeout), which SendAll continued; for tests.
  uint64_t PartialSends() const { return partial_sends_; }
  // Whether another request may follow on this connection (see the contract).
  bool Reusable() const { return !failed_ && !read_failed_ && !close_after_; }
  // Called from a handler (on the worker thread serving the request): end the
  // connection after this response, e.g. when the request's body is left
  // unread. No effect outside an HttpServer connection.
  static void CloseAfterResponse();
  // The stream the calling worker thread serves (null outside one), for
  // CloseAfterResponse and HttpServer's error handler.
  static ConnectionStream* Current();
  // Makes `s` the calling thread's Current() until the returned guard ends.
  struct Serving {
    explicit Serving(ConnectionStream* s);
    ~Serving();
    Serving(const Serving&) = delete;
    Serving& operator=(const Serving&) = delete;
  };

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

  // The input buffer's size (it grows for a whole request with a larger body),
  // and bytes held at most before a send.
  static constexpr size_t kReadBuffer = 64 * 1024;
  static constexpr size_t kWriteBuffer = 64 * 1024;
  // A request's head: bytes from the request line to the blank line included,
  // and header fields (lines between them). Common servers allow 8-16 KiB and
  // about 100 fields; serve's clients send a handful.
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr size_t kMaxHeaderFields = 100;
  // A header field's line: cpp-httplib answers 400 to a longer one
  // (CPPHTTPLIB_HEADER_MAX_LENGTH); it is a 431 here.
  static constexpr size_t kMaxLineBytes = 8192;

 private:
  enum class Fill { kData, kEnd, kTimeout, kError };
  // One recv after the unread bytes (moved to the front of the buffer, which
  // gets room), retried on the receive slice until `deadline`.
  Fill FillUntil(std::chrono::steady_clock::time_point deadline);
  // Moves the unread bytes to the front of a buffer of at least `capacity`
  // bytes (allocated or grown as needed).
  void Reserve(size_t capacity);
  // Sends out_ then [data, data + size) with as few sendmsg calls as the
  // socket allows.
  bool SendAll(const char* data, size_t size);

  const int fd_;
  const std::chrono::microseconds read_timeout_;
  std::unique_ptr<char[]> in_;        // null while idle (ReleaseIdleBuffer)
  size_t in_capacity_ = 0;            // in_'s size
  size_t in_begin_ = 0, in_end_ = 0;  // unread bytes: in_[in_begin_, in_end_)
  std::string out_;                   // written, not yet sent
  bool failed_ = false;               // a send failed: the connection is done
  bool read_failed_ = false;          // a read returned <= 0
  bool close_after_ = false;          // CloseAfterResponse()
  bool in_request_ = false;           // from BeginRequest() to EndRequest()
  bool timed_out_ = false;            // a read of this request met its deadline
  uint64_t partial_sends_ = 0;        // PartialSends()
  // The current request's deadline (while in_request_).
  std::chrono::steady_clock::time_point deadline_{};
  // Both ends' addresses, asked once per connection (httplib asks per request).
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -1, local_port_ = -1;
};

}  // namespace ef::serve
