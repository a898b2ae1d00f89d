#include "config/fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/duration.h"
#include "common/printable.h"

namespace ef::config_internal {
namespace {

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

using Rule = std::function<Status(const std::string&)>;

// Quoted for one-line error messages: control bytes escaped, long text cut.
std::string Quote(std::string_view s) { return "'" + Printable(s, 200) + "'"; }

// ---- scalar parsers: strict, so that "1.5" is not silently an int 1 ----------

bool ParseInt(std::string_view text, int64_t* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(*out);
}

bool ParseBool(std::string_view text, bool* out) {
  std::string t = ToLower(text);
  if (t == "true" || t == "yes" || t == "on") {
    *out = true;
    return true;
  }
  if (t == "false" || t == "no" || t == "off") {
    *out = false;
    return true;
  }
  return false;
}

// The shortest text that reads back as v, in %g's style: 0.0001, not 1e-04.
std::string FormatDouble(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return ec == std::errc() ? std::string(buf, ptr) : std::to_string(v);
}

// ---- string rules --------------------------------------------------------------

Status AnyString(const std::string&) { return Status::Ok(); }

Status NonEmpty(const std::string& s) {
  return s.empty() ? InvalidArgument("must not be empty") : Status::Ok();
}

Rule OneOf(std::vector<std::string> allowed) {
  return [allowed = std::move(allowed)](const std::string& s) {
    if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return Status::Ok();
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return InvalidArgument("must be one of " + list + ", got " + Quote(s));
  };
}

Rule HostPort(bool allow_empty) {
  return [allow_empty](const std::string& s) {
    if (s.empty() && allow_empty) return Status::Ok();
    const std::string want = allow_empty ? "\"\" (off) or host:port" : "host:port";
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("must be " + want + ", got " + Quote(s));
    }
    std::string_view host(s.data(), colon);
    bool bracketed = host.front() == '[';
    if (bracketed ? (host.size() < 3 || host.back() != ']')
                  : host.find(':') != std::string_view::npos) {
      return InvalidArgument("must be " + want + " (IPv6 as [addr]:port), got " + Quote(s));
    }
    int64_t port = 0;
    std::string_view port_text(s.data() + colon + 1, s.size() - colon - 1);
    bool digits = !port_text.empty() && std::all_of(port_text.begin(), port_text.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !ParseInt(port_text, &port) || port < 1 || port > 65535) {
      return InvalidArgument("port must be in [1, 65535], got " + Quote(s));
    }
    return Status::Ok();
  };
}

// One entry of redis.address: host:port, or rediss://host:port (TLS).
Status RedisEntry(const std::string& s) {
  constexpr std::string_view kTls = "rediss://";
  if (s.compare(0, kTls.size(), kTls) == 0) {
    Status st = HostPort(false)(s.substr(kTls.size()));
    if (!st.ok()) return InvalidArgument("after rediss://: " + std::string(st.message()));
    return st;
  }
  if (s.find("://") != std::string::npos)
    return InvalidArgument("must be host:port or rediss://host:port (TLS), got " + Quote(s));
  return HostPort(false)(s);
}

// redis.address: one entry, or a comma-separated list of them (Redis Cluster
// seed nodes; spaces around entries ignored).
Status HostPortList(const std::string& s) {
  if (s.find(',') == std::string::npos) return RedisEntry(s);
  size_t start = 0, n = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    std::string entry =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.erase(entry.begin());
    while (!entry.empty() && entry.back() == ' ') entry.pop_back();
    ++n;
    if (Status st = RedisEntry(entry); !st.ok())
      return InvalidArgument("entry " + std::to_string(n) + " of the list: " + st.message());
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

// redis.tls.server_name: "" or a host name / IP address (no spaces, no port).
Status ServerName(const std::string& s) {
  const bool bad = std::any_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '/' || IsControlByte(static_cast<unsigned char>(c));
  });
  if (bad || s.size() > 253)
    return InvalidArgument("must be a host name or IP address (at most 253 characters), got " +
                           Quote(s));
  return Status::Ok();
}

// The first '{' of a key starts the Redis Cluster hash tag, so braces in the
// prefix would move users' keys to the wrong slot.
Status KeyPrefixRule(const std::string& s) {
  if (s.find_first_of("{}") != std::string::npos) {
    return InvalidArgument(
        "must not contain '{' or '}' (they would change the Redis Cluster "
        "hash tag), got " +
        Quote(s));
  }
  return Status::Ok();
}

// Bucket keys are formatted YYYYMMDD or YYYYMMDDHH and aligned to the epoch, so
// a bucket must tile days exactly or be made of whole days.
Status BucketRule(int64_t ms) {
  bool whole_days = ms % kDay == 0;
  bool hours_dividing_day = ms % kHour == 0 && kDay % ms == 0;
  if (ms > 0 && (whole_days || hours_dividing_day)) return Status::Ok();
  return InvalidArgument(
      "must be a whole number of hours that divides a day (1h, 2h, 3h, 4h, 6h, 8h, 12h) or a "
      "whole number of days, got " +
      FormatDurationMs(ms));
}

// ---- row builders ----------------------------------------------------------------

template <typename S, typename M>
Field Row(std::string key, FieldType type, S Config::*section, M S::*member) {
  Field f;
  f.key = std::move(key);
  f.type = type;
  f.get = [section, member](const Config& c) -> Value {
    if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, StringList> ||
                  std::is_same_v<M, StringMap> || std::is_same_v<M, double> ||
                  std::is_same_v<M, bool>) {
      return (c.*section).*member;
    } else {
      return static_cast<int64_t>((c.*section).*member);
    }
  };
  f.set = [section, member](const Value& v, Config* c) {
    if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, StringList> ||
                  std::is_same_v<M, StringMap> || std::is_same_v<M, double> ||
                  std::is_same_v<M, bool>) {
      (c->*section).*member = std::get<M>(v);
    } else {
      (c->*section).*member = static_cast<M>(std::get<int64_t>(v));
    }
  };
  return f;
}

template <typename S>
Field StringField(std::string key, S Config::*section, std::string S::*member, Rule rule) {
  Field f = Row(std::move(key), FieldType::kString, section, member);
  f.check = [rule = std::move(rule)](const Value& v) { return rule(std::get<std::string>(v)); };
  return f;
}

template <typename S, typename M>
Field IntField(std::string key, S Config::*section, M S::*member, int64_t min, int64_t max) {
  Field f = Row(std::move(key), FieldType::kInt, section, member);
  f.check = [min, max](const Value& v) {
    int64_t x = std::get<int64_t>(v);
    if (x >= min && x <= max) return Status::Ok();
    return InvalidArgument("must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                           "], got " + std::to_string(x));
  };
  return f;
}

template <typename S>
Field DoubleField(std::string key, S Config::*section, double S::*member, double min, double max,
                  bool open_min, bool open_max) {
  Field f = Row(std::move(key), FieldType::kDouble, section, member);
  f.check = [=](const Value& v) {
    double x = std::get<double>(v);
    bool ok = (open_min ? x > min : x >= min) && (open_max ? x < max : x <= max);
    if (ok) return Status::Ok();
    return InvalidArgument(std::string("must be in ") + (open_min ? "(" : "[") + FormatDouble(min) +
                           ", " + FormatDouble(max) + (open_max ? ")" : "]") + ", got " +
                           FormatDouble(x));
  };
  return f;
}

// `unit_ms` is what one unit of the member is: 1 for *_ms members, 1000 for seconds.
template <typename S>
Field DurationField(std::string key, S Config::*section, int64_t S::*member, int64_t unit_ms,
                    int64_t min_ms, int64_t max_ms,
                    std::function<Status(int64_t)> extra = nullptr) {
  Field f;
  f.key = std::move(key);
  f.type = FieldType::kDuration;
  f.get = [=](const Config& c) -> Value { return (c.*section).*member * unit_ms; };
  f.set = [=](const Value& v, Config* c) {
    (c->*section).*member = std::get<int64_t>(v) / unit_ms;
  };
  f.check = [=](const Value& v) {
    int64_t ms = std::get<int64_t>(v);
    if (ms < min_ms || ms > max_ms) {
      return InvalidArgument("must be in [" + FormatDurationMs(min_ms) + ", " +
                             FormatDurationMs(max_ms) + "], got " + FormatDurationMs(ms));
    }
    if (ms % unit_ms != 0) {
      return InvalidArgument("must be a whole number of seconds, got " + FormatDurationMs(ms));
    }
    return extra ? extra(ms) : Status::Ok();
  };
  return f;
}

std::vector<Field> BuildFields() {
  using C = Config;
  std::vector<Field> t;

  // kafka
  t.push_back(
      StringField("kafka.bootstrap_servers", &C::kafka, &KafkaConfig::bootstrap_servers, NonEmpty));
  {
    Field f = Row("kafka.topics", FieldType::kStringList, &C::kafka, &KafkaConfig::topics);
    f.check = [](const Value& v) {
      const auto& topics = std::get<StringList>(v);
      if (topics.empty()) return InvalidArgument("must name at least one topic");
      for (const auto& topic : topics) {
        if (topic.empty()) return InvalidArgument("topic names must not be empty");
      }
      return Status::Ok();
    };
    t.push_back(std::move(f));
  }
  {
    // Load-only alias: one topic as a scalar.
    Field f;
    f.key = "kafka.topic";
    f.type = FieldType::kString;
    f.get = [](const Config& c) -> Value {
      return c.kafka.topics.empty() ? std::string() : c.kafka.topics.front();
    };
    f.set = [](const Value& v, Config* c) { c->kafka.topics = {std::get<std::string>(v)}; };
    f.check = [](const Value& v) { return NonEmpty(std::get<std::string>(v)); };
    f.canonical = false;
    t.push_back(std::move(f));
  }
  t.push_back(StringField("kafka.group_id", &C::kafka, &KafkaConfig::group_id, NonEmpty));
  t.push_back(StringField("kafka.auto_offset_reset", &C::kafka, &KafkaConfig::auto_offset_reset,
                          OneOf({"earliest", "latest"})));
  {
    Field f = Row("kafka.properties", FieldType::kStringMap, &C::kafka, &KafkaConfig::properties);
    f.check = [](const Value& v) {
      for (const auto& [name, value] : std::get<StringMap>(v)) {
        if (name.empty()) return InvalidArgument("property names must not be empty");
        // librdkafka's names are dotted words; anything else is a typo or
        // garbage, and would make `config check` print a config that does
        // not load back.
        const bool plain = name.size() <= 255 && std::all_of(name.begin(), name.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                    c == '_' || c == '-';
                           });
        if (!plain) {
          return InvalidArgument("property name " + Quote(name) +
                                 ": expected 1 to 255 letters, digits, '.', '_' or '-'");
        }
      }
      return Status::Ok();
    };
    f.secret_entry = IsSecretPropertyName;
    t.push_back(std::move(f));
  }
  t.push_back(StringField("kafka.dead_letter_topic", &C::kafka, &KafkaConfig::dead_letter_topic,
                          AnyString));
  t.push_back(StringField("kafka.dead_letter_on_failure", &C::kafka,
                          &KafkaConfig::dead_letter_on_failure, OneOf({"retry", "drop"})));
  t.push_back(IntField("kafka.dead_letter_max_pending_bytes", &C::kafka,
                       &KafkaConfig::dead_letter_max_pending_bytes, 1024, int64_t{1} << 40));

  // redis
  t.push_back(StringField("redis.address", &C::redis, &RedisConfig::address, HostPortList));
  t.push_back(StringField("redis.cluster", &C::redis, &RedisConfig::cluster,
                          OneOf({"auto", "true", "false"})));
  t.push_back(StringField("redis.username", &C::redis, &RedisConfig::username, AnyString));
  {
    Field f = StringField("redis.password", &C::redis, &RedisConfig::password, AnyString);
    f.secret = true;
    t.push_back(std::move(f));
  }
  t.push_back(
      IntField("redis.db", &C::redis, &RedisConfig::db, 0, std::numeric_limits<int>::max()));
  t.push_back(DurationField("redis.connect_timeout", &C::redis, &RedisConfig::connect_timeout_ms, 1,
                            1, 10 * kMinute));
  t.push_back(DurationField("redis.command_timeout", &C::redis, &RedisConfig::command_timeout_ms, 1,
                            1, 10 * kMinute));
  t.push_back(DurationField("redis.retry_backoff_min", &C::redis,
                            &RedisConfig::retry_backoff_min_ms, 1, 1, 10 * kMinute));
  t.push_back(DurationField("redis.retry_backoff_max", &C::redis,
                            &RedisConfig::retry_backoff_max_ms, 1, 1, 10 * kMinute));
  t.push_back(StringField("redis.write_mode", &C::redis, &RedisConfig::write_mode,
                          OneOf({"auto", "module", "bitfield", "bitop", "setbit"})));
  t.push_back(
      IntField("redis.bitop_threshold", &C::redis, &RedisConfig::bitop_threshold, 0, 1'000'000));
  t.push_back(IntField("redis.expire_cache_keys", &C::redis, &RedisConfig::expire_cache_keys, 0,
                       1'000'000'000));
  t.push_back(DurationField("redis.expire_refresh", &C::redis, &RedisConfig::expire_refresh_ms, 1,
                            kSecond, kDay));
  t.push_back(IntField("redis.wait_replicas", &C::redis, &RedisConfig::wait_replicas, 0, 16));
  t.push_back(DurationField("redis.wait_timeout", &C::redis, &RedisConfig::wait_timeout_ms, 1, 1,
                            10 * kMinute));
  {
    // Load-only alias: `--set redis.tls=true`, `tls: true` under redis:.
    Field f = Row("redis.tls", FieldType::kBool, &C::redis, &RedisConfig::tls_enabled);
    f.check = [](const Value&) { return Status::Ok(); };
    f.canonical = false;
    t.push_back(std::move(f));
  }
  {
    Field f = Row("redis.tls.enabled", FieldType::kBool, &C::redis, &RedisConfig::tls_enabled);
    f.check = [](const Value&) { return Status::Ok(); };
    t.push_back(std::move(f));
  }
  t.push_back(StringField("redis.tls.ca_file", &C::redis, &RedisConfig::tls_ca_file, AnyString));
  t.push_back(StringField("redis.tls.ca_dir", &C::redis, &RedisConfig::tls_ca_dir, AnyString));
  t.push_back(
      StringField("redis.tls.cert_file", &C::redis, &RedisConfig::tls_cert_file, AnyString));
  t.push_back(StringField("redis.tls.key_file", &C::redis, &RedisConfig::tls_key_file, AnyString));
  t.push_back(
      StringField("redis.tls.server_name", &C::redis, &RedisConfig::tls_server_name, ServerName));
  {
    Field f = Row("redis.tls.verify", FieldType::kBool, &C::redis, &RedisConfig::tls_verify);
    f.check = [](const Value&) { return Status::Ok(); };
    t.push_back(std::move(f));
  }

  // filter
  t.push_back(
      StringField("filter.key_prefix", &C::filter, &FilterConfig::key_prefix, KeyPrefixRule));
  t.push_back(DurationField("filter.window", &C::filter, &FilterConfig::window_seconds, kSecond,
                            kHour, 3650 * kDay));
  t.push_back(DurationField("filter.bucket", &C::filter, &FilterConfig::bucket_seconds, kSecond,
                            kHour, 3650 * kDay, BucketRule));
  t.push_back(IntField("filter.items_per_bucket", &C::filter, &FilterConfig::items_per_bucket, 1,
                       1'000'000'000));
  t.push_back(DoubleField("filter.fpr", &C::filter, &FilterConfig::fpr, 0, 1, true, true));
  t.push_back(IntField("filter.seed", &C::filter, &FilterConfig::seed, 0,
                       std::numeric_limits<uint32_t>::max()));
  t.push_back(IntField("filter.stages", &C::filter, &FilterConfig::stages, 1, 32));
  t.push_back(IntField("filter.growth", &C::filter, &FilterConfig::growth, 1, 16));
  t.push_back(IntField("filter.k_step", &C::filter, &FilterConfig::k_step, 0, 64));
  t.push_back(IntField("filter.layout_version", &C::filter, &FilterConfig::layout_version, 2, 4));
  {
    Field f =
        Row("filter.near_duplicates", FieldType::kBool, &C::filter, &FilterConfig::near_duplicates);
    f.check = [](const Value&) { return Status::Ok(); };
    t.push_back(std::move(f));
  }

  // events
  t.push_back(StringField("events.format", &C::events, &EventsConfig::format, OneOf({"json"})));
  t.push_back(StringField("events.user_field", &C::events, &EventsConfig::user_field, NonEmpty));
  t.push_back(StringField("events.item_field", &C::events, &EventsConfig::item_field, NonEmpty));
  t.push_back(StringField("events.items_field", &C::events, &EventsConfig::items_field, NonEmpty));
  t.push_back(StringField("events.time_field", &C::events, &EventsConfig::time_field, NonEmpty));
  t.push_back(
      StringField("events.cluster_field", &C::events, &EventsConfig::cluster_field, NonEmpty));
  t.push_back(
      StringField("events.simhash_field", &C::events, &EventsConfig::simhash_field, NonEmpty));
  t.push_back(
      StringField("events.time_unit", &C::events, &EventsConfig::time_unit, OneOf({"ms", "s"})));
  t.push_back(IntField("events.max_id_bytes", &C::events, &EventsConfig::max_id_bytes, 1, 1 << 20));
  t.push_back(IntField("events.max_items_per_event", &C::events, &EventsConfig::max_items_per_event,
                       1, 10'000'000));
  t.push_back(DurationField("events.max_future", &C::events, &EventsConfig::max_future_ms, 1, 0,
                            3650 * kDay));

  // pipeline
  t.push_back(IntField("pipeline.batch_max_events", &C::pipeline, &PipelineConfig::batch_max_events,
                       1, 10'000'000));
  t.push_back(IntField("pipeline.batch_max_positions", &C::pipeline,
                       &PipelineConfig::batch_max_positions, 1000, 1'000'000'000));
  t.push_back(DurationField("pipeline.batch_max_wait", &C::pipeline,
                            &PipelineConfig::batch_max_wait_ms, 1, 0, 10 * kMinute));
  t.push_back(DurationField("pipeline.commit_interval", &C::pipeline,
                            &PipelineConfig::commit_interval_ms, 1, 1, kHour));

  // metrics
  t.push_back(StringField("metrics.listen", &C::metrics, &MetricsConfig::listen, HostPort(true)));
  t.push_back(DurationField("metrics.refresh_interval", &C::metrics,
                            &MetricsConfig::refresh_interval_ms, 1, 10, kHour));
  t.push_back(
      IntField("metrics.status_window", &C::metrics, &MetricsConfig::status_window, 2, 1000));
  t.push_back(DurationField("metrics.freshness_target", &C::metrics,
                            &MetricsConfig::freshness_target_ms, 1, 1, kDay));
  t.push_back(DurationField("metrics.freshness_limit", &C::metrics,
                            &MetricsConfig::freshness_limit_ms, 1, 1, kDay));
  t.push_back(DurationField("metrics.unassigned_grace", &C::metrics,
                            &MetricsConfig::unassigned_grace_ms, 1, 1000, kDay));
  // serve
  t.push_back(StringField("serve.listen", &C::serve, &ServeConfig::listen, HostPort(false)));
  t.push_back(DurationField("serve.served_ttl", &C::serve, &ServeConfig::served_ttl_ms, 1, kSecond,
                            7 * kDay));
  t.push_back(
      IntField("serve.served_items", &C::serve, &ServeConfig::served_items, 1, int64_t{1} << 20));
  t.push_back(
      DoubleField("serve.served_fpr", &C::serve, &ServeConfig::served_fpr, 0, 1, true, true));
  t.push_back(IntField("serve.max_items", &C::serve, &ServeConfig::max_items, 1, 10'000'000));
  t.push_back(IntField("serve.max_body_bytes", &C::serve, &ServeConfig::max_body_bytes, 1024,
                       int64_t{1} << 30));
  t.push_back(DurationField("serve.timeout", &C::serve, &ServeConfig::timeout_ms, 1, 1, kMinute));
  t.push_back(IntField("serve.threads", &C::serve, &ServeConfig::threads, 1, 1024));
  t.push_back(DurationField("serve.idle_timeout", &C::serve, &ServeConfig::idle_timeout_ms, 1,
                            kSecond, kDay));
  t.push_back(IntField("serve.mark_queue", &C::serve, &ServeConfig::mark_queue, 0, 10'000'000));
  t.push_back(IntField("serve.content_cache_bytes", &C::serve, &ServeConfig::content_cache_bytes, 0,
                       int64_t{1} << 40));
  {
    Field f = Row("serve.fail_closed", FieldType::kBool, &C::serve, &ServeConfig::fail_closed);
    f.check = [](const Value&) { return Status::Ok(); };
    t.push_back(std::move(f));
  }

  // content
  t.push_back(IntField("content.max_distance", &C::content, &ContentConfig::max_distance, 0, 15));
  t.push_back(IntField("content.index_blocks", &C::content, &ContentConfig::index_blocks, 1, 16));
  t.push_back(
      IntField("content.index_group_bits", &C::content, &ContentConfig::index_group_bits, 0, 24));
  t.push_back(DurationField("content.retention", &C::content, &ContentConfig::retention_ms, 1,
                            kHour, 3650 * kDay));
  t.push_back(StringField("content.topic", &C::content, &ContentConfig::topic, NonEmpty));
  t.push_back(StringField("content.group_id", &C::content, &ContentConfig::group_id, NonEmpty));
  t.push_back(
      IntField("content.cache_items", &C::content, &ContentConfig::cache_items, 0, 1'000'000'000));
  t.push_back(IntField("content.cache_bytes", &C::content, &ContentConfig::cache_bytes, 0,
                       int64_t{1} << 40));
  t.push_back(StringField("content.listen", &C::content, &ContentConfig::listen, HostPort(true)));

  t.push_back(StringField("log.level", &C::log, &LogConfig::level,
                          OneOf({"trace", "debug", "info", "warn", "error"})));
  t.push_back(StringField("log.format", &C::log, &LogConfig::format, OneOf({"text", "json"})));
  return t;
}

Status WrongType(FieldType type, const YAML::Node& node) {
  std::string want;
  switch (type) {
    case FieldType::kString:
      want = "a string";
      break;
    case FieldType::kInt:
      want = "an integer";
      break;
    case FieldType::kDouble:
      want = "a number";
      break;
    case FieldType::kBool:
      want = "true or false";
      break;
    case FieldType::kDuration:
      want = "a duration such as 500ms, 10s, 5m, 1h or 30d";
      break;
    case FieldType::kStringList:
      want = "a list of strings such as [a, b]";
      break;
    case FieldType::kStringMap:
      want = "a map of strings";
      break;
  }
  return InvalidArgument("expected " + want + ", got " + DescribeNode(node));
}

}  // namespace

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = BuildFields();
  return fields;
}

const std::vector<std::string>& Sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out;
    for (const Field& f : Fields()) {
      if (std::find(out.begin(), out.end(), f.section()) == out.end()) {
        out.emplace_back(f.section());
      }
    }
    return out;
  }();
  return sections;
}

const Field* FindField(std::string_view key) {
  for (const Field& f : Fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

const Field* FindMapEntry(std::string_view key, std::string* entry) {
  for (const Field& f : Fields()) {
    if (f.type != FieldType::kStringMap) continue;
    if (key.size() > f.key.size() + 1 && key.substr(0, f.key.size()) == f.key &&
        key[f.key.size()] == '.') {
      *entry = std::string(key.substr(f.key.size() + 1));
      return &f;
    }
  }
  return nullptr;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Closest(std::string_view unknown, const std::vector<std::string>& candidates,
                    size_t limit) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    const size_t d = EditDistance(unknown, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best_distance > 0 && best_distance <= limit ? best : "";
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string SuggestKey(std::string_view unknown) {
  // Section names are candidates for a top-level key, full keys for the rest.
  std::vector<std::string> candidates;
  if (unknown.find('.') == std::string_view::npos) {
    candidates = Sections();
  } else {
    for (const Field& f : Fields()) candidates.push_back(f.key);
  }

  // Typos only: a third of the key may differ, at least 2 characters.
  if (std::string c = Closest(unknown, candidates, std::max<size_t>(2, unknown.size() / 3));
      !c.empty())
    return c;

  // Right name, wrong section (or no section): "redis.key_prefix", "fpr".
  std::string_view name = unknown.substr(unknown.find('.') + 1);
  for (const Field& f : Fields()) {
    if (f.name() == name && f.key != unknown) return f.key;
  }
  return "";
}

std::string DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
  }
  return "?";
}

StatusOr<Value> ParseNode(FieldType type, const YAML::Node& node, int* error_line) {
  *error_line = -1;
  const bool is_null = node.IsNull() || !node.IsDefined();
  switch (type) {
    case FieldType::kString:
      if (is_null) return Value(std::string());
      if (!node.IsScalar()) return WrongType(type, node);
      return Value(node.Scalar());
    case FieldType::kInt: {
      int64_t v = 0;
      if (!node.IsScalar() || !ParseInt(node.Scalar(), &v)) return WrongType(type, node);
      return Value(v);
    }
    case FieldType::kDouble: {
      double v = 0;
      if (!node.IsScalar() || !ParseDouble(node.Scalar(), &v)) return WrongType(type, node);
      return Value(v);
    }
    case FieldType::kBool: {
      bool v = false;
      if (!node.IsScalar() || !ParseBool(node.Scalar(), &v)) return WrongType(type, node);
      return Value(v);
    }
    case FieldType::kDuration: {
      if (!node.IsScalar()) return WrongType(type, node);
      // ParseDurationMs names the text and what is wrong with it (unit, sign, size).
      StatusOr<int64_t> ms = ParseDurationMs(node.Scalar());
      if (!ms.ok()) return ms.status();
      return Value(*ms);
    }
    case FieldType::kStringList: {
      if (is_null) return Value(StringList());
      if (!node.IsSequence()) return WrongType(type, node);
      StringList out;
      for (size_t i = 0; i < node.size(); ++i) {
        const YAML::Node item = node[i];
        if (item.IsNull()) {
          out.emplace_back();
        } else if (item.IsScalar()) {
          out.push_back(item.Scalar());
        } else {
          *error_line = item.Mark().line;
          return InvalidArgument("item " + std::to_string(i + 1) + ": expected a string, got " +
                                 DescribeNode(item));
        }
      }
      return Value(std::move(out));
    }
    case FieldType::kStringMap: {
      if (is_null) return Value(StringMap());
      if (!node.IsMap()) return WrongType(type, node);
      StringMap out;
      for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node k = it->first;
        const YAML::Node v = it->second;
        if (!k.IsScalar()) {
          *error_line = k.Mark().line;
          return InvalidArgument("expected a name, got " + DescribeNode(k));
        }
        if (out.count(k.Scalar()) != 0) {
          *error_line = k.Mark().line;
          return InvalidArgument("duplicate entry " + Quote(k.Scalar()));
        }
        if (v.IsNull()) {
          out[k.Scalar()] = "";
        } else if (v.IsScalar()) {
          out[k.Scalar()] = v.Scalar();
        } else {
          *error_line = k.Mark().line;
          return InvalidArgument("entry " + Quote(k.Scalar()) + ": expected a string, got " +
                                 DescribeNode(v) +
                                 " (write dotted names, e.g. sasl.mechanism: " + "PLAIN)");
        }
      }
      return Value(std::move(out));
    }
  }
  return Internal("unknown field type");
}

std::string FormatValue(FieldType type, const Value& value) {
  auto flow = [](const auto& emit) {
    YAML::Emitter out;
    out << YAML::Flow;
    emit(out);
    return std::string(out.c_str());
  };
  switch (type) {
    case FieldType::kString:
      return std::get<std::string>(value);
    case FieldType::kInt:
      return std::to_string(std::get<int64_t>(value));
    case FieldType::kDouble:
      return FormatDouble(std::get<double>(value));
    case FieldType::kBool:
      return std::get<bool>(value) ? "true" : "false";
    case FieldType::kDuration:
      return FormatDurationMs(std::get<int64_t>(value));
    case FieldType::kStringList:
      return flow([&](YAML::Emitter& out) { out << std::get<StringList>(value); });
    case FieldType::kStringMap:
      return flow([&](YAML::Emitter& out) { out << std::get<StringMap>(value); });
  }
  return "";
}

Status SetFromNode(const Field& field, const YAML::Node& node, Config* config, int* error_line) {
  StatusOr<Value> value = ParseNode(field.type, node, error_line);
  if (!value.ok()) return value.status();
  EF_RETURN_IF_ERROR(field.check(*value));
  field.set(*value, config);
  return Status::Ok();
}

Status SetFromText(const Field& field, std::string_view text, Config* config) {
  if (field.type == FieldType::kString) {
    Value value{std::string(text)};
    EF_RETURN_IF_ERROR(field.check(value));
    field.set(value, config);
    return Status::Ok();
  }
  YAML::Node node;
  try {
    node = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("invalid YAML value " + Quote(text) + ": " + e.msg);
  }
  int error_line = -1;
  return SetFromNode(field, node, config, &error_line);
}

Status SetMapEntry(const Field& field, const std::string& entry, std::string_view text,
                   Config* config) {
  Value value = field.get(*config);
  std::get<StringMap>(value)[entry] = std::string(text);
  EF_RETURN_IF_ERROR(field.check(value));
  field.set(value, config);
  return Status::Ok();
}

bool IsSecretPropertyName(std::string_view name) {
  // librdkafka's own list: the properties its rdkafka_conf.c flags
  // _RK_SENSITIVE (checked against 2.0.2, the version we build with) and
  // redacts in its own config dumps. Later versions' sensitive properties
  // (sasl.oauthbearer.client.secret, sasl.oauthbearer.assertion.private.key.*)
  // are caught by the words below.
  static constexpr std::string_view kSensitive[] = {
      "sasl.username", "sasl.password",         "sasl.oauthbearer.config",
      "ssl.ca.pem",    "ssl.key.location",      "ssl.key.password",
      "ssl.key.pem",   "ssl.keystore.password", "ssl_key",
  };
  // Any other name that says it holds a secret: other clients' properties,
  // future librdkafka ones, and Java-style sasl.jaas.config (librdkafka rejects
  // it, but only after `config check` has printed it).
  static constexpr std::string_view kSecretWords[] = {
      "password",   "passwd",  "passphrase", "secret", "token",
      "credential", "private", "key.pem",    "jaas",
  };
  // Public despite a word above: the OIDC token endpoint is a URL an operator
  // needs to see.
  static constexpr std::string_view kPublic[] = {"sasl.oauthbearer.token.endpoint.url"};
  const std::string lower = ToLower(name);
  for (std::string_view pub : kPublic) {
    if (lower == pub) return false;
  }
  for (std::string_view sensitive : kSensitive) {
    if (lower == sensitive) return true;
  }
  for (std::string_view word : kSecretWords) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ef::config_internal
