// YAML → Config. Every key is checked: unknown keys, wrong types and out-of-range
// values fail with one line naming the key and the YAML line, e.g.
//   "config/x.yaml:12: filter.fpr: must be in (0, 1), got 1.5"
// Overrides ("key=value", as from --set) are applied after the file and named
// "--set filter.fpr" in errors. Environment secrets applied last:
//   EXPOSURE_FILTER_REDIS_PASSWORD, EXPOSURE_FILTER_REDIS_USERNAME,
//   EXPOSURE_FILTER_KAFKA_SASL_PASSWORD (-> kafka.properties["sasl.password"]).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef {

// path "" = defaults only (plus overrides and environment).
StatusOr<Config> LoadConfig(const std::string& path, const std::vector<std::string>& overrides);

// Same from an in-memory YAML document; `origin` names it in errors.
StatusOr<Config> LoadConfigFromString(const std::string& yaml, const std::string& origin,
                                      const std::vector<std::string>& overrides);

// Cross-field checks (bucket divides a day or is whole days, window >= bucket,
// sizing gives m < 2^32, ...). Called by the loaders.
Status Validate(const Config& config);

// The effective config as YAML, secrets (passwords, sasl.password, any property
// whose name contains "password" or "secret") replaced by "***".
std::string DumpConfig(const Config& config);

}  // namespace ef
