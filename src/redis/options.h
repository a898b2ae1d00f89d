// Connection options for one Redis server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef {

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
  // (redis.wait_replicas and redis.wait_timeout belong to the writer:
  // BitWriterOptionsFromConfig in write/bit_writer.h.)
};

// From redis.* config keys; errors name redis.address. host/port are those of
// the first entry of the list.
StatusOr<RedisOptions> RedisOptionsFromConfig(const RedisConfig& config);

}  // namespace ef
