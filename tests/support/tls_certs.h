// Certificates for Redis over TLS, made by the openssl command line in a test's
// scratch directory: a CA, a server certificate it signs (for localhost and
// 127.0.0.1), a client certificate it signs (mutual TLS), and a second CA that
// signed none of them (the wrong CA). EC P-256 keys, valid for 2 days.
#pragma once

#include <string>

#include "redis/options.h"
#include "support/temp_dir.h"

namespace ef::test {

struct TlsCerts {
  std::string ca;           // PEM: the CA that signed the server and client certificates
  std::string server_cert;  // DNS:localhost, IP:127.0.0.1; serverAuth and clientAuth
  std::string server_key;
  std::string client_cert;  // CN=ef-client; clientAuth
  std::string client_key;
  std::string other_ca;  // a CA that signed nothing here
};

// Makes them in `dir` (files ca.pem, server.pem, ...); throws if openssl fails.
TlsCerts MakeTlsCerts(const TempDir& dir);

// The client side: trusts certs.ca; with the client certificate if `client_cert`.
TlsOptions ClientTls(const TlsCerts& certs, bool client_cert = true);

}  // namespace ef::test
