#include "metrics/http_server.h"

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "metrics/process_metrics.h"
#include "net/listen_address.h"

namespace ef {

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
  ~Impl() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry,
    ReadinessFn readiness, const std::string& option) {
  auto address = net::ParseListen(option, listen);
  if (!address.ok()) return address.status();
  const std::string& host = address->host;
  const int port = address->port;

  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  auto& srv = s->impl_->server;
  srv.set_socket_options(net::SetListenSocketOptions);
  srv.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    std::vector<prometheus::MetricFamily> families = registry->Collect();
    AppendProcessFamilies(&families);
    res.set_content(prometheus::TextSerializer().Serialize(families),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  srv.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  srv.Get("/readyz", [readiness](const httplib::Request&, httplib::Response& res) {
    Readiness r = readiness ? readiness() : Readiness{};
    res.status = r.ready ? 200 : 503;
    res.set_content(r.ready ? "ready\n" : "not ready: " + r.reason + "\n", "text/plain");
  });
  int bound = port == 0 ? srv.bind_to_any_port(host.c_str())
                        : (srv.bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0) return InvalidArgument(option + " " + listen + ": " + net::ListenError(*address));
  s->port_ = bound;
  Impl* impl = s->impl_.get();
  impl->thread = std::thread([impl] {
    impl->server.listen_after_bind();
    impl->listen_returned = true;
  });
  // httplib's stop() does nothing until the listen loop runs: a server
  // destroyed before then would wait for that loop forever.
  while (!srv.is_running() && !impl->listen_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

HttpServer::~HttpServer() = default;

}  // namespace ef
