// exposure_filter::Client (include/exposure_filter/client.h): the public API.
// Client::Impl and where each concern's code lives: client/impl.h.
#include "exposure_filter/client.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "bloom/keys.h"
#include "bloom/served.h"
#include "client/impl.h"
#include "common/clock.h"
#include "config/loader.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;
using ef::StatusCode;

namespace {

// What calls need of the config beyond the layout and redis.*: the served
// ring, WAIT, and near duplicates with the content map's local cache.
void TakeConfig(const ef::Config& config, const ClientOptions& options, Client::Impl* impl) {
  impl->served_capacity = static_cast<uint32_t>(config.serve.served_items);
  impl->served_width = ef::ServedWidth(impl->served_capacity, config.serve.served_fpr);
  impl->served_ttl_ms = config.serve.served_ttl_ms;
  impl->wait_replicas = config.redis.wait_replicas;
  impl->wait_timeout_ms = config.redis.wait_timeout_ms;
  impl->near_duplicates = config.filter.near_duplicates;
  const size_t cache_bytes =
      options.content_cache_bytes.value_or(static_cast<size_t>(config.serve.content_cache_bytes));
  if (impl->near_duplicates && cache_bytes > 0) {
    ef::contentdb::ClusterCacheLimits limits;
    limits.bytes = cache_bytes;
    impl->cluster_cache = std::make_unique<ef::contentdb::SharedClusterCache>(limits);
    impl->cache_now_ms = options.cache_clock_ms ? options.cache_clock_ms : ef::SteadyNowMs;
  }
}

}  // namespace

std::unique_ptr<Client> Client::Create(const ClientOptions& options, std::string* error,
                                       ErrorCode* code) {
  auto fail = [&](const Status& st, ErrorCode c) -> std::unique_ptr<Client> {
    if (error) *error = st.message();
    if (code) *code = c;
    return nullptr;
  };
  if (options.pool_size < 1)
    return fail(ef::InvalidArgument("ClientOptions.pool_size: must be >= 1, got 0"),
                ErrorCode::kInvalidArgument);
  if (options.timeout.count() <= 0)
    return fail(ef::InvalidArgument("ClientOptions.timeout: must be > 0 ms, got " +
                                    std::to_string(options.timeout.count())),
                ErrorCode::kInvalidArgument);
  auto config = ef::LoadConfig(options.config_path, options.overrides);
  if (!config.ok()) return fail(config.status(), ErrorCode::kInvalidArgument);
  auto layout = ef::LayoutFromConfig(config->filter);
  if (!layout.ok()) return fail(layout.status(), ErrorCode::kInvalidArgument);
  auto redis = ef::RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return fail(redis.status(), ErrorCode::kInvalidArgument);

  auto impl = std::make_unique<Impl>(options, std::move(*layout), std::move(*redis));
  TakeConfig(*config, options, impl.get());
  // The first connection may take redis.connect_timeout (start-up is not a call).
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(std::max<int64_t>(impl->redis.connect_timeout_ms,
                                                                 Millis(options.timeout)));
  // redis.cluster: auto asks the seeds. If none answers, that is the error (it
  // names each seed, the timeout that fired and the time waited): a second
  // attempt on the single-node path would only have what was left of the
  // deadline, and report that ("PING: timed out after 1 ms" after 5 s). Other
  // failures of the question (an ACL without +cluster|slots) fall back to it.
  auto use = ef::UseCluster(impl->redis);
  if (!use.ok() && use.status().code() == StatusCode::kUnavailable)
    return fail(use.status(), ErrorCode::kUnavailable);
  if (use.ok() && *use) {
    auto router_options = ef::ClusterOptionsFrom(impl->redis);
    if (!router_options.ok()) return fail(router_options.status(), ErrorCode::kInvalidArgument);
    impl->cluster = true;
    impl->router_options = std::move(*router_options);
    impl->router_options.return_tryagain = true;  // migrating users: one GET per key
    ef::client::Pooled<RouterSlot> pr(impl->routers);
    Status st = impl->PrepareRouter(pr, Clock::now(), deadline);
    if (!st.ok()) {
      pr.Drop();
      return fail(st, CodeOf(st));
    }
    {
      std::lock_guard lock(impl->layout_mu);
      if (!impl->stored && !options.allow_missing_layout) {
        pr.Drop();
        return fail(ef::FailedPrecondition(
                        "redis cluster " + impl->redis.addresses.front() +
                        "...: no layout stored at " + ef::MetaKey(impl->configured.prefix) +
                        ": nothing was written with this key prefix (check filter.key_prefix "
                        "and redis.address, or set ClientOptions::allow_missing_layout)"),
                    ErrorCode::kLayoutMismatch);
      }
    }
    impl->ready.store(true);
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  }
  ef::client::ConnectionPool::Conn conn;
  Status st = impl->Connect(deadline, &conn);
  if (!st.ok()) {
    // A connection failure is kUnavailable even if the handshake said otherwise
    // (e.g. SELECT refused), except refused credentials.
    ErrorCode c = CodeOf(st);
    if (c == ErrorCode::kLayoutMismatch && st.message().find("SELECT") != std::string::npos)
      c = ErrorCode::kInvalidArgument;
    return fail(st, c);
  }
  {
    std::lock_guard lock(impl->layout_mu);
    if (!impl->stored && !options.allow_missing_layout) {
      return fail(ef::FailedPrecondition(
                      "redis " + conn->address() + ": no layout stored at " +
                      ef::MetaKey(impl->configured.prefix) +
                      ": nothing was written with this key prefix (check filter.key_prefix and "
                      "redis.address, or set ClientOptions::allow_missing_layout)"),
                  ErrorCode::kLayoutMismatch);
    }
  }
  ef::client::ConnectionPool::Conn slot;
  (void)impl->pool.Acquire(Clock::now(), &slot);  // a new pool: a free, empty slot
  impl->pool.Release(std::move(conn));
  impl->ready.store(true);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates) {
  return Seen(user, candidates, CallOptions{});
}

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates,
                    std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return Seen(user, candidates, call);
}

Result Client::Seen(std::string_view user, const std::vector<std::string>& candidates,
                    const CallOptions& call) {
  const Work work{user, candidates};
  return std::move(impl_->Run(&work, 1, call).front());
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates) {
  return SeenViews(user, candidates, CallOptions{});
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                         std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenViews(user, candidates, call);
}

Result Client::SeenViews(std::string_view user, std::span<const std::string_view> candidates,
                         const CallOptions& call) {
  const Work work{user, candidates};
  return std::move(impl_->Run(&work, 1, call).front());
}

Result Client::SeenWithClusters(std::string_view user, std::span<const std::string_view> candidates,
                                std::span<const std::string_view> clusters,
                                const CallOptions& call) {
  const Work work{user, candidates, clusters};
  return std::move(impl_->Run(&work, 1, call).front());
}

std::vector<std::string> Client::Unseen(std::string_view user,
                                        const std::vector<std::string>& candidates) {
  return Unseen(user, candidates, std::chrono::milliseconds(0));
}

std::vector<std::string> Client::Unseen(std::string_view user,
                                        const std::vector<std::string>& candidates,
                                        std::chrono::milliseconds deadline) {
  Result r = Seen(user, candidates, deadline);
  std::vector<std::string> out;
  if (!r.ok) return out;
  out.reserve(candidates.size() - r.seen_count - r.served_count - r.near_duplicate_count);
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!r.seen[i] && !r.served[i] && !r.near_duplicate[i]) out.push_back(candidates[i]);
  return out;
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries) {
  return SeenBatch(queries, CallOptions{});
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries,
                                      std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenBatch(queries, call);
}

std::vector<Result> Client::SeenBatch(const std::vector<Query>& queries, const CallOptions& call) {
  std::vector<Work> work;
  work.reserve(queries.size());
  for (const Query& q : queries) work.push_back({q.user, q.candidates, q.clusters});
  return impl_->Run(work.data(), work.size(), call);
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries) {
  return SeenBatchViews(queries, CallOptions{});
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries,
                                           std::chrono::milliseconds deadline) {
  CallOptions call;
  call.deadline = deadline;
  return SeenBatchViews(queries, call);
}

std::vector<Result> Client::SeenBatchViews(std::span<const QueryView> queries,
                                           const CallOptions& call) {
  std::vector<Work> work;
  work.reserve(queries.size());
  for (const QueryView& q : queries) work.push_back({q.user, q.candidates, q.clusters});
  return impl_->Run(work.data(), work.size(), call);
}

bool Client::Ping(std::chrono::milliseconds deadline) { return impl_->Ping(deadline); }

bool Client::Ready() const { return impl_->ready.load(std::memory_order_relaxed); }

ClientStats Client::stats() const {
  const Counters& c = impl_->counters;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  ClientStats s;
  s.calls = get(c.calls);
  s.users = get(c.users);
  s.candidates = get(c.candidates);
  s.seen = get(c.seen);
  s.failed_open = get(c.failed_open);
  s.errors = get(c.errors);
  s.redis_errors = get(c.redis_errors);
  s.timeouts = get(c.timeouts);
  s.reconnects = get(c.reconnects);
  s.layout_reads = get(c.layout_reads);
  s.stale_retries = get(c.stale_retries);
  s.served = get(c.served);
  s.marked = get(c.marked);
  s.mark_errors = get(c.mark_errors);
  s.invalid_keys = get(c.invalid_keys);
  s.near_duplicates = get(c.near_duplicates);
  s.cluster_lookups = get(c.cluster_lookups);
  s.clusters_unknown = get(c.clusters_unknown);
  s.map_bad_values = get(c.map_bad_values);
  s.cluster_cache_hits = get(c.cluster_cache_hits);
  s.cluster_cache_misses = get(c.cluster_cache_misses);
  if (impl_->cluster_cache) s.cluster_cache_bytes = impl_->cluster_cache->memory_bytes();
  return s;
}

LayoutInfo Client::layout() const {
  std::shared_ptr<const ef::Layout> l;
  LayoutInfo info;
  {
    std::lock_guard lock(impl_->layout_mu);
    l = impl_->layout;
    info.stored = impl_->stored;
    info.lost = impl_->meta_lost;
  }
  info.version = l->version();
  info.stages = l->stages;
  info.prefix = l->prefix;
  info.bucket_seconds = l->bucket_seconds;
  info.window_seconds = l->window_seconds;
  return info;
}

}  // namespace exposure_filter
