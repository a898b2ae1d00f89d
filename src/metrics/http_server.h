// The daemon's HTTP endpoints (cpp-httplib, its own thread):
//   GET /metrics  Prometheus text format 0.0.4 of the registry and the process_*
//                 metrics (metrics/process_metrics.h)
//   GET /healthz  200 "ok" while the process runs
//   GET /readyz   200 with "ready" or 503 with the reason, from the readiness callback
// Everything else is 404. Stopped and joined by the destructor.
#pragma once

#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace ef {

struct Readiness {
  bool ready = true;
  std::string reason;  // one line per problem when not ready
};

class HttpServer {
 public:
  using ReadinessFn = std::function<Readiness()>;
  // listen "host:port" (port 0 = any free port). Errors name `option` (the
  // setting the address came from) and why, e.g. "metrics.listen 127.0.0.1:9100:
  // address already in use" (another process holds it: no SO_REUSEPORT,
  // net/listen_address.h).
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                     std::shared_ptr<prometheus::Registry> registry,
                                                     ReadinessFn readiness,
                                                     const std::string& option = "metrics.listen");
  ~HttpServer();
  int port() const { return port_; }

  struct Impl;

 private:
  HttpServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace ef
