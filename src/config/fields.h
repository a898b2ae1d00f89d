// Internal to src/config: the one table of typed config fields that the YAML
// loader, --set overrides, the environment, Validate and DumpConfig all share
// (kvrocks style). Adding a key to Config means adding one row to the table in
// fields.cc, and then it is loadable, overridable, validated and dumped.
//
// Messages returned here carry neither the key nor the location (e.g.
// "must be in (0, 1), got 1.5"); the caller prefixes "<file>:<line>: <key>: ".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace ef::config_internal {

enum class FieldType {
  kString,      // any YAML scalar, as its text; null = ""
  kInt,         // decimal integer, optional sign
  kDouble,      // finite decimal or exponent number
  kBool,        // true/false (also yes/no, on/off), any case
  kDuration,    // ParseDurationMs text, e.g. "500ms", "10s", "30d"; a bare integer is seconds
  kStringList,  // YAML sequence of scalars; null = []
  kStringMap,   // YAML map of scalar -> scalar (values as their text); null = {}
};

using StringList = std::vector<std::string>;
using StringMap = std::map<std::string, std::string>;
// A field's value in transit. kDuration is int64_t milliseconds whatever the
// member stores (window and bucket are stored in seconds).
using Value = std::variant<std::string, int64_t, double, bool, StringList, StringMap>;

struct Field {
  std::string key;  // "filter.fpr": "<section>.<name>"
  FieldType type = FieldType::kString;
  std::function<Value(const Config&)> get;
  std::function<void(const Value&, Config*)> set;
  // Range / enum / format rule for a value of the right type.
  std::function<Status(const Value&)> check;
  bool secret = false;  // DumpConfig prints "***" unless empty
  // Map fields: entries whose name makes them secret (masked in the dump).
  std::function<bool(std::string_view)> secret_entry;
  // false for load-only aliases (kafka.topic): not dumped, not re-checked by Validate.
  bool canonical = true;

  std::string_view section() const { return std::string_view(key).substr(0, key.find('.')); }
  std::string_view name() const { return std::string_view(key).substr(key.find('.') + 1); }
};

// All fields, in the order of config.h (= dump order).
const std::vector<Field>& Fields();
// Section names in dump order: kafka, redis, filter, events, pipeline, metrics, serve, log.
const std::vector<std::string>& Sections();
// Exact key, or nullptr.
const Field* FindField(std::string_view key);
// "kafka.properties.fetch.wait.max.ms" -> the kStringMap field kafka.properties
// and *entry = "fetch.wait.max.ms"; nullptr if `key` names no entry of a map field.
const Field* FindMapEntry(std::string_view key, std::string* entry);
// The known key (or section) closest to `unknown` when the edit distance is small,
// or a key with the same name in another section; "" when nothing is close.
std::string SuggestKey(std::string_view unknown);
size_t EditDistance(std::string_view a, std::string_view b);
// The candidate nearest to `unknown` (edit distance), if it differs by 1..limit
// characters; "" otherwise. The first of equally near ones.
std::string Closest(std::string_view unknown, const std::vector<std::string>& candidates,
                    size_t limit);
// ASCII lower case.
std::string ToLower(std::string_view s);

// "'abc'", "nothing", "a list", "a map": how a node is named in messages.
std::string DescribeNode(const YAML::Node& node);
// Parses `node` as `type`. On error, *error_line (0-based, may stay -1) is set to
// the line of the offending sub-node when it is not `node` itself (list element,
// map entry).
StatusOr<Value> ParseNode(FieldType type, const YAML::Node& node, int* error_line);
// A value in the form the YAML loader accepts back (durations as "30d", doubles in
// their shortest exact form); lists and maps in flow style. For messages.
std::string FormatValue(FieldType type, const Value& value);

// Parse, check and store. Same error line rule as ParseNode.
Status SetFromNode(const Field& field, const YAML::Node& node, Config* config, int* error_line);
// An override value: kString fields (and map entries) take `text` verbatim, so
// secrets and prefixes like "ef:" need no YAML quoting; other types parse `text`
// as a YAML scalar or flow collection ("[a, b]", "{k: v}").
Status SetFromText(const Field& field, std::string_view text, Config* config);
// Sets one entry of a kStringMap field to `text` verbatim.
Status SetMapEntry(const Field& field, const std::string& entry, std::string_view text,
                   Config* config);

// Kafka property names whose values DumpConfig masks, compared in any case:
// every property librdkafka 2.0.2 flags sensitive (sasl.username,
// sasl.password, sasl.oauthbearer.config, ssl.ca.pem, ssl.key.location,
// ssl.key.password, ssl.key.pem, ssl.keystore.password, ssl_key), and any
// other name containing "password", "passwd", "passphrase", "secret", "token",
// "credential", "private", "key.pem" or "jaas" (sasl.oauthbearer.client.secret,
// sasl.jaas.config, ...). Public material stays visible: ssl.certificate.pem,
// *.location paths other than ssl.key.location, sasl.kerberos.keytab (a path),
// sasl.oauthbearer.client.id and sasl.oauthbearer.token.endpoint.url.
bool IsSecretPropertyName(std::string_view name);

}  // namespace ef::config_internal
