// `exposure-filter serve`: the HTTP read API (docs/HTTP.md) over an
// exposure_filter::Client, with cpp-httplib's request handling on serve's own
// event loop (serve/http_server.h: thousands of keep-alive connections on a
// fixed set of threads; the sockets' I/O is serve/connection_stream.h's):
//   POST /v1/filter, POST /v1/filter:batch, POST /v1/served   (request.h)
//   GET  /metrics   Prometheus text format (names exposure_filter_serve_*, and
//                   process_*: metrics/process_metrics.h)
//   GET  /healthz   200 while the process runs
//   GET  /readyz    200 when a Redis PING succeeds within serve.timeout, else 503
// Errors are JSON {"error": "..."}: 400 bad request, 404 unknown path, 405 wrong
// method (with Allow), 408 a request not whole within request_timeout of its
// first byte, 411 a chunked body (cpp-httplib 0.11 would read it whole, past
// the limit), 413 over serve.max_body_bytes / serve.max_items, 415 a
// multipart/form-data body, 431 a head over 100 fields or 16 KiB
// (serve/connection_stream.h), 503 Redis failed under serve.fail_closed (a
// failed mark of served items too). Under fail-open (default) a Redis failure is
// a 200 with every item unseen and "failed_open": true (a failed mark: the
// answer with "mark_failed": true; /v1/served: {"marked": 0, "failed_open":
// true}). A body is read whatever its Content-Type. mark_served's marks are
// written after the answer ("mark_queued": true; ServerOptions::mark_queue), a
// failure then only counted and logged.
//
// Threads: one event loop holds every open connection; serve.threads workers
// answer the requests that arrived whole, and one more answers /healthz,
// /readyz and /metrics, which so never wait behind requests. An idle
// keep-alive connection costs no thread and no buffer; it is closed after
// serve.idle_timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "serve/request.h"

namespace exposure_filter {
class Client;
}

namespace ef::serve {

struct ServerOptions {
  std::string listen = "127.0.0.1:8090";  // host:port; port 0 = any free port
  Limits limits;
  int threads = 8;  // workers answering requests (the connections are not bounded)
  // A keep-alive connection with no request for this long is closed
  // (serve.idle_timeout; whole seconds).
  std::chrono::milliseconds idle_timeout{75'000};
  std::chrono::milliseconds timeout{50};  // per-request Redis deadline
  // A request's headers and body must arrive within this of its first byte,
  // else 408 and the connection is closed (the HTTP read timeout; not a config
  // key).
  std::chrono::milliseconds request_timeout{5000};
  // serve.fail_closed. Decides readiness while Redis does not answer: a
  // fail-open serve stays ready (it answers every candidate unseen; /readyz 200
  // "ready, degraded: ..." and exposure_filter_serve_degraded 1), a fail-closed
  // one is not ready (503), so that it leaves a load balancer's rotation.
  bool fail_closed = false;
  // serve.mark_queue: requests' marks of served items queued, written after the
  // answer (serve/mark_writer.h); 0 = each request writes its marks before
  // answering. Not used under fail_closed, whose answer says the marks were
  // written (a failed mark is a 503).
  size_t mark_queue = 10000;
};

class Server {
 public:
  // Binds `options.listen` and starts serving on background threads. `client`
  // must outlive the Server; null = not connected to Redis yet (Redis did not
  // answer at start): every query is answered as if Redis failed (fail open:
  // every candidate unseen, "failed_open": true; fail closed: 503), /readyz as
  // for a Redis that does not answer, until SetClient. Errors name serve.listen and why, e.g.
  // "serve.listen 127.0.0.1:8090: address already in use" (another process
  // holds it: no SO_REUSEPORT, net/listen_address.h).
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                 exposure_filter::Client* client);
  // Stop() then destroy.
  ~Server();
  int port() const;
  // The client once Redis answered (after a Start with none). Once only; the
  // client must outlive the Server. Thread-safe.
  void SetClient(exposure_filter::Client* client);
  // Stops accepting connections, lets in-flight requests finish (an idle
  // keep-alive connection is closed within 10 ms), joins the threads. Idempotent.
  void Stop();

  struct Impl;

 private:
  Server() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef::serve
