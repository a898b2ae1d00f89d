// YAML → Config. Keys of a block (redis.tls.enabled) are written nested under
// their section (redis: tls: enabled:) or dotted in --set. Every key is checked: unknown keys,
// wrong types and out-of-range values fail with one line naming the key and the YAML line, e.g.
//   "config/x.yaml:12: filter.fpr: must be in (0, 1), got 1.5"
// Overrides ("key=value", as from --set) are applied after the file and named
// "--set filter.fpr" in errors. Environment secrets applied last:
//   EXPOSURE_FILTER_REDIS_PASSWORD, EXPOSURE_FILTER_REDIS_USERNAME,
//   EXPOSURE_FILTER_KAFKA_SASL_PASSWORD (-> kafka.properties["sasl.password"]).
// One rule is not checked here: that filter.* gives a usable Bloom filter size
// needs the layout arithmetic above this room (bloom/layout.h CheckFilterSizing;
// every command makes that check right after loading).
#pragma once

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
