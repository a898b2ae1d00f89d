#include "config/loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "common/duration.h"
#include "common/printable.h"
#include "config/fields.h"

namespace ef {
namespace {

using config_internal::Field;
using config_internal::FieldType;
using config_internal::Value;

std::string At(const std::string& origin, int line0) {
  return line0 < 0 ? origin : origin + ":" + std::to_string(line0 + 1);
}

Status UnknownKey(std::string_view key) {
  std::string message = "unknown key '" + std::string(key) + "'";
  std::string suggestion = config_internal::SuggestKey(key);
  if (!suggestion.empty()) message += " (did you mean '" + suggestion + "'?)";
  return InvalidArgument(message);
}

// kafka.topic and kafka.topics in one file is almost surely a mistake: which one
// wins would depend on the order of the lines.
const char* ConflictingKey(std::string_view key) {
  if (key == "kafka.topic") return "kafka.topics";
  if (key == "kafka.topics") return "kafka.topic";
  return nullptr;
}

// True if some key starts with `prefix` + "." (redis.tls: redis.tls.enabled, ...).
bool HasSubKeys(const std::string& prefix) {
  for (const Field& f : config_internal::Fields()) {
    if (f.key.size() > prefix.size() + 1 && f.key.compare(0, prefix.size(), prefix) == 0 &&
        f.key[prefix.size()] == '.')
      return true;
  }
  return false;
}

Status ApplySection(const std::string& section, const YAML::Node& map, const std::string& origin,
                    Config* config) {
  std::map<std::string, int> seen;  // key -> 0-based line
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    const int key_line = key_node.Mark().line;
    if (!key_node.IsScalar()) {
      return InvalidArgument(At(origin, key_line) + ": " + section + ": expected a key name, got " +
                             config_internal::DescribeNode(key_node));
    }
    const std::string key = section + "." + key_node.Scalar();
    // A block of keys under the section (redis.tls.*): its keys are read as
    // those of a section named "redis.tls".
    if (value.IsMap() && HasSubKeys(key)) {
      if (auto first = seen.find(key); first != seen.end()) {
        return InvalidArgument(At(origin, key_line) + ": duplicate key '" + key +
                               "' (first at line " + std::to_string(first->second + 1) + ")");
      }
      seen[key] = key_line;
      EF_RETURN_IF_ERROR(ApplySection(key, value, origin, config));
      continue;
    }
    const Field* field = config_internal::FindField(key);
    if (field == nullptr) return UnknownKey(key).Prefixed(At(origin, key_line));
    if (auto first = seen.find(key); first != seen.end()) {
      return InvalidArgument(At(origin, key_line) + ": duplicate key '" + key +
                             "' (first at line " + std::to_string(first->second + 1) + ")");
    }
    if (const char* other = ConflictingKey(key); other != nullptr) {
      if (auto o = seen.find(other); o != seen.end()) {
        return InvalidArgument(At(origin, key_line) + ": " + key + ": conflicts with " + other +
                               " at line " + std::to_string(o->second + 1) + "; use one of them");
      }
    }
    seen[key] = key_line;

    // A null value has no mark of its own (yaml-cpp puts it on the next line).
    const int value_line = value.IsNull() ? key_line : value.Mark().line;
    int error_line = -1;
    Status st = config_internal::SetFromNode(*field, value, config, &error_line);
    if (!st.ok())
      return st.Prefixed(At(origin, error_line >= 0 ? error_line : value_line) + ": " + key);
  }
  return Status::Ok();
}

Status ApplyDocument(const YAML::Node& root, const std::string& origin, Config* config) {
  if (!root.IsDefined() || root.IsNull()) return Status::Ok();
  if (!root.IsMap()) {
    return InvalidArgument(At(origin, root.Mark().line) +
                           ": expected a map of sections (kafka, redis, filter, ...) at the top "
                           "level, got " +
                           config_internal::DescribeNode(root));
  }
  const auto& sections = config_internal::Sections();
  std::map<std::string, int> seen;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    const int key_line = key_node.Mark().line;
    if (!key_node.IsScalar()) {
      return InvalidArgument(At(origin, key_line) + ": expected a section name, got " +
                             config_internal::DescribeNode(key_node));
    }
    const std::string name = key_node.Scalar();
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      if (const Field* f = config_internal::FindField(name); f != nullptr) {
        return InvalidArgument(At(origin, key_line) + ": unknown key '" + name +
                               "': keys are nested, write '" + std::string(f->section()) +
                               ":' and under it '  " + std::string(f->name()) + ": ...'");
      }
      return UnknownKey(name).Prefixed(At(origin, key_line));
    }
    if (auto first = seen.find(name); first != seen.end()) {
      return InvalidArgument(At(origin, key_line) + ": duplicate key '" + name +
                             "' (first at line " + std::to_string(first->second + 1) + ")");
    }
    seen[name] = key_line;
    if (value.IsNull()) continue;  // "kafka:" with everything commented out
    if (!value.IsMap()) {
      return InvalidArgument(At(origin, value.Mark().line) + ": " + name +
                             ": expected a map of keys, got " +
                             config_internal::DescribeNode(value));
    }
    EF_RETURN_IF_ERROR(ApplySection(name, value, origin, config));
  }
  return Status::Ok();
}

// One key=value from --set or the environment; errors without a prefix.
Status ApplyKeyValue(const std::string& key, std::string_view value, Config* config) {
  if (const Field* field = config_internal::FindField(key); field != nullptr) {
    return config_internal::SetFromText(*field, value, config);
  }
  std::string entry;
  if (const Field* field = config_internal::FindMapEntry(key, &entry); field != nullptr) {
    return config_internal::SetMapEntry(*field, entry, value, config);
  }
  const auto& sections = config_internal::Sections();
  if (std::find(sections.begin(), sections.end(), key) != sections.end()) {
    return InvalidArgument("'" + key + "' is a section; set one of its keys, e.g. " + key +
                           ".<key>=<value>");
  }
  return UnknownKey(key);
}

Status ApplyOverrides(const std::vector<std::string>& overrides, Config* config) {
  for (const std::string& kv : overrides) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--set " + kv + ": expected key=value");
    }
    const std::string key = kv.substr(0, eq);
    EF_RETURN_IF_ERROR(
        ApplyKeyValue(key, std::string_view(kv).substr(eq + 1), config).Prefixed("--set " + key));
  }
  return Status::Ok();
}

constexpr EnvironmentVariable kEnvVars[] = {
    {"EXPOSURE_FILTER_KAFKA_BOOTSTRAP_SERVERS", "kafka.bootstrap_servers"},
    {"EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL", "kafka.properties.security.protocol"},
    {"EXPOSURE_FILTER_KAFKA_SASL_MECHANISM", "kafka.properties.sasl.mechanism"},
    {"EXPOSURE_FILTER_KAFKA_SASL_USERNAME", "kafka.properties.sasl.username"},
    {"EXPOSURE_FILTER_KAFKA_SASL_PASSWORD", "kafka.properties.sasl.password"},
    {"EXPOSURE_FILTER_REDIS_ADDRESS", "redis.address"},
    {"EXPOSURE_FILTER_REDIS_USERNAME", "redis.username"},
    {"EXPOSURE_FILTER_REDIS_PASSWORD", "redis.password"},
};

// Empty counts as unset: compose files and CI templates pass "" for unset host vars.
Status ApplyEnvironment(Config* config) {
  for (const EnvironmentVariable& var : kEnvVars) {
    const char* value = std::getenv(var.name);
    if (value == nullptr || *value == '\0') continue;
    EF_RETURN_IF_ERROR(
        ApplyKeyValue(var.key, value, config)
            .Prefixed("environment " + std::string(var.name) + " (" + var.key + ")"));
  }
  return Status::Ok();
}

Status Finish(const std::vector<std::string>& overrides, Config* config) {
  // Precedence: file < environment < --set (flags win, as in most CLIs and the
  // twelve-factor convention: `kubectl exec ... --set redis.address=X` uses X).
  EF_RETURN_IF_ERROR(ApplyEnvironment(config));
  EF_RETURN_IF_ERROR(ApplyOverrides(overrides, config));
  // rediss:// turns TLS on: the effective config (DumpConfig) says so.
  if (config->redis.address.find("rediss://") != std::string::npos)
    config->redis.tls_enabled = true;
  return Validate(*config);
}

// Two listeners on one port ("" is off; HostPort rules out port 0).
bool SamePort(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  return a.substr(a.rfind(':') + 1) == b.substr(b.rfind(':') + 1);
}

std::string Seconds(int64_t seconds) { return FormatDurationMs(seconds * 1000); }

// A string value. With a control character in it, double-quoted (escaped): the
// emitter writes some plain, and a plain scalar loses e.g. a trailing "\r" on
// the way back (a fuzzer finding: fuzz/findings/config-dump-control-character.yaml).
void EmitString(const std::string& s, YAML::Emitter* out) {
  const bool control = std::any_of(
      s.begin(), s.end(), [](char ch) { return IsControlByte(static_cast<unsigned char>(ch)); });
  if (control) *out << YAML::DoubleQuoted;
  *out << s;
}

void EmitField(const Field& field, const Config& config, YAML::Emitter* out) {
  const Value value = field.get(config);
  switch (field.type) {
    case FieldType::kString: {
      const auto& s = std::get<std::string>(value);
      EmitString(field.secret && !s.empty() ? std::string("***") : s, out);
      break;
    }
    case FieldType::kInt:
      *out << std::get<int64_t>(value);
      break;
    case FieldType::kDouble:
    case FieldType::kDuration:
      *out << config_internal::FormatValue(field.type, value);
      break;
    case FieldType::kBool:
      *out << std::get<bool>(value);
      break;
    case FieldType::kStringList:
      *out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& e : std::get<config_internal::StringList>(value)) EmitString(e, out);
      *out << YAML::EndSeq;
      break;
    case FieldType::kStringMap: {
      const auto& map = std::get<config_internal::StringMap>(value);
      if (map.empty()) *out << YAML::Flow;
      *out << YAML::BeginMap;
      for (const auto& [name, v] : map) {
        bool masked = field.secret_entry && field.secret_entry(name) && !v.empty();
        *out << YAML::Key;
        EmitString(name, out);
        *out << YAML::Value;
        EmitString(masked ? std::string("***") : v, out);
      }
      *out << YAML::EndMap;
      break;
    }
  }
}

}  // namespace

namespace {

// Counts the YAML documents of `yaml` through the parser's event API, stopping
// past `limit`. yaml-cpp 0.7's LoadAll loops for ever, growing memory, on some
// inputs (a stray "\n," : jbeder/yaml-cpp#1040, fixed in 0.8): a config with more
// documents than any real one is refused before LoadAll sees it.
class NoEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

bool MoreDocumentsThan(const std::string& yaml, int limit) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  NoEvents handler;
  for (int documents = 0; parser.HandleNextDocument(handler);) {
    if (++documents > limit) return true;
  }
  return false;  // a syntax error throws: LoadAll reports it with its place
}

}  // namespace

std::span<const EnvironmentVariable> EnvironmentVariables() { return kEnvVars; }

std::vector<std::string> ChangedKeys(const Config& a, const Config& b) {
  std::vector<std::string> keys;
  for (const Field& field : config_internal::Fields()) {
    if (!field.canonical) continue;
    const Value va = field.get(a);
    const Value vb = field.get(b);
    if (va == vb) continue;
    if (field.type != FieldType::kStringMap) {
      keys.push_back(field.key);
      continue;
    }
    const auto& ma = std::get<config_internal::StringMap>(va);
    const auto& mb = std::get<config_internal::StringMap>(vb);
    std::set<std::string> names;
    for (const auto& [name, v] : ma) names.insert(name);
    for (const auto& [name, v] : mb) names.insert(name);
    for (const std::string& name : names) {
      auto ia = ma.find(name);
      auto ib = mb.find(name);
      if (ia == ma.end() || ib == mb.end() || ia->second != ib->second)
        keys.push_back(field.key + "." + name);
    }
  }
  return keys;
}

namespace {

// "EXPOSURE_FILTER_REDIS_ADRESS=x is not a variable exposure-filter reads ...".
void WarnUnknownVariables(char** environment, std::vector<std::string>* warnings) {
  constexpr std::string_view kPrefix = "EXPOSURE_FILTER_";
  for (char** e = environment; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    if (name.substr(0, kPrefix.size()) != kPrefix) continue;
    if (eq == std::string_view::npos || eq + 1 == entry.size()) continue;  // empty = unset
    const auto known = [&](const EnvironmentVariable& v) { return name == v.name; };
    if (std::any_of(std::begin(kEnvVars), std::end(kEnvVars), known)) continue;
    std::string message = "environment: " + std::string(name) +
                          " is not a variable exposure-filter reads; it is ignored";
    std::vector<std::string> names;
    for (const EnvironmentVariable& v : kEnvVars) names.emplace_back(v.name);
    if (std::string near =
            config_internal::Closest(name, names, std::max<size_t>(2, name.size() / 6));
        !near.empty())
      message += " (did you mean " + near + "?)";
    warnings->push_back(message + "; the variables are listed in docs/CONFIG.md#environment");
  }
}

// librdkafka's default security.protocol is plaintext: SASL settings without a
// SASL protocol are silently unused and the credentials never sent.
void WarnSaslWithoutProtocol(const KafkaConfig& kafka, std::vector<std::string>* warnings) {
  std::string sasl_keys;
  for (const auto& [name, value] : kafka.properties) {
    if (name.compare(0, 5, "sasl.") == 0 && !value.empty())
      sasl_keys += (sasl_keys.empty() ? "" : ", ") + name;
  }
  if (sasl_keys.empty()) return;
  std::string protocol;
  if (auto it = kafka.properties.find("security.protocol"); it != kafka.properties.end())
    protocol = it->second;
  const std::string lower = config_internal::ToLower(protocol);
  if (lower == "sasl_ssl" || lower == "sasl_plaintext") return;
  warnings->push_back("kafka.properties: " + sasl_keys + " set but security.protocol is " +
                      (protocol.empty() ? std::string("unset (plaintext)") : "'" + protocol + "'") +
                      ": Kafka is reached without SASL; set kafka.properties.security.protocol "
                      "to SASL_SSL (or SASL_PLAINTEXT), e.g. "
                      "EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL");
}

}  // namespace

std::vector<std::string> ConfigWarnings(const Config& config, char** environment) {
  std::vector<std::string> warnings;
  WarnUnknownVariables(environment, &warnings);
  WarnSaslWithoutProtocol(config.kafka, &warnings);
  return warnings;
}

StatusOr<Config> LoadConfigFromString(const std::string& yaml, const std::string& origin,
                                      const std::vector<std::string>& overrides) {
  Config config;
  try {
    if (MoreDocumentsThan(yaml, 100)) {
      return InvalidArgument(origin +
                             ": invalid YAML: more than 100 documents (a stray ',' or '---'?)");
    }
    std::vector<YAML::Node> documents = YAML::LoadAll(yaml);
    for (size_t i = 1; i < documents.size(); ++i) {
      if (!documents[i].IsNull()) {
        return InvalidArgument(At(origin, documents[i].Mark().line) +
                               ": more than one YAML document; use a single one");
      }
    }
    if (!documents.empty()) EF_RETURN_IF_ERROR(ApplyDocument(documents.front(), origin, &config));
  } catch (const YAML::Exception& e) {
    // yaml-cpp marks are 0-based; editors count from 1.
    std::string where = e.mark.is_null() ? origin
                                         : origin + ":" + std::to_string(e.mark.line + 1) + ":" +
                                               std::to_string(e.mark.column + 1);
    return InvalidArgument(where + ": invalid YAML: " + e.msg);
  }
  EF_RETURN_IF_ERROR(Finish(overrides, &config));
  return config;
}

StatusOr<Config> LoadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) {
    Config config;
    EF_RETURN_IF_ERROR(Finish(overrides, &config));
    return config;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(path + ": cannot read config file: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument(path + ": cannot read config file: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return InvalidArgument(path + ": cannot read config file: " + std::strerror(errno));
  }
  return LoadConfigFromString(text.str(), path, overrides);
}

namespace {

// Each section's checks across keys, in the order Validate runs them: the first
// error found is the one reported.

Status CheckFilterWindow(const FilterConfig& f) {
  if (f.bucket_seconds <= 0 || f.window_seconds <= 0 || f.window_seconds % f.bucket_seconds != 0) {
    return InvalidArgument("filter.window (" + Seconds(f.window_seconds) +
                           ") must be a positive multiple of filter.bucket (" +
                           Seconds(f.bucket_seconds) + ")");
  }
  return Status::Ok();
}

Status CheckRedisTimeouts(const RedisConfig& r) {
  if (r.retry_backoff_min_ms > r.retry_backoff_max_ms) {
    return InvalidArgument("redis.retry_backoff_min (" + FormatDurationMs(r.retry_backoff_min_ms) +
                           ") must be <= redis.retry_backoff_max (" +
                           FormatDurationMs(r.retry_backoff_max_ms) + ")");
  }
  if (r.wait_replicas > 0 && r.wait_timeout_ms >= r.command_timeout_ms) {
    return InvalidArgument("redis.wait_timeout (" + FormatDurationMs(r.wait_timeout_ms) +
                           ") must be < redis.command_timeout (" +
                           FormatDurationMs(r.command_timeout_ms) +
                           ") when redis.wait_replicas > 0: WAIT answers within it");
  }
  return Status::Ok();
}

// Mutual TLS needs both files; TLS settings with TLS off are a mistake that
// would connect in plain text.
Status CheckRedisTls(const RedisConfig& r) {
  if (r.tls_cert_file.empty() != r.tls_key_file.empty()) {
    return InvalidArgument(
        std::string(r.tls_cert_file.empty() ? "redis.tls.key_file" : "redis.tls.cert_file") +
        " is set without " +
        (r.tls_cert_file.empty() ? "redis.tls.cert_file" : "redis.tls.key_file") +
        ": mutual TLS needs both (or neither)");
  }
  const bool rediss = r.address.find("rediss://") != std::string::npos;
  if (!r.tls_enabled && !rediss) {
    const std::pair<const char*, bool> set[] = {
        {"redis.tls.ca_file", !r.tls_ca_file.empty()},
        {"redis.tls.ca_dir", !r.tls_ca_dir.empty()},
        {"redis.tls.cert_file", !r.tls_cert_file.empty()},
        {"redis.tls.server_name", !r.tls_server_name.empty()},
        {"redis.tls.verify", !r.tls_verify},
    };
    for (const auto& [key, is_set] : set) {
      if (is_set) {
        return InvalidArgument(std::string(key) +
                               " is set but TLS is off: set redis.tls.enabled to true (or write "
                               "redis.address as rediss://host:port)");
      }
    }
  }
  return Status::Ok();
}

Status CheckRedisTopology(const RedisConfig& r) {
  const bool many = r.address.find(',') != std::string::npos;
  if (many && r.cluster == "false") {
    return InvalidArgument("redis.address lists several nodes (" + r.address +
                           "), which needs Redis Cluster: set redis.cluster to auto or true");
  }
  if (r.db != 0 && r.cluster == "true") {
    return InvalidArgument(
        "redis.db (" + std::to_string(r.db) +
        ") must be 0 with redis.cluster: true (Redis Cluster has database 0 only)");
  }
  return Status::Ok();
}

Status CheckContent(const ContentConfig& c, const FilterConfig& f) {
  if (c.index_blocks <= c.max_distance) {
    return InvalidArgument("content.index_blocks (" + std::to_string(c.index_blocks) +
                           ") must be > content.max_distance (" + std::to_string(c.max_distance) +
                           ")");
  }
  if (c.retention_ms <= f.window_seconds * 1000) {
    return InvalidArgument("content.retention (" + FormatDurationMs(c.retention_ms) +
                           ") must be longer than filter.window (" + Seconds(f.window_seconds) +
                           "): an item's cluster must outlive its exposures");
  }
  return Status::Ok();
}

// serve, metrics and content listen on ports of their own.
Status CheckListenPorts(const Config& config) {
  const MetricsConfig& m = config.metrics;
  const ContentConfig& c = config.content;
  if (!m.listen.empty() && config.serve.listen == m.listen) {
    return InvalidArgument("serve.listen (" + config.serve.listen +
                           ") must differ from metrics.listen: give serve its own port");
  }
  for (const auto& [key, other] :
       {std::pair<const char*, const std::string*>{"metrics.listen", &m.listen},
        {"serve.listen", &config.serve.listen}}) {
    if (SamePort(c.listen, *other)) {
      return InvalidArgument("content.listen (" + c.listen + ") must use another port than " + key +
                             " (" + *other +
                             "): `content` runs beside run and serve with the same config");
    }
  }
  return Status::Ok();
}

Status CheckFreshness(const MetricsConfig& m) {
  if (m.freshness_target_ms > m.freshness_limit_ms) {
    return InvalidArgument("metrics.freshness_target (" + FormatDurationMs(m.freshness_target_ms) +
                           ") must be <= metrics.freshness_limit (" +
                           FormatDurationMs(m.freshness_limit_ms) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Config& config) {
  for (const Field& field : config_internal::Fields()) {
    if (!field.canonical) continue;
    EF_RETURN_IF_ERROR(field.check(field.get(config)).Prefixed(field.key));
  }
  EF_RETURN_IF_ERROR(CheckFilterWindow(config.filter));
  EF_RETURN_IF_ERROR(CheckRedisTimeouts(config.redis));
  EF_RETURN_IF_ERROR(CheckRedisTls(config.redis));
  EF_RETURN_IF_ERROR(CheckRedisTopology(config.redis));
  EF_RETURN_IF_ERROR(CheckContent(config.content, config.filter));
  EF_RETURN_IF_ERROR(CheckListenPorts(config));
  return CheckFreshness(config.metrics);
}

Status ApplyConfigOverride(const std::string& key, std::string_view text, Config* config) {
  return ApplyKeyValue(key, text, config);
}

bool IsSecretKafkaProperty(std::string_view name) {
  return config_internal::IsSecretPropertyName(name);
}

std::string DumpConfig(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const std::string& section : config_internal::Sections()) {
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    // Keys of a block (redis.tls.enabled) are nested under its name (tls:); a
    // block's keys are consecutive in the table.
    std::string block;
    for (const Field& field : config_internal::Fields()) {
      if (!field.canonical || field.section() != section) continue;
      std::string_view name = field.name();
      const size_t dot = name.find('.');
      const std::string field_block(dot == std::string_view::npos ? std::string_view()
                                                                  : name.substr(0, dot));
      if (field_block != block) {
        if (!block.empty()) out << YAML::EndMap;
        block = field_block;
        if (!block.empty()) out << YAML::Key << block << YAML::Value << YAML::BeginMap;
      }
      out << YAML::Key << std::string(block.empty() ? name : name.substr(dot + 1)) << YAML::Value;
      EmitField(field, config, &out);
    }
    if (!block.empty()) out << YAML::EndMap;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace ef
