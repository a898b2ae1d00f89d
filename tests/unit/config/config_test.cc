#include "config/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "config/fields.h"
#include "config/loader.h"

namespace ef {
namespace {

const char* const kEnvVars[] = {
    "EXPOSURE_FILTER_REDIS_PASSWORD",       "EXPOSURE_FILTER_REDIS_USERNAME",
    "EXPOSURE_FILTER_KAFKA_SASL_PASSWORD",  "EXPOSURE_FILTER_KAFKA_BOOTSTRAP_SERVERS",
    "EXPOSURE_FILTER_REDIS_ADDRESS",        "EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL",
    "EXPOSURE_FILTER_KAFKA_SASL_MECHANISM", "EXPOSURE_FILTER_KAFKA_SASL_USERNAME",
};

// The loaders read the environment; a developer's shell must not change results.
struct CleanEnv {
  CleanEnv() { Clear(); }
  ~CleanEnv() { Clear(); }
  static void Clear() {
    for (const char* name : kEnvVars) unsetenv(name);
  }
};

// The number of members of aggregate T: the largest n for which T{x1, ..., xn}
// compiles with x converting to anything. A member added to config.h changes it.
struct AnyMember {
  template <class T>
  operator T() const;  // NOLINT(google-explicit-constructor): declared only
};
template <class T, class... Members>
constexpr size_t MemberCount() {
  if constexpr (requires { T{Members{}..., AnyMember{}}; }) {
    return MemberCount<T, Members..., AnyMember>();
  } else {
    return sizeof...(Members);
  }
}

// Canonical rows of the field table in `section`.
size_t TableRows(std::string_view section) {
  size_t n = 0;
  for (const auto& field : config_internal::Fields()) {
    if (field.canonical && field.section() == section) ++n;
  }
  return n;
}

// Field by field through the one table (config/fields.h), so a row added there is
// compared without touching this file; "the table has a row for every member of
// config.h" is checked by "the field table covers every member of Config".
void CheckSameConfig(const Config& a, const Config& b) {
  for (const auto& field : config_internal::Fields()) {
    if (!field.canonical) continue;
    INFO(field.key << ": " << config_internal::FormatValue(field.type, field.get(a)) << " vs "
                   << config_internal::FormatValue(field.type, field.get(b)));
    CHECK(field.get(a) == field.get(b));
  }
}

Config Load(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  StatusOr<Config> c = LoadConfigFromString(yaml, "t.yaml", overrides);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

std::string LoadError(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  StatusOr<Config> c = LoadConfigFromString(yaml, "t.yaml", overrides);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kInvalidArgument);
  return c.status().message();
}

std::string OverrideError(const std::string& kv) { return LoadError("", {kv}); }

std::string ValidateError(const Config& c) {
  Status st = Validate(c);
  REQUIRE_FALSE(st.ok());
  return st.message();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ =
        (std::filesystem::temp_directory_path() / ("ef_config_test_" + std::to_string(getpid()) +
                                                   "_" + std::to_string(counter_++) + ".yaml"))
            .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// Every field changed from its default, secrets included.
Config NonDefaultConfig() {
  Config c;
  c.kafka.bootstrap_servers = "k1:9093,k2:9093";
  c.kafka.topics = {"a", "b c", "123"};
  c.kafka.group_id = "g: 1";
  c.kafka.auto_offset_reset = "latest";
  c.kafka.properties = {{"security.protocol", "SASL_SSL"},
                        {"fetch.wait.max.ms", "10"},
                        {"enable.partition.eof", "true"},
                        {"client.id", "null"}};
  c.kafka.dead_letter_topic = "dlq";
  c.kafka.dead_letter_on_failure = "drop";
  c.kafka.dead_letter_max_pending_bytes = 1 << 20;
  c.redis.address = "[::1]:6380";
  c.redis.cluster = "false";
  c.redis.username = "ef";
  c.redis.password = "pw";
  c.redis.db = 3;
  c.redis.connect_timeout_ms = 1500;
  c.redis.command_timeout_ms = 90000;
  c.redis.retry_backoff_min_ms = 50;
  c.redis.retry_backoff_max_ms = 7000;
  c.redis.write_mode = "setbit";
  c.redis.bitop_threshold = 7;
  c.redis.expire_cache_keys = 0;
  c.redis.expire_refresh_ms = 90 * 1000;
  c.redis.wait_replicas = 2;
  c.redis.wait_timeout_ms = 350;
  c.redis.tls_enabled = true;
  c.redis.tls_ca_file = "/etc/ef/ca.pem";
  c.redis.tls_ca_dir = "/etc/ef/ca.d";
  c.redis.tls_cert_file = "/etc/ef/client.pem";
  c.redis.tls_key_file = "/etc/ef/client.key";
  c.redis.tls_server_name = "redis.internal";
  c.redis.tls_verify = false;
  c.filter.key_prefix = "#x: ";
  c.filter.window_seconds = 7 * 86400;
  c.filter.bucket_seconds = 6 * 3600;
  c.filter.items_per_bucket = 77;
  c.filter.fpr = 0.001234567890123;
  c.filter.seed = 4294967295u;
  c.filter.stages = 5;
  c.filter.growth = 3;
  c.filter.k_step = 0;
  c.filter.layout_version = 2;
  c.filter.near_duplicates = true;
  c.events.format = "json";  // the only format: the one field left at its default
  c.events.user_field = "uid";
  c.events.item_field = "iid";
  c.events.items_field = "page";
  c.events.time_field = "~";
  c.events.time_unit = "s";
  c.events.cluster_field = "cid";
  c.events.simhash_field = "fp";
  c.events.max_id_bytes = 64;
  c.events.max_items_per_event = 5;
  c.events.max_future_ms = 0;
  c.pipeline.batch_max_events = 1;
  c.pipeline.batch_max_positions = 1234;
  c.pipeline.batch_max_wait_ms = 0;
  c.pipeline.commit_interval_ms = 250;
  c.metrics.listen = "";
  c.metrics.refresh_interval_ms = 500;
  c.metrics.status_window = 3;
  c.metrics.freshness_target_ms = 2000;
  c.metrics.freshness_limit_ms = 7000;
  c.metrics.unassigned_grace_ms = 4500;
  c.serve.listen = "0.0.0.0:18090";
  c.serve.max_items = 12;
  c.serve.max_body_bytes = 4096;
  // 50 ms written as a bare 50 would load back as 50 s.
  c.serve.timeout_ms = 75;
  c.serve.threads = 3;
  c.serve.idle_timeout_ms = 90'000;
  c.serve.mark_queue = 500;
  c.serve.fail_closed = true;
  c.serve.served_ttl_ms = 90 * 60 * 1000;
  c.serve.served_items = 64;
  c.serve.served_fpr = 0.001;
  c.serve.content_cache_bytes = 0;
  c.content.max_distance = 2;
  c.content.index_blocks = 6;
  c.content.index_group_bits = 16;
  c.content.retention_ms = int64_t{45} * 86400 * 1000;
  c.content.topic = "stories";
  c.content.group_id = "stories-index";
  c.content.cache_items = 0;
  c.content.cache_bytes = int64_t{1} << 20;
  c.log.level = "debug";
  c.log.format = "json";
  c.content.listen = "0.0.0.0:9476";
  return c;
}

}  // namespace

TEST_CASE("defaults: empty input, comments only, empty sections, no path", "[config]") {
  CleanEnv env;
  REQUIRE(Validate(Config{}).ok());
  CheckSameConfig(Load(""), Config{});
  CheckSameConfig(Load("# nothing here\n\n"), Config{});
  CheckSameConfig(Load("kafka:\nredis:\n# all commented out\nfilter:\n"), Config{});
  StatusOr<Config> c = LoadConfig("", {});
  REQUIRE(c.ok());
  CheckSameConfig(*c, Config{});
}

TEST_CASE("every type is read from YAML", "[config]") {
  CleanEnv env;
  Config c = Load(
      "kafka:\n"
      "  bootstrap_servers: b1:9092,b2:9092\n"
      "  topics: [t1, t2]\n"
      "  group_id: 42\n"
      "  properties:\n"
      "    fetch.wait.max.ms: 10\n"
      "    enable.partition.eof: false\n"
      "    security.protocol: \"SASL_SSL\"\n"
      "    empty.one:\n"
      "  dead_letter_topic:\n"
      "redis:\n"
      "  db: +2\n"
      "  connect_timeout: 500ms\n"
      "  command_timeout: 7\n"
      "filter:\n"
      "  key_prefix: 'ef2:'\n"
      "  window: 2d\n"
      "  bucket: 12h\n"
      "  fpr: 1e-3\n"
      "  seed: 4294967295\n");
  CHECK(c.kafka.bootstrap_servers == "b1:9092,b2:9092");
  CHECK(c.kafka.topics == std::vector<std::string>{"t1", "t2"});
  CHECK(c.kafka.group_id == "42");
  CHECK(c.kafka.properties == std::map<std::string, std::string>{{"fetch.wait.max.ms", "10"},
                                                                 {"enable.partition.eof", "false"},
                                                                 {"security.protocol", "SASL_SSL"},
                                                                 {"empty.one", ""}});
  CHECK(c.kafka.dead_letter_topic.empty());
  CHECK(c.redis.db == 2);
  CHECK(c.redis.connect_timeout_ms == 500);
  CHECK(c.redis.command_timeout_ms == 7000);  // a bare number is seconds
  CHECK(c.filter.key_prefix == "ef2:");
  CHECK(c.filter.window_seconds == 2 * 86400);
  CHECK(c.filter.bucket_seconds == 12 * 3600);
  CHECK(c.filter.fpr == 0.001);
  CHECK(c.filter.seed == 4294967295u);

  CHECK(Load("kafka:\n  topic: one\n").kafka.topics == std::vector<std::string>{"one"});
  CHECK(Load("kafka:\n  topics:\n    - x\n    - y\n").kafka.topics ==
        std::vector<std::string>{"x", "y"});
}

TEST_CASE("unknown keys fail with the line and a suggestion", "[config]") {
  CleanEnv env;
  CHECK(LoadError("kafka:\n  group_id: g\nfilter:\n  fprr: 0.01\n") ==
        "t.yaml:4: unknown key 'filter.fprr' (did you mean 'filter.fpr'?)");
  CHECK(LoadError("\n\nfiltr:\n  fpr: 0.01\n") ==
        "t.yaml:3: unknown key 'filtr' (did you mean 'filter'?)");
  CHECK(LoadError("redis:\n  key_prefix: x\n") ==
        "t.yaml:2: unknown key 'redis.key_prefix' (did you mean 'filter.key_prefix'?)");
  CHECK(LoadError("kafka:\n  group-id: g\n") ==
        "t.yaml:2: unknown key 'kafka.group-id' (did you mean 'kafka.group_id'?)");
  CHECK(LoadError("filter:\n  completely_unrelated: 1\n") ==
        "t.yaml:2: unknown key 'filter.completely_unrelated'");
  CHECK(LoadError("fpr: 0.1\n") == "t.yaml:1: unknown key 'fpr' (did you mean 'filter.fpr'?)");
  CHECK(LoadError("filter.fpr: 0.1\n") ==
        "t.yaml:1: unknown key 'filter.fpr': keys are nested, write 'filter:' and under it "
        "'  fpr: ...'");
}

TEST_CASE("wrong types fail naming key, line and expected type", "[config]") {
  CleanEnv env;
  CHECK(LoadError("filter:\n  items_per_bucket: abc\n") ==
        "t.yaml:2: filter.items_per_bucket: expected an integer, got 'abc'");
  CHECK(LoadError("filter:\n  seed: 1.5\n") ==
        "t.yaml:2: filter.seed: expected an integer, got '1.5'");
  CHECK(LoadError("filter:\n  seed:\n") ==
        "t.yaml:2: filter.seed: expected an integer, got nothing");
  CHECK(LoadError("filter:\n  fpr: [1]\n") ==
        "t.yaml:2: filter.fpr: expected a number, got a list");
  CHECK(LoadError("filter:\n  fpr: .nan\n") ==
        "t.yaml:2: filter.fpr: expected a number, got '.nan'");
  CHECK(LoadError("redis:\n  address:\n    host: x\n") ==
        "t.yaml:3: redis.address: expected a string, got a map");
  CHECK(LoadError("kafka:\n  topics: exposures\n") ==
        "t.yaml:2: kafka.topics: expected a list of strings such as [a, b], got 'exposures'");
  CHECK(LoadError("kafka:\n  topics:\n    - a\n    - [b]\n") ==
        "t.yaml:4: kafka.topics: item 2: expected a string, got a list");
  CHECK(LoadError("kafka:\n  properties: [a]\n") ==
        "t.yaml:2: kafka.properties: expected a map of strings, got a list");
  CHECK(LoadError("kafka:\n  properties:\n    a: b\n    sasl:\n      mechanism: PLAIN\n") ==
        "t.yaml:4: kafka.properties: entry 'sasl': expected a string, got a map (write dotted "
        "names, e.g. sasl.mechanism: PLAIN)");
  CHECK(LoadError("filter:\n  window: 30x\n") ==
        "t.yaml:2: filter.window: duration \"30x\" has unknown unit \"x\" (use ms, s, m, h or d)");
  CHECK(LoadError("filter:\n  window: [30d]\n") ==
        "t.yaml:2: filter.window: expected a duration such as 500ms, 10s, 5m, 1h or 30d, got a "
        "list");
  CHECK(LoadError("kafka: 5\n") == "t.yaml:1: kafka: expected a map of keys, got '5'");
  CHECK(LoadError("- a\n- b\n") ==
        "t.yaml:1: expected a map of sections (kafka, redis, filter, ...) at the top level, got a "
        "list");
}

TEST_CASE("out-of-range values fail naming key, line, range and value", "[config]") {
  CleanEnv env;
  CHECK(LoadError("filter:\n  fpr: 1.5\n") == "t.yaml:2: filter.fpr: must be in (0, 1), got 1.5");
  CHECK(LoadError("filter:\n  fpr: 0\n") == "t.yaml:2: filter.fpr: must be in (0, 1), got 0");
  CHECK(LoadError("redis:\n  db: -1\n") ==
        "t.yaml:2: redis.db: must be in [0, 2147483647], got -1");
  CHECK(LoadError("filter:\n  seed: 4294967296\n") ==
        "t.yaml:2: filter.seed: must be in [0, 4294967295], got 4294967296");
  CHECK(LoadError("redis:\n  connect_timeout: 0s\n") ==
        "t.yaml:2: redis.connect_timeout: must be in [1ms, 10m], got 0s");
  CHECK(LoadError("redis:\n  write_mode: bitmap\n") ==
        "t.yaml:2: redis.write_mode: must be one of auto, module, bitfield, bitop, setbit, got "
        "'bitmap'");
  CHECK(LoadError("redis:\n  address: localhost\n") ==
        "t.yaml:2: redis.address: must be host:port, got 'localhost'");
  CHECK(LoadError("redis:\n  address: localhost:70000\n") ==
        "t.yaml:2: redis.address: port must be in [1, 65535], got 'localhost:70000'");
  CHECK(LoadError("metrics:\n  listen: 9464\n") ==
        "t.yaml:2: metrics.listen: must be \"\" (off) or host:port, got '9464'");
  CHECK(LoadError("filter:\n  bucket: 5h\n") ==
        "t.yaml:2: filter.bucket: must be a whole number of hours that divides a day (1h, 2h, "
        "3h, 4h, 6h, 8h, 12h) or a whole number of days, got 5h");
  CHECK(LoadError("filter:\n  window: 1500s\n") ==
        "t.yaml:2: filter.window: must be in [1h, 3650d], got 25m");
  CHECK(LoadError("filter:\n  key_prefix: 'a{b'\n") ==
        "t.yaml:2: filter.key_prefix: must not contain '{' or '}' (they would change the Redis "
        "Cluster hash tag), got 'a{b'");
  CHECK(LoadError("pipeline:\n  batch_max_events: 0\n") ==
        "t.yaml:2: pipeline.batch_max_events: must be in [1, 10000000], got 0");
  CHECK(LoadError("kafka:\n  topics: []\n") ==
        "t.yaml:2: kafka.topics: must name at least one topic");
  CHECK(LoadError("kafka:\n  topic: ''\n") == "t.yaml:2: kafka.topic: must not be empty");
  CHECK(LoadError("log:\n  level: verbose\n") ==
        "t.yaml:2: log.level: must be one of trace, debug, info, warn, error, got 'verbose'");

  // Valid corner values.
  CHECK(Load("redis:\n  address: '[::1]:1'\n").redis.address == "[::1]:1");
  CHECK(Load("metrics:\n  listen: ''\n").metrics.listen.empty());
  CHECK(Load("filter:\n  bucket: 1h\n  window: 1h\n").filter.bucket_seconds == 3600);
  CHECK(Load("filter:\n  bucket: 2d\n  window: 30d\n").filter.bucket_seconds == 2 * 86400);
}

// docs/CONFIG.md: serve.served_ttl 1s..7d, serve.served_items 1..1048576,
// serve.served_fpr 0 < x < 1; just outside each bound is an error naming the key.
TEST_CASE("serve.served_ttl, served_items and served_fpr: the bounds load, just outside fails",
          "[config][served]") {
  CleanEnv env;
  CHECK(LoadError("serve:\n  served_ttl: 999ms\n") ==
        "t.yaml:2: serve.served_ttl: must be in [1s, 7d], got 999ms");
  CHECK(LoadError("serve:\n  served_ttl: 604800001ms\n") ==
        "t.yaml:2: serve.served_ttl: must be in [1s, 7d], got 604800001ms");
  CHECK(Load("serve:\n  served_ttl: 1s\n").serve.served_ttl_ms == 1000);
  CHECK(Load("serve:\n  served_ttl: 7d\n").serve.served_ttl_ms == 7 * 86400 * 1000);

  CHECK(LoadError("serve:\n  served_items: 0\n") ==
        "t.yaml:2: serve.served_items: must be in [1, 1048576], got 0");
  CHECK(LoadError("serve:\n  served_items: 1048577\n") ==
        "t.yaml:2: serve.served_items: must be in [1, 1048576], got 1048577");
  CHECK(Load("serve:\n  served_items: 1\n").serve.served_items == 1);
  CHECK(Load("serve:\n  served_items: 1048576\n").serve.served_items == 1048576);

  // An open interval: the bounds themselves are outside, values next to them inside.
  CHECK(LoadError("serve:\n  served_fpr: 0\n") ==
        "t.yaml:2: serve.served_fpr: must be in (0, 1), got 0");
  CHECK(LoadError("serve:\n  served_fpr: 1\n") ==
        "t.yaml:2: serve.served_fpr: must be in (0, 1), got 1");
  CHECK(Load("serve:\n  served_fpr: 1e-300\n").serve.served_fpr == 1e-300);
  CHECK(Load("serve:\n  served_fpr: 0.999999\n").serve.served_fpr == 0.999999);

  // --set: the same checks, naming the key.
  CHECK(OverrideError("serve.served_ttl=999ms") ==
        "--set serve.served_ttl: must be in [1s, 7d], got 999ms");
  CHECK(OverrideError("serve.served_items=1048577") ==
        "--set serve.served_items: must be in [1, 1048576], got 1048577");
  CHECK(OverrideError("serve.served_fpr=1") == "--set serve.served_fpr: must be in (0, 1), got 1");
}

TEST_CASE("duplicates, topic/topics conflict, bad documents", "[config]") {
  CleanEnv env;
  CHECK(LoadError("filter:\n  fpr: 0.1\n  seed: 1\n  fpr: 0.2\n") ==
        "t.yaml:4: duplicate key 'filter.fpr' (first at line 2)");
  CHECK(LoadError("log:\n  level: info\nlog:\n  level: info\n") ==
        "t.yaml:3: duplicate key 'log' (first at line 1)");
  CHECK(LoadError("kafka:\n  topic: a\n  group_id: g\n  topics: [b]\n") ==
        "t.yaml:4: kafka.topics: conflicts with kafka.topic at line 2; use one of them");
  CHECK(LoadError("kafka:\n  properties:\n    a: 1\n    a: 2\n") ==
        "t.yaml:4: kafka.properties: duplicate entry 'a'");

  std::string bad = LoadError("filter:\n  fpr: [0.1\nlog: {}\n");
  CHECK_THAT(bad, Catch::StartsWith("t.yaml:3:") && Catch::Contains(": invalid YAML: "));
  CHECK(bad.find('\n') == std::string::npos);
  CHECK(LoadError("log:\n  level: info\n---\nlog:\n  level: warn\n") ==
        "t.yaml:4: more than one YAML document; use a single one");
}

TEST_CASE("files: read, unreadable, directory, errors name the path", "[config]") {
  CleanEnv env;
  TempFile good("filter:\n  fpr: 0.05\n");
  StatusOr<Config> c = LoadConfig(good.path(), {});
  REQUIRE(c.ok());
  CHECK(c->filter.fpr == 0.05);

  TempFile empty("");
  REQUIRE(LoadConfig(empty.path(), {}).ok());

  TempFile wrong("\nfilter:\n  fpr: 2\n");
  StatusOr<Config> w = LoadConfig(wrong.path(), {});
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message() == wrong.path() + ":3: filter.fpr: must be in (0, 1), got 2");

  StatusOr<Config> missing = LoadConfig("/nonexistent/ef.yaml", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "/nonexistent/ef.yaml: cannot read config file: No such file or directory");

  StatusOr<Config> dir = LoadConfig(std::filesystem::temp_directory_path().string(), {});
  REQUIRE_FALSE(dir.ok());
  CHECK_THAT(dir.status().message(), Catch::EndsWith(": cannot read config file: is a directory"));
}

TEST_CASE("overrides (--set) use the same field table", "[config]") {
  CleanEnv env;
  Config c =
      Load("filter:\n  fpr: 0.05\nkafka:\n  topics: [x]\n",
           {"filter.fpr=0.02", "kafka.topics=[a, b]", "kafka.properties.fetch.wait.max.ms=10",
            "kafka.properties.security.protocol=SSL", "filter.window=7d", "filter.key_prefix=ef2:",
            "redis.password=p#1 *x: [y]", "redis.db=5", "kafka.dead_letter_topic="});
  CHECK(c.filter.fpr == 0.02);
  CHECK(c.kafka.topics == std::vector<std::string>{"a", "b"});
  CHECK(c.kafka.properties == std::map<std::string, std::string>{{"fetch.wait.max.ms", "10"},
                                                                 {"security.protocol", "SSL"}});
  CHECK(c.filter.window_seconds == 7 * 86400);
  CHECK(c.filter.key_prefix == "ef2:");  // strings are verbatim, no YAML quoting needed
  CHECK(c.redis.password == "p#1 *x: [y]");
  CHECK(c.redis.db == 5);
  CHECK(c.kafka.dead_letter_topic.empty());

  CHECK(Load("", {"kafka.topic=one"}).kafka.topics == std::vector<std::string>{"one"});
  CHECK(Load("", {"kafka.topics=[a]", "kafka.topic=b"}).kafka.topics ==
        std::vector<std::string>{"b"});  // in order: the last one wins
  CHECK(Load("kafka:\n  properties: {a: '1'}\n", {"kafka.properties={b: 2}"}).kafka.properties ==
        std::map<std::string, std::string>{{"b", "2"}});
  CHECK(Load("", {"filter.fpr=0.5", "filter.fpr=0.25"}).filter.fpr == 0.25);

  CHECK(OverrideError("filter.fpr=2") == "--set filter.fpr: must be in (0, 1), got 2");
  CHECK(OverrideError("filter.fprr=2") ==
        "--set filter.fprr: unknown key 'filter.fprr' (did you mean 'filter.fpr'?)");
  CHECK(OverrideError("filter.fpr") == "--set filter.fpr: expected key=value");
  CHECK(OverrideError("=1") == "--set =1: expected key=value");
  CHECK(OverrideError("filter.seed=x") == "--set filter.seed: expected an integer, got 'x'");
  CHECK(OverrideError("kafka.topics=a") ==
        "--set kafka.topics: expected a list of strings such as [a, b], got 'a'");
  CHECK_THAT(OverrideError("kafka.topics=[a,"),
             Catch::StartsWith("--set kafka.topics: invalid YAML value '[a,': "));
  CHECK(OverrideError("filter=1") ==
        "--set filter: 'filter' is a section; set one of its keys, e.g. filter.<key>=<value>");
  CHECK(OverrideError("redis.write_mode=x") ==
        "--set redis.write_mode: must be one of auto, module, bitfield, bitop, setbit, got 'x'");
}

TEST_CASE("the environment beats the file and --set beats both", "[config]") {
  CleanEnv env;
  setenv("EXPOSURE_FILTER_REDIS_PASSWORD", "s3cret", 1);
  setenv("EXPOSURE_FILTER_REDIS_USERNAME", "ef-user", 1);
  setenv("EXPOSURE_FILTER_KAFKA_SASL_PASSWORD", "kpw", 1);
  setenv("EXPOSURE_FILTER_KAFKA_SASL_USERNAME", "env-user", 1);
  setenv("EXPOSURE_FILTER_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512", 1);
  setenv("EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL", "SASL_SSL", 1);
  setenv("EXPOSURE_FILTER_KAFKA_BOOTSTRAP_SERVERS", "broker:9094", 1);
  setenv("EXPOSURE_FILTER_REDIS_ADDRESS", "redis.internal:6390", 1);
  Config c = Load("redis:\n  password: from-file\n  username: file-user\n",
                  {"redis.password=from-set", "kafka.properties.sasl.username=u"});
  CHECK(c.redis.password == "from-set");  // --set > environment > file
  CHECK(c.redis.username == "ef-user");   // environment > file
  CHECK(c.kafka.properties ==
        std::map<std::string, std::string>{{"sasl.password", "kpw"},
                                           {"sasl.username", "u"},
                                           {"sasl.mechanism", "SCRAM-SHA-512"},
                                           {"security.protocol", "SASL_SSL"}});
  CHECK(c.kafka.bootstrap_servers == "broker:9094");
  CHECK(c.redis.address == "redis.internal:6390");
  // `kubectl exec ... check --set redis.address=X` queries X, not the pod's Redis.
  CHECK(Load("", {"redis.address=other:6379"}).redis.address == "other:6379");

  StatusOr<Config> no_file = LoadConfig("", {});
  REQUIRE(no_file.ok());
  CHECK(no_file->redis.password == "s3cret");

  // Empty means unset.
  setenv("EXPOSURE_FILTER_REDIS_PASSWORD", "", 1);
  CHECK(Load("redis:\n  password: from-file\n").redis.password == "from-file");

  setenv("EXPOSURE_FILTER_REDIS_ADDRESS", "no-port", 1);
  CHECK(LoadError("") ==
        "environment EXPOSURE_FILTER_REDIS_ADDRESS (redis.address): must be host:port, got "
        "'no-port'");
}

TEST_CASE("cross-field checks name the keys", "[config]") {
  CleanEnv env;
  CHECK(LoadError("filter:\n  window: 36h\n") ==
        "filter.window (36h) must be a positive multiple of filter.bucket (1d)");
  CHECK(LoadError("filter:\n  bucket: 2d\n  window: 1d\n") ==
        "filter.window (1d) must be a positive multiple of filter.bucket (2d)");
  CHECK(Load("filter:\n  bucket: 8h\n  window: 30d\n").filter.window_seconds == 30 * 86400);
  CHECK(LoadError("redis:\n  retry_backoff_min: 10s\n  retry_backoff_max: 5s\n") ==
        "redis.retry_backoff_min (10s) must be <= redis.retry_backoff_max (5s)");
  // Redis Cluster and WAIT (issue 12).
  CHECK(LoadError("redis:\n  address: a:1,b:2\n  cluster: false\n") ==
        "redis.address lists several nodes (a:1,b:2), which needs Redis Cluster: set "
        "redis.cluster to auto or true");
  CHECK(LoadError("redis:\n  cluster: true\n  db: 3\n") ==
        "redis.db (3) must be 0 with redis.cluster: true (Redis Cluster has database 0 only)");
  CHECK(LoadError("redis:\n  wait_replicas: 1\n  wait_timeout: 5s\n") ==
        "redis.wait_timeout (5s) must be < redis.command_timeout (5s) when redis.wait_replicas "
        "> 0: WAIT answers within it");
  CHECK(Load("redis:\n  wait_replicas: 1\n").redis.wait_replicas == 1);
  CHECK(Load("redis:\n  address: a:1, b:2 ,[::1]:3\n").redis.address == "a:1, b:2 ,[::1]:3");
  CHECK_THAT(LoadError("redis:\n  address: a:1,b\n"),
             Catch::Contains("redis.address: entry 2 of the list: must be host:port"));
  CHECK_THAT(LoadError("redis:\n  cluster: yes\n"),
             Catch::Contains("redis.cluster: must be one of auto, true, false"));
  // The size rule lives with the layout arithmetic (bloom/layout.h), above config/.
  CHECK_THAT(
      CheckFilterSizing(Load("filter:\n  items_per_bucket: 1000000000\n  fpr: 1e-12\n").filter)
          .message(),
      Catch::StartsWith("filter.items_per_bucket (1000000000), filter.fpr (1e-12), "
                        "filter.window (30d), filter.bucket (1d): no usable Bloom filter "
                        "size: "));

  // Validate also checks single fields of a config built in code.
  Config c;
  c.redis.write_mode = "x";
  CHECK(ValidateError(c) ==
        "redis.write_mode: must be one of auto, module, bitfield, bitop, setbit, got 'x'");
  c = Config{};
  c.events.time_unit = "us";
  CHECK(ValidateError(c) == "events.time_unit: must be one of ms, s, got 'us'");
  c = Config{};
  c.events.format = "avro";
  CHECK(ValidateError(c) == "events.format: must be one of json, got 'avro'");
  c = Config{};
  c.kafka.auto_offset_reset = "smallest";
  CHECK(ValidateError(c) ==
        "kafka.auto_offset_reset: must be one of earliest, latest, got 'smallest'");
  c = Config{};
  c.log.level = "loud";
  CHECK_THAT(ValidateError(c), Catch::StartsWith("log.level: must be one of"));
  c = Config{};
  c.metrics.listen = "host:0";
  CHECK(ValidateError(c) == "metrics.listen: port must be in [1, 65535], got 'host:0'");
  c = Config{};
  c.pipeline.batch_max_events = 0;
  CHECK_THAT(ValidateError(c), Catch::StartsWith("pipeline.batch_max_events: must be in [1,"));
  c = Config{};
  c.filter.bucket_seconds = 5400;
  CHECK_THAT(ValidateError(c), Catch::StartsWith("filter.bucket: must be a whole number of hours"));
  c = Config{};
  c.kafka.topics.clear();
  CHECK(ValidateError(c) == "kafka.topics: must name at least one topic");
  c = Config{};
  c.content.index_blocks = 3;
  CHECK(ValidateError(c) == "content.index_blocks (3) must be > content.max_distance (3)");
  c = Config{};
  c.content.retention_ms = int64_t{30} * 86400 * 1000;
  CHECK(ValidateError(c) ==
        "content.retention (30d) must be longer than filter.window (30d): an item's cluster "
        "must outlive its exposures");
}

TEST_CASE("the field table covers every member of Config", "[config]") {
  // A member added to config.h without a row in config/fields.cc fails here;
  // a row added there is compared by CheckSameConfig and must be changed by
  // NonDefaultConfig (next test) without further edits to this file.
  CHECK(MemberCount<Config>() == config_internal::Sections().size());
  CHECK(MemberCount<KafkaConfig>() == TableRows("kafka"));
  CHECK(MemberCount<RedisConfig>() == TableRows("redis"));
  CHECK(MemberCount<FilterConfig>() == TableRows("filter"));
  CHECK(MemberCount<EventsConfig>() == TableRows("events"));
  CHECK(MemberCount<PipelineConfig>() == TableRows("pipeline"));
  CHECK(MemberCount<MetricsConfig>() == TableRows("metrics"));
  CHECK(MemberCount<ServeConfig>() == TableRows("serve"));
  CHECK(MemberCount<ContentConfig>() == TableRows("content"));
  CHECK(MemberCount<LogConfig>() == TableRows("log"));
  size_t canonical = 0;
  for (const auto& field : config_internal::Fields()) canonical += field.canonical;
  INFO("canonical rows: " << canonical);
  CHECK(canonical == MemberCount<KafkaConfig>() + MemberCount<RedisConfig>() +
                         MemberCount<FilterConfig>() + MemberCount<EventsConfig>() +
                         MemberCount<PipelineConfig>() + MemberCount<MetricsConfig>() +
                         MemberCount<ServeConfig>() + MemberCount<ContentConfig>() +
                         MemberCount<LogConfig>());
}

TEST_CASE("redis.tls keys load from a block, --set and rediss:// addresses", "[config][tls]") {
  CleanEnv env;
  const Config c = Load(
      "redis:\n  tls:\n    enabled: true\n    ca_file: /x/ca.pem\n    ca_dir: /x/ca.d\n"
      "    cert_file: /x/c.pem\n    key_file: /x/c.key\n    server_name: redis.internal\n"
      "    verify: false\n");
  CHECK(c.redis.tls_enabled);
  CHECK(c.redis.tls_ca_file == "/x/ca.pem");
  CHECK(c.redis.tls_ca_dir == "/x/ca.d");
  CHECK(c.redis.tls_cert_file == "/x/c.pem");
  CHECK(c.redis.tls_key_file == "/x/c.key");
  CHECK(c.redis.tls_server_name == "redis.internal");
  CHECK_FALSE(c.redis.tls_verify);
  CHECK_FALSE(Config{}.redis.tls_enabled);
  CHECK(Config{}.redis.tls_verify);
  // `tls: true` and --set redis.tls=true: the same as enabled.
  CHECK(Load("redis:\n  tls: true\n").redis.tls_enabled);
  CHECK(Load("", {"redis.tls=true"}).redis.tls_enabled);
  CHECK(Load("", {"redis.tls.enabled=yes", "redis.tls.ca_file=/x/ca.pem"}).redis.tls_ca_file ==
        "/x/ca.pem");
  // rediss:// turns TLS on, in any entry of a list.
  CHECK(Load("redis:\n  address: rediss://redis.internal:6380\n").redis.tls_enabled);
  CHECK(Load("", {"redis.address=a:1,rediss://b:2"}).redis.tls_enabled);
  CHECK_FALSE(Load("", {"redis.address=a:1,b:2"}).redis.tls_enabled);
}

TEST_CASE("redis.tls mistakes fail with one line naming the key", "[config][tls]") {
  CleanEnv env;
  CHECK(LoadError("redis:\n  tls:\n    enable: true\n") ==
        "t.yaml:3: unknown key 'redis.tls.enable' (did you mean 'redis.tls.enabled'?)");
  CHECK(LoadError("redis:\n  tls:\n    verify: maybe\n") ==
        "t.yaml:3: redis.tls.verify: expected true or false, got 'maybe'");
  CHECK(LoadError("redis:\n  tls: true\n  tls:\n    enabled: true\n") ==
        "t.yaml:3: duplicate key 'redis.tls' (first at line 2)");
  CHECK(OverrideError("redis.tls.enabled=1.5") ==
        "--set redis.tls.enabled: expected true or false, got '1.5'");
  CHECK(OverrideError("redis.tls.server_name=a b") ==
        "--set redis.tls.server_name: must be a host name or IP address (at most 253 "
        "characters), got 'a b'");
  CHECK(LoadError("", {"redis.tls=true", "redis.tls.cert_file=/x/c.pem"}) ==
        "redis.tls.cert_file is set without redis.tls.key_file: mutual TLS needs both (or "
        "neither)");
  CHECK(LoadError("", {"redis.tls=true", "redis.tls.key_file=/x/c.key"}) ==
        "redis.tls.key_file is set without redis.tls.cert_file: mutual TLS needs both (or "
        "neither)");
  CHECK(LoadError("", {"redis.tls.ca_file=/x/ca.pem"}) ==
        "redis.tls.ca_file is set but TLS is off: set redis.tls.enabled to true (or write "
        "redis.address as rediss://host:port)");
  CHECK(LoadError("", {"redis.tls.verify=false"}) ==
        "redis.tls.verify is set but TLS is off: set redis.tls.enabled to true (or write "
        "redis.address as rediss://host:port)");
  CHECK(Load("", {"redis.address=rediss://h:1", "redis.tls.ca_file=/x/ca.pem"}).redis.tls_enabled);
  CHECK(OverrideError("redis.address=redis://h:6379") ==
        "--set redis.address: must be host:port or rediss://host:port (TLS), got "
        "'redis://h:6379'");
  CHECK(OverrideError("redis.address=rediss://h") ==
        "--set redis.address: after rediss://: must be host:port, got 'h'");
  CHECK_THAT(OverrideError("redis.address=a:1,rediss://b"),
             Catch::Contains("redis.address: entry 2 of the list: after rediss://: must be "
                             "host:port"));
}

TEST_CASE("DumpConfig round-trips every key", "[config]") {
  CleanEnv env;
  // Every key of the table is present in a dump, nested under its section.
  const auto check_every_key = [](const std::string& dump) {
    INFO(dump);
    const YAML::Node root = YAML::Load(dump);
    size_t keys = 0;
    for (const auto& field : config_internal::Fields()) {
      if (!field.canonical) continue;
      INFO(field.key);
      // A block's keys (redis.tls.enabled) are nested under its name (tls:).
      YAML::Node node = root[std::string(field.section())];
      std::string_view name = field.name();
      for (size_t dot; (dot = name.find('.')) != std::string_view::npos;) {
        node.reset(node[std::string(name.substr(0, dot))]);  // (= would assign into the tree)
        name.remove_prefix(dot + 1);
      }
      CHECK(node[std::string(name)].IsDefined());
      ++keys;
    }
    CHECK(keys > 0);
    CHECK_FALSE(root["kafka"]["topic"].IsDefined());  // the alias is never dumped
  };

  // The defaults: loading them back cannot tell a key the dump leaves out (e.g.
  // a boolean that is false) from one it wrote, so every key is looked up too.
  const std::string defaults_dump = DumpConfig(Config{});
  CheckSameConfig(Load(defaults_dump), Config{});
  check_every_key(defaults_dump);

  const Config original = NonDefaultConfig();
  REQUIRE(Validate(original).ok());
  // Every field but events.format (one allowed value) differs from its default,
  // so a field the dump drops or misreads cannot pass by holding the default.
  Config expected = original;
  for (const auto& field : config_internal::Fields()) {
    if (!field.canonical || field.key == "events.format") continue;
    INFO(field.key << " is left at its default in NonDefaultConfig()");
    CHECK_FALSE(field.get(original) == field.get(Config{}));
    // Secrets are dumped masked.
    if (field.secret) field.set(std::string("***"), &expected);
  }
  const std::string dump = DumpConfig(original);
  INFO(dump);
  CheckSameConfig(Load(dump), expected);
  CHECK(DumpConfig(Load(dump)) == dump);  // stable
  check_every_key(dump);
}

// Fuzzer finding (fuzz/findings/config-dump-control-character.yaml): a plain
// scalar that ends in a carriage return ("time_field: ts\r  # ...") loads as
// "ts\r", and DumpConfig wrote it plain again, which loads as "ts": strings with
// control characters must be written quoted, with escapes.
TEST_CASE("DumpConfig round-trips strings with control characters", "[config][fuzz]") {
  CleanEnv env;
  Config c;
  c.events.time_field = "ts\r";
  c.events.user_field = "user\tid";
  c.kafka.dead_letter_topic = "dlq\x01";
  c.kafka.properties["client.id"] = "a\rb\x7f";
  c.kafka.topics = {"t\r", "plain"};
  REQUIRE(Validate(c).ok());
  const std::string dump = DumpConfig(c);
  INFO(dump);
  const Config again = Load(dump);
  CHECK(again.events.time_field == "ts\r");
  CHECK(again.events.user_field == "user\tid");
  CHECK(again.kafka.dead_letter_topic == "dlq\x01");
  CHECK(again.kafka.properties.at("client.id") == "a\rb\x7f");
  CHECK(again.kafka.topics == std::vector<std::string>{"t\r", "plain"});
  CHECK(DumpConfig(again) == dump);

  // The finding itself, as the loader sees it.
  const Config found = Load("events:\n  time_field: ts\r  # Unit of time_field\n");
  CHECK(DumpConfig(Load(DumpConfig(found))) == DumpConfig(found));
}

TEST_CASE("DumpConfig masks secrets", "[config]") {
  CleanEnv env;
  Config c = NonDefaultConfig();
  c.redis.password = "hunter2";
  c.kafka.properties["sasl.password"] = "kafka-pw";
  c.kafka.properties["ssl.key.password"] = "key-pw";
  c.kafka.properties["sasl.oauthbearer.client.SECRET"] = "oauth-value";
  c.kafka.properties["sasl.username"] = "alice";
  const std::string dump = DumpConfig(c);
  INFO(dump);
  for (const char* secret : {"hunter2", "kafka-pw", "key-pw", "oauth-value", "alice"}) {
    CHECK(dump.find(secret) == std::string::npos);
  }
  Config back = Load(dump);
  CHECK(back.redis.password == "***");
  CHECK(back.kafka.properties["sasl.password"] == "***");
  CHECK(back.kafka.properties["ssl.key.password"] == "***");
  CHECK(back.kafka.properties["sasl.oauthbearer.client.SECRET"] == "***");
  // librdkafka flags sasl.username sensitive (with SASL/PLAIN on hosted Kafka it
  // is the API key), so it is masked too; redis.username is not.
  CHECK(back.kafka.properties["sasl.username"] == "***");
  CHECK(back.redis.username == c.redis.username);

  // Equal apart from the masked values.
  back.redis.password = c.redis.password;
  for (const auto& [name, value] : c.kafka.properties) {
    if (config_internal::IsSecretPropertyName(name)) back.kafka.properties[name] = value;
  }
  CheckSameConfig(back, c);

  // An empty secret is not a secret: it stays empty, so "no password" is visible.
  CHECK(Load(DumpConfig(Config{})).redis.password.empty());
}

// Defect 8 (issue 9): only names containing "password"/"secret" were masked, so
// `config check` printed private keys (ssl.key.pem) and OAUTHBEARER configs.
TEST_CASE("DumpConfig masks librdkafka's sensitive properties and secret-like names", "[config]") {
  CleanEnv env;
  // Every property librdkafka flags _RK_SENSITIVE, plus names caught by the
  // substring rule, each with a distinct value that must not appear in the dump.
  const std::map<std::string, std::string> secrets = {
      {"ssl.key.pem", "-----BEGIN PRIVATE KEY-----MIIEvAIBADANBgkq"},
      {"ssl.key.location", "/etc/kafka/client.key"},
      {"ssl.key.password", "pem-passphrase"},
      {"ssl_key", "internal-key-object"},
      {"ssl.keystore.password", "p12-pass"},
      {"ssl.ca.pem", "-----BEGIN CERTIFICATE-----CAPEM"},
      {"sasl.username", "api-key-ABC"},
      {"sasl.password", "api-secret-XYZ"},
      {"sasl.oauthbearer.config", "principal=admin extension_token=T0KEN"},
      {"sasl.oauthbearer.client.secret", "oidc-client-s3cr3t"},
      {"sasl.oauthbearer.assertion.private.key.pem", "-----BEGIN PRIVATE KEY-----JWTKEY"},
      {"sasl.oauthbearer.assertion.private.key.passphrase", "jwt-key-pass"},
      {"sasl.jaas.config", "PlainLoginModule required password=\"jaas-pw\";"},
      {"SSL.Key.PEM", "upper-case-name"},
      {"some.future.access.token", "bearer-abc"},
      {"vendor.api.credentials", "cred-value"},
      {"vendor.private.key", "private-value"},
  };
  // Public or non-secret: shown, so an operator can see what is configured.
  const std::map<std::string, std::string> shown = {
      {"ssl.certificate.pem", "-----BEGIN CERTIFICATE-----PUBLICCERT"},
      {"ssl.certificate.location", "/etc/kafka/client.crt"},
      {"ssl.ca.location", "/etc/ssl/certs"},
      {"ssl.keystore.location", "/etc/kafka/client.p12"},
      {"sasl.kerberos.keytab", "/etc/security/kafka.keytab"},
      {"sasl.kerberos.principal", "kafka/host@REALM"},
      {"sasl.mechanism", "OAUTHBEARER"},
      {"sasl.oauthbearer.client.id", "client-id-123"},
      {"sasl.oauthbearer.token.endpoint.url", "https://idp.example/oauth2/token"},
      {"security.protocol", "SASL_SSL"},
  };
  Config c = NonDefaultConfig();
  for (const auto& [name, value] : secrets) c.kafka.properties[name] = value;
  for (const auto& [name, value] : shown) c.kafka.properties[name] = value;
  const std::string dump = DumpConfig(c);
  INFO(dump);
  Config back = Load(dump);
  for (const auto& [name, value] : secrets) {
    INFO("secret property " << name);
    CHECK(dump.find(value) == std::string::npos);
    CHECK(back.kafka.properties[name] == "***");
    CHECK(config_internal::IsSecretPropertyName(name));
  }
  for (const auto& [name, value] : shown) {
    INFO("public property " << name);
    CHECK(back.kafka.properties[name] == value);
    CHECK_FALSE(config_internal::IsSecretPropertyName(name));
  }
}

TEST_CASE("the shipped config file loads to the defaults and has every key", "[config]") {
  CleanEnv env;
  const std::string path = EF_SOURCE_DIR "/config/exposure-filter.yaml";
  StatusOr<Config> c = LoadConfig(path, {});
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CheckSameConfig(*c, Config{});

  YAML::Node root = YAML::LoadFile(path);
  const std::string docs = ReadFile(EF_SOURCE_DIR "/docs/CONFIG.md");
  for (const auto& field : config_internal::Fields()) {
    INFO(field.key);
    if (field.canonical) {
      // A block's keys (redis.tls.enabled) are nested under its name (tls:).
      YAML::Node node = root[std::string(field.section())];
      std::string_view name = field.name();
      for (size_t dot; (dot = name.find('.')) != std::string_view::npos;) {
        node.reset(node[std::string(name.substr(0, dot))]);  // (= would assign into the tree)
        name.remove_prefix(dot + 1);
      }
      CHECK(node[std::string(name)].IsDefined());
    }
    CHECK(docs.find("`" + field.key + "`") != std::string::npos);
  }
}

TEST_CASE("field table helpers", "[config]") {
  using config_internal::FieldType;
  using config_internal::ParseNode;
  int line = -1;
  for (const char* t : {"true", "True", "yes", "on"}) {
    auto v = ParseNode(FieldType::kBool, YAML::Load(t), &line);
    REQUIRE(v.ok());
    CHECK(std::get<bool>(*v));
  }
  auto f = ParseNode(FieldType::kBool, YAML::Load("off"), &line);
  REQUIRE(f.ok());
  CHECK_FALSE(std::get<bool>(*f));
  CHECK(ParseNode(FieldType::kBool, YAML::Load("2"), &line).status().message() ==
        "expected true or false, got '2'");
  CHECK(ParseNode(FieldType::kInt, YAML::Load("99999999999999999999"), &line).status().message() ==
        "expected an integer, got '99999999999999999999'");

  CHECK(config_internal::EditDistance("kitten", "sitting") == 3);
  CHECK(config_internal::SuggestKey("redis.adress") == "redis.address");
  CHECK(config_internal::SuggestKey("xyz.abc").empty());
  std::string entry;
  CHECK(config_internal::FindMapEntry("kafka.properties.a.b", &entry) != nullptr);
  CHECK(entry == "a.b");
  CHECK(config_internal::FindMapEntry("kafka.properties", &entry) == nullptr);
}

// Found by the config fuzzer (fuzz/findings/, docs/FUZZING.md).
TEST_CASE("config: a stray comma is an error, not a hang (yaml-cpp 0.7 LoadAll loop)",
          "[config][fuzz]") {
  // Before the fix: LoadAll never returned (memory growing); ctest timed out.
  CHECK_THAT(LoadError("\n,"), Catch::Contains("invalid YAML"));
  CHECK(LoadConfigFromString("kafka:\n  group_id: g\n---\n---\n", "t.yaml", {}).ok());
}

TEST_CASE("config: errors quote raw input on one line, escaped", "[config][fuzz]") {
  // Before the fix the message held the raw newline and the control byte.
  const std::string err = LoadError("just a\x01 scalar\n");
  CHECK(err.find('\n') == std::string::npos);
  CHECK(err.find('\x01') == std::string::npos);
  CHECK_THAT(err, Catch::Contains("\\x01"));
  const std::string set = OverrideError("filter.fpr=0.5\nx");
  CHECK(set.find('\n') == std::string::npos);
}

TEST_CASE("config: a kafka property name must be a plain dotted name", "[config][fuzz]") {
  // Before the fix any bytes were accepted, and `config check` printed a config
  // that did not load back.
  CHECK_THAT(LoadError("kafka:\n  properties:\n    \"a\\x01b\": x\n"),
             Catch::Contains("expected 1 to 255 letters, digits"));
  CHECK_THAT(OverrideError("kafka.properties.bad name=1"),
             Catch::Contains("expected 1 to 255 letters, digits"));
  CHECK(LoadConfigFromString("kafka:\n  properties:\n    sasl.mechanism: PLAIN\n    ssl_key: x\n",
                             "t.yaml", {})
            .ok());
}

}  // namespace ef

namespace ef {
namespace {

std::vector<std::string> Warnings(const Config& c, std::vector<std::string> env) {
  std::vector<char*> environ_like;
  for (std::string& e : env) environ_like.push_back(e.data());
  environ_like.push_back(nullptr);
  return ConfigWarnings(c, environ_like.data());
}

TEST_CASE("config warnings: an unknown EXPOSURE_FILTER_ variable is named with a suggestion",
          "[config]") {
  CleanEnv env;
  const Config c;
  const auto w = Warnings(c, {"EXPOSURE_FILTER_REDIS_ADRESS=foo", "PATH=/bin",
                              "EXPOSURE_FILTER_REDIS_PASSWORD=x", "EXPOSURE_FILTER_EMPTY="});
  REQUIRE(w.size() == 1);
  CHECK(w[0] ==
        "environment: EXPOSURE_FILTER_REDIS_ADRESS is not a variable exposure-filter reads; it "
        "is ignored (did you mean EXPOSURE_FILTER_REDIS_ADDRESS?); the variables are listed in "
        "docs/CONFIG.md#environment");
  const auto far = Warnings(c, {"EXPOSURE_FILTER_LOG_LEVEL=debug"});
  REQUIRE(far.size() == 1);
  CHECK_THAT(far[0], Catch::StartsWith("environment: EXPOSURE_FILTER_LOG_LEVEL is not a variable"));
  CHECK(far[0].find("did you mean") == std::string::npos);
  // Every variable the loaders read is known.
  for (const EnvironmentVariable& v : EnvironmentVariables())
    CHECK(Warnings(c, {std::string(v.name) + "=x"}).empty());
}

TEST_CASE("config warnings: SASL settings without a SASL security.protocol", "[config]") {
  CleanEnv env;
  Config c;
  CHECK(Warnings(c, {}).empty());
  c.kafka.properties["sasl.password"] = "pw";
  c.kafka.properties["sasl.mechanism"] = "PLAIN";
  auto w = Warnings(c, {});
  REQUIRE(w.size() == 1);
  CHECK(w[0] ==
        "kafka.properties: sasl.mechanism, sasl.password set but security.protocol is unset "
        "(plaintext): Kafka is reached without SASL; set kafka.properties.security.protocol to "
        "SASL_SSL (or SASL_PLAINTEXT), e.g. EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL");
  c.kafka.properties["security.protocol"] = "ssl";
  w = Warnings(c, {});
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("security.protocol is 'ssl'") != std::string::npos);
  for (const char* ok : {"SASL_SSL", "sasl_plaintext"}) {
    c.kafka.properties["security.protocol"] = ok;
    CHECK(Warnings(c, {}).empty());
  }
  // An empty SASL entry (a Secret key left blank) sets nothing.
  Config blank;
  blank.kafka.properties["sasl.username"] = "";
  CHECK(Warnings(blank, {}).empty());
}

TEST_CASE("changed keys: the keys whose values differ in table order", "[config]") {
  Config a;
  Config b;
  CHECK(ChangedKeys(a, b).empty());
  b.log.level = "debug";
  b.filter.fpr = 0.002;
  b.kafka.properties["fetch.wait.max.ms"] = "10";
  CHECK(ChangedKeys(a, b) ==
        std::vector<std::string>{"kafka.properties.fetch.wait.max.ms", "filter.fpr", "log.level"});
}

}  // namespace
}  // namespace ef

namespace ef {
namespace {

TEST_CASE("content.listen needs a port of its own", "[config]") {
  CleanEnv env;
  CHECK(Load("").content.listen == "127.0.0.1:9466");
  CHECK(LoadError("content:\n  listen: 0.0.0.0:9464\n") ==
        "content.listen (0.0.0.0:9464) must use another port than metrics.listen "
        "(127.0.0.1:9464): `content` runs beside run and serve with the same config");
  CHECK(LoadError("content:\n  listen: 127.0.0.1:8090\n") ==
        "content.listen (127.0.0.1:8090) must use another port than serve.listen "
        "(127.0.0.1:8090): `content` runs beside run and serve with the same config");
  // "" (off) never clashes.
  CHECK(Load("content:\n  listen: \"\"\nmetrics:\n  listen: \"\"\n").content.listen.empty());
  CHECK(Load("content:\n  listen: \"\"\n").content.listen.empty());
}

}  // namespace
}  // namespace ef
