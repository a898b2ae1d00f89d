// Connection options for one Redis server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef {

// TLS under a connection (redis.tls.*, or rediss:// in redis.address). The
// files are read at every connect (redis/tls.h), so certificates rotated on
// disk are used from the next reconnect on.
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;    // PEM bundle of the CAs trusted; "" with ca_dir "" = the system's
  std::string ca_dir;     // a directory of hashed CA certificates (openssl rehash)
  std::string cert_file;  // mutual TLS: our certificate (chain), PEM; with key_file
  std::string key_file;   // its private key, PEM
  // SNI and the name the server's certificate must hold (DNS name, or IP
  // address for a literal address); "" = the host connected to.
  std::string server_name;
  bool verify = true;  // false: any certificate and name are accepted (encryption only)
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // "" = AUTH with password only (or none)
  std::string password;  // "" = no AUTH
  int db = 0;
  int64_t connect_timeout_ms = 2000;
  int64_t command_timeout_ms = 5000;  // read/write timeout of a command round trip
  // Where the two timeouts come from, for messages ("PING: no answer within
  // redis.command_timeout (5000 ms); waited 5.00 s"): the config keys, or e.g.
  // "what was left of the call's deadline" when a caller cut them short.
  std::string connect_timeout_name = "redis.connect_timeout";
  std::string command_timeout_name = "redis.command_timeout";
  // Every entry of redis.address ("host:port"; the first is host/port above):
  // Redis Cluster seed nodes when there are several.
  std::vector<std::string> addresses;
  std::string cluster = "auto";  // redis.cluster: auto | true | false
  TlsOptions tls;                // for every node (the cluster router copies the options)
  // (redis.wait_replicas and redis.wait_timeout belong to the writer:
  // BitWriterOptionsFromConfig in write/bit_writer.h.)
};

// From redis.* config keys; errors name redis.address. host/port are those of
// the first entry of the list; addresses hold "host:port" without a scheme. An
// entry written rediss://host:port turns TLS on (for every node). With TLS on,
// the CA, certificate and key files are loaded once here, so that a file that
// is missing or not PEM is a config error (kInvalidArgument naming the key)
// before anything connects.
StatusOr<RedisOptions> RedisOptionsFromConfig(const RedisConfig& config);

}  // namespace ef
