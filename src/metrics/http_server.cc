#include "metrics/http_server.h"

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include <charconv>
#include <thread>

namespace ef {

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  ~Impl() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry, ReadinessFn readiness) {
  size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos)
    std::from_chars(listen.data() + colon + 1, listen.data() + listen.size(), port);
  if (colon == std::string::npos || port < 0 || port > 65535)
    return InvalidArgument("metrics.listen: expected host:port, got '" + listen + "'");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";

  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  auto& srv = s->impl_->server;
  srv.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus::TextSerializer().Serialize(registry->Collect()),
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
  int bound = port == 0 ? srv.bind_to_any_port(host.c_str()) : (srv.bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0)
    return InvalidArgument("metrics.listen " + listen + ": cannot listen (address in use or not local?)");
  s->port_ = bound;
  s->impl_->thread = std::thread([&srv] { srv.listen_after_bind(); });
  return s;
}

HttpServer::~HttpServer() = default;

}  // namespace ef
