// serve's HTTP connections: cpp-httplib parses, routes and writes each request;
// this file owns the bytes on the socket.
//
// Why: httplib's own SocketStream polls before every read and twice before every
// write (writable, then "still alive"), reads in 4 KiB pieces, sends a
// response's headers and body in two sends and asks the kernel for both
// addresses on every request: ~17 system calls for one POST /v1/filter of 1,000
// candidates (strace). ConnectionStream makes that 2-3: one blocking recv that
// usually holds the whole request, one sendmsg for the whole response. The
// protocol handling stays httplib's (Server::process_request is its extension
// point, as SSLServer uses it); the Debian package ships httplib compiled, so
// its buffer sizes and polling cannot be configured away.
//
// Contract of ConnectionStream (one accepted, blocking TCP socket; used by one
// thread at a time, as httplib's worker serves one connection):
//   - BeginRequest() starts a request's clock and reads until the request's
//     head (request line, header fields, blank line) is buffered, before httplib
//     parses it: at most kMaxHeadBytes bytes with at most kMaxHeaderFields
//     fields, else kTooLarge (httplib kept every field of an endless head).
//   - read() returns buffered bytes, else flushes pending output, then waits
//     for more: > 0 bytes, 0 at the peer's end of stream, -1 on timeout or
//     error (httplib's SocketStream contract). Within a request it waits no
//     later than the request's deadline, the read timeout after
//     BeginRequest(): head and body must arrive whole within it, however the
//     bytes trickle in (the timeout used to restart on every read, so a client
//     sending a byte every few seconds held its worker without end). Outside a
//     request, up to the read timeout.
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
//
// HttpServer answers a head that is too large 431 and one that is not whole by
// the deadline 408, then closes; a body not whole by the deadline is httplib's
// 400, made 408 for the error handler and the client.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace ef::serve {

class ConnectionStream final : public httplib::Stream {
 public:
  // Sets the socket's receive timeout to a short slice (to notice `stopping` in
  // AwaitRequest), its send timeout to `write_timeout`, and TCP_NODELAY.
  ConnectionStream(int fd, std::chrono::microseconds read_timeout,
                   std::chrono::microseconds write_timeout);
  ~ConnectionStream() override;

  // Waits (after flushing) for the first bytes of the next request: true when
  // some are buffered; false when the peer closed, nothing came within
  // `keep_alive`, `stopping()` turned true (checked at least every 10 ms) or the
  // socket failed. Ends the previous request (its deadline no longer applies).
  bool AwaitRequest(std::chrono::microseconds keep_alive, const std::function<bool()>& stopping);

  enum class Head {
    kComplete,  // the head is buffered, within the limits
    kTooLarge,  // more than kMaxHeadBytes or kMaxHeaderFields
    kTimeout,   // not whole by the request's deadline
    kEnd,       // the peer's end of stream first (what came is buffered)
    kError,     // the socket failed
  };
  // Starts a request: its deadline is the read timeout from now. Then reads
  // until its head is buffered (usually already is, from AwaitRequest).
  Head BeginRequest();
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

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

  // Bytes buffered at most (read side) and held at most before a send.
  static constexpr size_t kReadBuffer = 64 * 1024;
  static constexpr size_t kWriteBuffer = 64 * 1024;
  // A request's head: bytes from the request line to the blank line included,
  // and header fields (lines between them). Common servers allow 8-16 KiB and
  // about 100 fields; serve's clients send a handful.
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr size_t kMaxHeaderFields = 100;

 private:
  enum class Fill { kData, kEnd, kTimeout, kError };
  // One recv after the unread bytes (moved to the front of the buffer, which
  // must have room), retried on the receive slice until `deadline` (or
  // `stopping`, when given).
  Fill FillUntil(std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>* stopping);
  // Sends out_ then [data, data + size) with as few sendmsg calls as the
  // socket allows.
  bool SendAll(const char* data, size_t size);

  const int fd_;
  const std::chrono::microseconds read_timeout_;
  std::unique_ptr<char[]> in_;
  size_t in_begin_ = 0, in_end_ = 0;  // unread bytes: in_[in_begin_, in_end_)
  std::string out_;                   // written, not yet sent
  bool failed_ = false;               // a send failed: the connection is done
  bool read_failed_ = false;          // a read returned <= 0
  bool close_after_ = false;          // CloseAfterResponse()
  bool in_request_ = false;           // from BeginRequest() to the next AwaitRequest()
  bool timed_out_ = false;            // a read of this request met its deadline
  uint64_t partial_sends_ = 0;        // PartialSends()
  // The current request's deadline (while in_request_).
  std::chrono::steady_clock::time_point deadline_{};
  // Both ends' addresses, asked once per connection (httplib asks per request).
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -1, local_port_ = -1;
};

// httplib::Server whose connections use ConnectionStream. Same routes, handlers,
// limits, keep-alive rules (max count, idle timeout) and Stop() as the base;
// an idle connection ends within 10 ms of Stop(), one mid-request when that
// request is answered or its deadline passes. The logger runs before the
// response leaves the buffer.
//
// The read timeout (set_read_timeout, httplib's default 5 s) bounds a whole
// request from its first byte (ConnectionStream's contract). A head over
// ConnectionStream's limits is answered 431, one not whole in time 408, both
// with "Connection: close" before the connection is closed; the error handler
// (given an unparsed Request, method and path empty) sets their body and the
// logger sees them, as for httplib's own errors.
class HttpServer : public httplib::Server {
 public:
  HttpServer();
  ~HttpServer() override { StopListening(); }
  // The base's setters (which hide them): HttpServer calls these for the
  // requests it refuses itself. The error handler sees 408, not httplib's 400,
  // for a request whose body did not arrive by its deadline, and an error
  // response on a connection that ends after it carries "Connection: close".
  HttpServer& set_error_handler(HandlerWithResponse handler);
  HttpServer& set_logger(httplib::Logger logger);
  // After bind_to_port / bind_to_any_port: runs listen_after_bind() on a thread
  // of its own and returns once the listen loop runs (httplib's stop() does
  // nothing before it) or has already ended.
  void ListenInBackground();
  // stop(), then joins that thread. Idempotent; no-op if it never started.
  void StopListening();

 private:
  bool process_and_close_socket(int sock) override;
  // Answers `status` (408, 431) to a request httplib has not parsed.
  void Refuse(ConnectionStream& strm, int status);

  HandlerWithResponse error_handler_fn_;  // as given to set_error_handler
  httplib::Logger logger_fn_;             // as given to set_logger
  std::thread listener_;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace ef::serve
