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
//   - read() returns buffered bytes, else flushes pending output, then waits up
//     to the read timeout for more: > 0 bytes, 0 at the peer's end of stream,
//     -1 on timeout or error (httplib's SocketStream contract).
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

#include <atomic>
#include <chrono>
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
  // socket failed.
  bool AwaitRequest(std::chrono::microseconds keep_alive, const std::function<bool()>& stopping);
  // Sends every pending byte; false if the socket failed or timed out.
  bool Flush();
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

 private:
  enum class Fill { kData, kEnd, kTimeout, kError };
  // One recv into the empty read buffer, retried on the receive slice until
  // `deadline` (or `stopping`, when given).
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
  // Both ends' addresses, asked once per connection (httplib asks per request).
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -1, local_port_ = -1;
};

// httplib::Server whose connections use ConnectionStream. Same routes, handlers,
// limits, keep-alive rules (max count, idle timeout) and Stop() as the base;
// an idle connection ends within 10 ms of Stop(), one mid-request when that
// request is answered or its read times out. The logger runs before the
// response leaves the buffer.
class HttpServer : public httplib::Server {
 public:
  ~HttpServer() override { StopListening(); }
  // After bind_to_port / bind_to_any_port: runs listen_after_bind() on a thread
  // of its own and returns once the listen loop runs (httplib's stop() does
  // nothing before it) or has already ended.
  void ListenInBackground();
  // stop(), then joins that thread. Idempotent; no-op if it never started.
  void StopListening();

 private:
  bool process_and_close_socket(int sock) override;

  std::thread listener_;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace ef::serve
