// The daemon's configuration: plain structs with defaults. Loaded from YAML by
// LoadConfig (loader.h), overridden by --set key=value and by environment secrets.
// Key names (in comments) are part of the user-facing contract: docs/CONFIG.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ef {

struct KafkaConfig {
  std::string bootstrap_servers = "127.0.0.1:9092";  // kafka.bootstrap_servers
  std::vector<std::string> topics = {"exposures"};   // kafka.topic (scalar) or kafka.topics (list)
  std::string group_id = "exposure-filter";          // kafka.group_id
  std::string auto_offset_reset = "earliest";        // kafka.auto_offset_reset: earliest|latest
  // kafka.properties: passed to librdkafka as is (e.g. security.protocol, sasl.*),
  // applied after our defaults so they win.
  std::map<std::string, std::string> properties;
  std::string dead_letter_topic;  // kafka.dead_letter_topic: "" = off
  // kafka.dead_letter_on_failure: retry (a copy that cannot be delivered holds
  // its partition's commits back until it is) | drop (a copy that fails for
  // good, e.g. too large, is counted as dropped and its offset committed).
  std::string dead_letter_on_failure = "retry";
  // kafka.dead_letter_max_pending_bytes: memory the undelivered copies may hold;
  // at the cap, consumption pauses until copies are delivered.
  int64_t dead_letter_max_pending_bytes = 64 << 20;
};

struct RedisConfig {
  // redis.address: host:port[,host:port...]; an entry rediss://host:port turns TLS on.
  std::string address = "127.0.0.1:6379";
  std::string cluster = "auto";         // redis.cluster: auto|true|false
  std::string username;                 // redis.username ("" = default user)
  std::string password;                 // redis.password; env EXPOSURE_FILTER_REDIS_PASSWORD
  int db = 0;                           // redis.db
  int64_t connect_timeout_ms = 2000;    // redis.connect_timeout (duration)
  int64_t command_timeout_ms = 5000;    // redis.command_timeout (duration)
  int64_t retry_backoff_min_ms = 100;   // redis.retry_backoff_min (duration)
  int64_t retry_backoff_max_ms = 5000;  // redis.retry_backoff_max (duration)
  std::string write_mode = "auto";      // redis.write_mode: auto|module|bitfield|bitop|setbit
  int64_t bitop_threshold = 24;         // redis.bitop_threshold: bitop mode, positions per key
  int64_t expire_cache_keys = 1000000;  // redis.expire_cache_keys (0 = off)
  int64_t expire_refresh_ms = 600000;   // redis.expire_refresh (duration)
  int64_t wait_replicas = 0;            // redis.wait_replicas: WAIT for n replicas per write
  int64_t wait_timeout_ms = 1000;       // redis.wait_timeout (duration)
  // redis.tls.*: TLS under every Redis connection (docs/CONFIG.md "Redis over TLS").
  bool tls_enabled = false;     // redis.tls.enabled (also --set redis.tls=true)
  std::string tls_ca_file;      // redis.tls.ca_file: PEM CA bundle ("" = system store)
  std::string tls_ca_dir;       // redis.tls.ca_dir: hashed CA directory
  std::string tls_cert_file;    // redis.tls.cert_file: client certificate (mutual TLS)
  std::string tls_key_file;     // redis.tls.key_file: its key; with cert_file
  std::string tls_server_name;  // redis.tls.server_name: SNI + name verified ("" = host)
  bool tls_verify = true;       // redis.tls.verify: verify the server's certificate
};

struct FilterConfig {
  std::string key_prefix = "ef:";       // filter.key_prefix
  int64_t window_seconds = 30 * 86400;  // filter.window (duration, e.g. 30d)
  int64_t bucket_seconds = 86400;       // filter.bucket (duration: whole days or whole hours)
  int64_t items_per_bucket = 200;       // filter.items_per_bucket: expected exposures/user/bucket
  double fpr = 0.01;                    // filter.fpr: target FPR over the whole window
  uint32_t seed = 0;                    // filter.seed: MurmurHash3 seed
  // Scalable filter (layout v2, docs/FORMAT.md rule 8); stages 1 = layout v1.
  uint32_t stages = 8;  // filter.stages: stage limit
  uint32_t growth = 2;  // filter.growth: capacity factor per stage
  uint32_t k_step = 2;  // filter.k_step: extra positions per stage
  // filter.layout_version: the version a writer stores when Redis holds no meta:
  // 3 (docs/FORMAT.md rule 9), 4 (rule 11's size classes), or 2 (version 1 or
  // 2, by stages). A stored meta of any known version is used as stored.
  uint32_t layout_version = 3;
  // filter.near_duplicates: exposures also set their item's content cluster, and
  // readers test candidates' clusters (docs/CONTENT.md rule 5).
  bool near_duplicates = false;
};

struct EventsConfig {
  std::string format = "json";         // events.format: json (only json for now)
  std::string user_field = "user_id";  // events.user_field
  std::string item_field = "item_id";  // events.item_field
  std::string items_field = "items";   // events.items_field
  std::string time_field = "ts";       // events.time_field
  std::string time_unit = "ms";        // events.time_unit: ms|s
  // filter.near_duplicates: the exposed item's content cluster, from the event
  // (docs/CONTENT.md rule 5); absent fields are looked up in the content map.
  std::string cluster_field = "cluster_id";  // events.cluster_field
  std::string simhash_field = "simhash";     // events.simhash_field
  int64_t max_id_bytes = 256;                // events.max_id_bytes
  int64_t max_items_per_event = 1000;        // events.max_items_per_event
  int64_t max_future_ms = 3600 * 1000;       // events.max_future (duration): later ts is rejected
};

struct PipelineConfig {
  int64_t batch_max_events = 20000;       // pipeline.batch_max_events
  int64_t batch_max_positions = 4000000;  // pipeline.batch_max_positions: items × k per batch
  int64_t batch_max_wait_ms = 20;         // pipeline.batch_max_wait (duration)
  int64_t commit_interval_ms = 1000;      // pipeline.commit_interval (duration)
};

struct MetricsConfig {
  std::string listen = "127.0.0.1:9464";  // metrics.listen host:port; "" = off
  int64_t refresh_interval_ms = 1000;     // metrics.refresh_interval: per-partition sampling
  int64_t status_window = 10;             // metrics.status_window: samples the status rules see
  int64_t freshness_target_ms = 10000;    // metrics.freshness_target: WARN, /readyz 503 above
  int64_t freshness_limit_ms = 60000;     // metrics.freshness_limit: ERR above
  // metrics.unassigned_grace: /readyz 503 when no partition is assigned, or one
  // is never fetched, for this long.
  int64_t unassigned_grace_ms = 30000;
};

// `exposure-filter serve` (docs/HTTP.md): the HTTP read API for recall services.
// Its own listener: never the daemon's metrics.listen.
struct ServeConfig {
  std::string listen = "127.0.0.1:8090";     // serve.listen host:port
  int64_t max_items = 10000;                 // serve.max_items: items in one request body
  int64_t max_body_bytes = 4 * 1024 * 1024;  // serve.max_body_bytes
  int64_t timeout_ms = 50;                   // serve.timeout (duration): per-request Redis deadline
  int64_t threads = 8;                       // serve.threads: HTTP workers = Redis connections
  int64_t idle_timeout_ms = 75'000;          // serve.idle_timeout (duration): keep-alive idle
  bool fail_closed = false;                  // serve.fail_closed: 503 instead of "all unseen"
  // The served ring (docs/FORMAT.md rule 10): what serve, the client library and
  // `check --mark-served` mark as returned to a user.
  int64_t served_ttl_ms = 2 * 3600 * 1000;  // serve.served_ttl (duration), renewed on write
  int64_t served_items = 500;               // serve.served_items: the ring's capacity
  double served_fpr = 0.0001;               // serve.served_fpr: its false-positive rate when full
  // filter.near_duplicates: the readers' (serve, the client library) local cache
  // of the content map, item -> cluster (contentdb/cluster_cache.h), in bytes;
  // 0 = none (every lookup reads the map).
  int64_t content_cache_bytes = int64_t{64} << 20;  // serve.content_cache_bytes
  // serve.mark_queue: requests' marks of served items queued, written after the
  // answer (serve/mark_writer.h); 0 = written before answering.
  int64_t mark_queue = 10000;
};

// The content index (docs/CONTENT.md "3. Index"; issue 31): near-duplicate items
// share a cluster ID.
struct ContentConfig {
  int64_t max_distance = 3;  // content.max_distance: near-duplicates differ in <= this many bits
  int64_t index_blocks = 5;  // content.index_blocks: blocks b > max_distance; C(b, k) tables
  // content.index_group_bits: a table key's top bits that pick its Redis key
  // (contentdb/groups.h); 2^bits keys per table and generation.
  int64_t index_group_bits = 14;
  // content.retention (duration): TTL of the index and the item -> cluster map,
  // renewed when an item is assigned again; longer than filter.window.
  int64_t retention_ms = int64_t{60} * 86400 * 1000;
  // `exposure-filter content`: the items topic it consumes and its group.
  std::string topic = "items";                       // content.topic
  std::string group_id = "exposure-filter-content";  // content.group_id
  // filter.near_duplicates: the daemon's cache of item -> cluster
  // (contentdb/cluster_cache.h), bounded by both: at most cache_items items
  // (content.cache_items; about 100 bytes each) and cache_bytes bytes
  // (content.cache_bytes); whichever is reached first. 0 in either = none.
  int64_t cache_items = 200000;
  int64_t cache_bytes = int64_t{64} << 20;
  // content.listen host:port of `exposure-filter content`'s /metrics, /healthz
  // and /readyz; "" = off. Its own port, so content runs beside `run` with the
  // same config file.
  std::string listen = "127.0.0.1:9466";
};

struct LogConfig {
  std::string level = "info";   // log.level: trace|debug|info|warn|error
  std::string format = "text";  // log.format: text | json (one object per line)
};

struct Config {
  KafkaConfig kafka;
  RedisConfig redis;
  FilterConfig filter;
  EventsConfig events;
  PipelineConfig pipeline;
  MetricsConfig metrics;
  ServeConfig serve;
  ContentConfig content;
  LogConfig log;
};

}  // namespace ef
