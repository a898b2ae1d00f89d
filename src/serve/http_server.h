// serve's HTTP server: cpp-httplib's request parsing, routing and responses,
// on connections scheduled by an event loop of our own (epoll), so that
// thousands of open keep-alive connections cost no thread.
//
// Why not httplib's own scheduling: it serves one connection at a time per
// worker thread, and an idle keep-alive connection holds its worker until it
// closes or idles out. Eight pooled clients held all of serve's workers: a 9th
// request waited 5 s and /readyz timed out (issue 49). Why our own loop rather
// than another library: docs/PERFORMANCE.md "serve under connection pools"
// has the measurements.
//
// Threads: serve.threads request workers and one control thread all wait on
// one epoll set holding the listening socket (whoever wakes accepts) and every
// open connection (one-shot), read a connection
// that became readable and answer its request in place once it is whole
// (ConnectionStream::Pending): one wake-up per request, as a thread blocked in
// recv had. epoll wakes the thread that waited last (LIFO), so the control
// thread, which waits the longest, is woken only while every request worker
// is busy: it answers GET and HEAD requests of the control paths
// (set_control_paths: serve's /healthz, /readyz, /metrics) itself, so that
// health checks never wait behind requests, and queues the others for the next
// free request worker. A sweeper thread closes idle connections and answers
// overdue requests (408).
//
// Who holds a connection (the state to follow, in one place; HttpServer::Loop
// in http_server.cc keeps it, under its mutex):
//   - kWaiting: in the table and armed in epoll (one-shot); nobody reads its
//     socket. Either idle (nothing buffered: the sweeper closes it after the
//     keep-alive timeout) or with part of a request buffered (the sweeper
//     answers it 408 once the read timeout has passed since its first byte).
//   - kRunning: taken by one thread (the one epoll woke, or the sweeper); only
//     that thread touches its stream, or the request worker it queued it for.
//     It is not armed, so no event comes for it, and nobody else closes it.
//   Transitions: accepted -> kWaiting. kWaiting -> kRunning when a thread takes
//   it after its event (Take: an event for a connection closed or taken
//   meanwhile finds no kWaiting entry and is dropped) or the sweeper finds it
//   overdue. kRunning -> kWaiting (armed again) when its thread has read what
//   was there and answered every whole request, and it may be reused; else that
//   thread closes it. Epoll data is the connection's number, never a pointer,
//   so a late event cannot reach a freed connection.
//
// The read timeout (set_read_timeout, httplib's default 5 s) bounds a whole
// request from its first byte (ConnectionStream's contract). A head over
// ConnectionStream's limits is answered 431, one not whole in time 408, a
// Content-Length over the payload limit (set_payload_max_length) 413 from the
// head, each with "Connection: close" before the connection is closed; the error handler
// (given an unparsed Request, method and path empty) sets their body and the
// logger sees them, as for httplib's own errors. The keep-alive timeout
// (set_keep_alive_timeout) closes an idle connection; the keep-alive max count
// answers the last request of a connection with "Connection: close".
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/connection_stream.h"

namespace ef::serve {

class HttpServer : public httplib::Server {
 public:
  HttpServer();
  ~HttpServer() override;
  // The base's setters (which hide them): HttpServer calls these for the
  // requests it refuses itself. The error handler sees 408, not httplib's 400,
  // for a request whose body did not arrive by its deadline, and an error
  // response on a connection that ends after it carries "Connection: close".
  HttpServer& set_error_handler(HandlerWithResponse handler);
  HttpServer& set_logger(httplib::Logger logger);
  // Workers that run requests (default 8). Before ListenInBackground.
  HttpServer& set_worker_threads(int n);
  // Paths whose GET and HEAD requests the control thread answers (see above).
  // Before ListenInBackground.
  HttpServer& set_control_paths(std::vector<std::string> paths);
  // After bind_to_port / bind_to_any_port: starts the threads, which accept
  // on the bound socket (httplib's listen loop is not used), and returns.
  void ListenInBackground();
  // Stops accepting (then closes the listening socket), closes idle connections at once, lets
  // requests being received or served finish (each answered with "Connection: close"; a request not
  // whole by its deadline 408), then joins every thread. Idempotent; no-op if it never started.
  void StopListening();
  // Connections open now (accepted, not closed yet).
  size_t OpenConnections() const;

  struct Loop;  // http_server.cc

 private:
  // Serves the requests buffered on `strm` whose first arrived at `start`
  // (the worker's part): false when the connection must end.
  bool ServeRequests(ConnectionStream& strm, std::chrono::steady_clock::time_point start,
                     size_t* requests_left, bool last);
  // Answers `status` (408, 413, 431) to a request httplib has not parsed.
  void Refuse(ConnectionStream& strm, int status);

  HandlerWithResponse error_handler_fn_;  // as given to set_error_handler
  httplib::Logger logger_fn_;             // as given to set_logger
  int worker_threads_ = 8;
  std::vector<std::string> control_paths_;
  std::unique_ptr<Loop> loop_;
};

}  // namespace ef::serve
