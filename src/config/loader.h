// YAML → Config. Keys of a block (redis.tls.enabled) are written nested under
// their section (redis: tls: enabled:) or dotted in --set. Every key is checked: unknown keys,
// wrong types and out-of-range values fail with one line naming the key and the YAML line, e.g.
//   "config/x.yaml:12: filter.fpr: must be in (0, 1), got 1.5"
// Precedence, lowest first: the file, then the environment, then overrides
// ("key=value", as from --set or -b; named "--set filter.fpr" in errors). The
// environment variables (docs/CONFIG.md#environment) are EnvironmentVariables();
// EXPOSURE_FILTER_REDIS_PASSWORD, EXPOSURE_FILTER_KAFKA_SASL_PASSWORD (->
// kafka.properties["sasl.password"]), ... An empty one counts as unset.
// One rule is not checked here: that filter.* gives a usable Bloom filter size
// needs the layout arithmetic above this room (bloom/layout.h CheckFilterSizing;
// every command makes that check right after loading).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef {

// path "" = defaults only (plus overrides and environment).
StatusOr<Config> LoadConfig(const std::string& path, const std::vector<std::string>& overrides);

// Same from an in-memory YAML document; `origin` names it in errors.
StatusOr<Config> LoadConfigFromString(const std::string& yaml, const std::string& origin,
                                      const std::vector<std::string>& overrides);

// Sets one key (or "kafka.properties.<name>") from text exactly as --set does:
// the key's own parser and rule, e.g. filter.bucket must tile days. Errors name
// neither the key nor where the text came from; the caller prefixes them.
// Cross-field rules are not checked: call Validate after the last change.
Status ApplyConfigOverride(const std::string& key, std::string_view text, Config* config);

// One environment variable the loaders read and the key it sets.
struct EnvironmentVariable {
  const char* name;  // "EXPOSURE_FILTER_REDIS_PASSWORD"
  const char* key;   // "redis.password", or "kafka.properties.<name>"
};
std::span<const EnvironmentVariable> EnvironmentVariables();

// What is legal but almost surely a mistake, one line each (the commands log
// them as warnings after loading; nothing is refused):
// - an EXPOSURE_FILTER_* variable in `environment` (an environ-style array,
//   nullptr-terminated) that no loader reads, with a "did you mean";
// - a non-empty kafka.properties sasl.* entry while security.protocol is not
//   SASL_SSL or SASL_PLAINTEXT (librdkafka then connects without SASL).
std::vector<std::string> ConfigWarnings(const Config& config, char** environment);

// The keys whose values differ between a and b, in the order of the table
// (DumpConfig's); a changed kafka.properties entry is named
// "kafka.properties.<name>".
std::vector<std::string> ChangedKeys(const Config& a, const Config& b);

// Cross-field checks (bucket divides a day or is whole days, window >= bucket,
// sizing gives m < 2^32, ...). Called by the loaders.
Status Validate(const Config& config);

// The effective config as YAML, every non-empty secret replaced by "***":
// redis.password and the kafka.properties that librdkafka flags sensitive or
// whose name says they hold a secret (ssl.key.pem, sasl.password,
// sasl.oauthbearer.config, ...; the full rule is IsSecretKafkaProperty).
// Nothing else prints kafka.properties; code that logs one must mask it with
// IsSecretKafkaProperty.
std::string DumpConfig(const Config& config);

// True for a kafka.properties name whose value DumpConfig masks (any case).
// For anyone who logs a librdkafka property: mask these the same way.
bool IsSecretKafkaProperty(std::string_view name);

}  // namespace ef
