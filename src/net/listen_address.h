// The HTTP listeners' addresses: metrics.listen (metrics/http_server.h) and
// serve.listen (serve/server.h), both cpp-httplib servers.
//
// cpp-httplib's default socket options set SO_REUSEPORT: a second process then
// binds the same address without an error and the kernel splits the
// connections between the two (scrapes alternated between two daemons; two
// `serve` shared a port). The listeners set SO_REUSEADDR only: a busy address
// fails to bind, and a restart still binds while the old process's
// connections are in TIME_WAIT.
#pragma once

#include <string>

#include "common/status.h"

namespace ef::net {

struct ListenAddress {
  std::string host;  // as httplib takes it: "0.0.0.0" for an empty host, IPv6 without []
  int port = 0;      // 0 = any free port
};

// "host:port" (host may be empty or [v6]); errors name `key`, e.g.
// "serve.listen: expected host:port, got 'x'".
StatusOr<ListenAddress> ParseListen(const std::string& key, const std::string& listen);

// For httplib::Server::set_socket_options: SO_REUSEADDR, not SO_REUSEPORT.
void SetListenSocketOptions(int fd);

// Why `address` cannot be bound and listened on, as one lower-case phrase
// ("address already in use", "cannot assign requested address", a resolver
// error): httplib only says that it failed, so a socket with the listener's
// options tries again. "cannot listen" when that one succeeds.
std::string ListenError(const ListenAddress& address);

}  // namespace ef::net
