#include "redis/options.h"

#include <charconv>

#include "redis/tls.h"

namespace ef {

namespace {
constexpr std::string_view kTlsScheme = "rediss://";
}  // namespace

StatusOr<RedisOptions> RedisOptionsFromConfig(const RedisConfig& config) {
  RedisOptions o;
  bool rediss = false;
  for (size_t start = 0;;) {
    const size_t comma = config.address.find(',', start);
    std::string entry = config.address.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.erase(entry.begin());
    while (!entry.empty() && entry.back() == ' ') entry.pop_back();
    if (entry.compare(0, kTlsScheme.size(), kTlsScheme) == 0) {
      entry.erase(0, kTlsScheme.size());
      rediss = true;
    }
    o.addresses.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  o.cluster = config.cluster;
  const std::string& a = o.addresses.front();
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size())
    return InvalidArgument("redis.address: expected host:port, got '" + a + "'");
  o.host = a.substr(0, colon);
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']')
    o.host = o.host.substr(1, o.host.size() - 2);
  int port = 0;
  auto [p, ec] = std::from_chars(a.data() + colon + 1, a.data() + a.size(), port);
  if (ec != std::errc() || p != a.data() + a.size() || port < 1 || port > 65535)
    return InvalidArgument("redis.address: bad port in '" + a + "'");
  o.port = port;
  o.username = config.username;
  o.password = config.password;
  o.db = config.db;
  o.connect_timeout_ms = config.connect_timeout_ms;
  o.command_timeout_ms = config.command_timeout_ms;
  o.tls.enabled = config.tls_enabled || rediss;
  o.tls.ca_file = config.tls_ca_file;
  o.tls.ca_dir = config.tls_ca_dir;
  o.tls.cert_file = config.tls_cert_file;
  o.tls.key_file = config.tls_key_file;
  o.tls.server_name = config.tls_server_name;
  o.tls.verify = config.tls_verify;
  if (o.tls.enabled) EF_RETURN_IF_ERROR(CheckTlsFiles(o.tls));
  return o;
}

}  // namespace ef
