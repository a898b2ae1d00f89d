// Client::Impl (client/impl.h): a call. Its users' keys are planned, read with
// one MGET per user (single_node.cc or cluster_calls.cc), and the candidates
// tested against the layout read with them; errors and fail-open; Ping.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bloom/hash_batch.h"
#include "client/impl.h"
#include "contentdb/map.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;
using ef::StatusCode;

ErrorCode client_internal::CodeOf(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return ErrorCode::kOk;
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case StatusCode::kFailedPrecondition:
      return ErrorCode::kLayoutMismatch;
    case StatusCode::kPermissionDenied:
      return ErrorCode::kPermissionDenied;
    case StatusCode::kInternal:
      return ErrorCode::kInternal;
    default:
      return ErrorCode::kUnavailable;
  }
}

Status client_internal::MgetReplyError(const std::string& where, std::string_view error) {
  return ef::RedisConnection::ErrorReplyStatus(error, where + ": MGET: " + std::string(error));
}

Status Client::Impl::DeadlineError(Clock::time_point start, Clock::time_point deadline,
                                   const char* what) {
  Add(counters.timeouts, 1);
  return ef::Unavailable("deadline of " + std::to_string(Millis(deadline - start)) +
                         " ms exceeded " + what + " after " +
                         std::to_string(Millis(Clock::now() - start)) + " ms");
}

void Client::Impl::Failed(const Status& st, bool policy_applies, Result* r) {
  r->seen.assign(r->seen.size(), false);
  r->seen_count = 0;
  r->served.assign(r->seen.size(), false);
  r->served_count = 0;
  r->near_duplicate.assign(r->seen.size(), false);
  r->near_duplicate_count = 0;
  r->code = CodeOf(st);
  r->error = st.message();
  if (policy_applies && options.on_error == OnError::kFailOpen) {
    r->ok = true;
    r->failed_open = true;
    Add(counters.failed_open, 1);
  } else {
    r->ok = false;
    Add(counters.errors, 1);
  }
}

std::vector<Result> Client::Impl::Run(const Work* work, size_t n, const CallOptions& call) {
  bool redo = false;
  std::vector<Result> results = RunOnce(work, n, call, true, &redo);
  // A value longer than the layout allows: the meta was re-read (or will be by
  // the next call if that failed); answer with the layout it describes now.
  if (redo) results = RunOnce(work, n, call, false, &redo);
  client_internal::TrimThreadBuffers();
  return results;
}

const std::vector<std::string_view>& CallReplies::values(
    size_t v, std::vector<std::string_view>* scratch) const {
  if (single) return (*single)[v].values;
  scratch->clear();
  for (const ef::RedisReply& e : cluster[v].elements) scratch->emplace_back(e.str);
  return *scratch;
}

namespace {

// One MGET per valid user: its bucket keys, then its served ring (the last value).
std::vector<std::vector<std::string>> MgetCommands(CallPlan* plan) {
  std::vector<std::vector<std::string>> commands(plan->valid.size());
  for (size_t v = 0; v < plan->valid.size(); ++v) {
    ef::ReadPlan& p = plan->plans[plan->valid[v]];
    commands[v].reserve(p.keys.size() + 2);
    commands[v].emplace_back("MGET");
    for (std::string& key : p.keys) commands[v].push_back(std::move(key));
    commands[v].push_back(std::move(p.served_key));
  }
  return commands;
}

// filter.near_duplicates: the clusters of the candidates with no cluster given
// (docs/CONTENT.md rule 5), in user order: from the cache (if any) at once, in
// one batch, the rest to read from the map with the MGETs.
Lookups PlanLookups(const Work* work, const std::vector<size_t>& valid, const std::string& prefix,
                    ef::contentdb::SharedClusterCache* cache, uint32_t seed, int64_t now_ms) {
  using Hit = ef::contentdb::ClusterCache::Hit;
  Lookups lookups;
  std::vector<std::string_view> items;  // per lookup
  for (size_t v = 0; v < valid.size(); ++v) {
    const Work& w = work[valid[v]];
    for (size_t j = 0; j < w.candidates.size(); ++j) {
      const std::string_view item = w.candidates[j];
      if (w.clusters.size() != 0 && !w.clusters[j].empty()) continue;
      // Not an item the index files (contentdb/map.h): unknown, nothing read.
      if (item.empty() || item.size() > ef::contentdb::kMaxContentItemBytes) continue;
      lookups.of.emplace_back(v, j);
      items.push_back(item);
    }
  }
  const size_t n = items.size();
  lookups.clusters.resize(n);
  lookups.self.assign(n, 0);
  std::vector<ef::Hash128> hashes;
  std::vector<Hit> hits(n, Hit::kNone);
  if (cache != nullptr && n > 0) {
    hashes.resize(n);
    // Eight at a time where the CPU has AVX-512 (bloom/hash_batch.h), as TestItems does.
    ef::DefaultItemHasher().HashAll(
        n, [&](size_t i) { return items[i]; }, seed, hashes.data());
    cache->FindMany(hashes.data(), n, now_ms, hits.data(), lookups.clusters.data());
  }
  for (size_t i = 0; i < n; ++i) {
    lookups.self[i] = hits[i] == Hit::kSelf ? 1 : 0;  // no copy: the candidate names it
    lookups.unknown += hits[i] == Hit::kMiss ? 1 : 0;
    if (hits[i] != Hit::kNone) {
      ++lookups.hits;
      continue;
    }
    lookups.keys.push_back(ef::contentdb::MapKey(prefix, items[i]));
    lookups.key_of.push_back(i);
    lookups.items.push_back(items[i]);
    if (cache != nullptr) lookups.hashes.push_back(hashes[i]);
  }
  return lookups;
}

// One Redis has no slots: the lookups are one more MGET in the same pipeline.
// The keys are moved into it (lookups->keys keeps its size, which is all that is
// read of it after: DecodeLookups).
void AppendLookupMget(Lookups* lookups, std::vector<std::vector<std::string>>* commands) {
  commands->emplace_back();
  commands->back().reserve(lookups->keys.size() + 1);
  commands->back().emplace_back("MGET");
  for (std::string& key : lookups->keys) commands->back().push_back(std::move(key));
}

// Valid user v's clusters: those given, then those looked up (lookups.of is in
// user order; *next_lookup moves past v's).
void UserClusters(const Work& w, size_t v, const Lookups& lookups, size_t* next_lookup,
                  std::vector<std::string_view>* clusters) {
  clusters->assign(w.candidates.size(), std::string_view());
  for (size_t j = 0; j < w.clusters.size(); ++j) (*clusters)[j] = w.clusters[j];
  for (; *next_lookup < lookups.of.size() && lookups.of[*next_lookup].first == v; ++*next_lookup) {
    const size_t j = lookups.of[*next_lookup].second;
    (*clusters)[j] = lookups.self[*next_lookup] ? std::string_view(w.candidates[j])
                                                : std::string_view(lookups.clusters[*next_lookup]);
  }
}

// A user's test into its result (served all false when the ring was not read).
void TakeCheck(ef::CheckResult cr, bool near_duplicates, bool with_buckets,
               const std::vector<std::string_view>& clusters, Result* r) {
  if (near_duplicates) {
    r->near_duplicate = std::move(cr.near_duplicate);
    r->near_duplicate_count = cr.near_duplicate_count;
    r->cluster.assign(clusters.begin(), clusters.end());
  }
  r->seen = std::move(cr.seen);
  r->seen_count = cr.seen_count;
  r->buckets_present = cr.buckets_present;
  if (cr.served.empty()) {
    r->served.assign(r->seen.size(), false);
  } else {
    r->served = std::move(cr.served);
    r->served_count = cr.served_count;
  }
  if (with_buckets) r->seen_bucket = std::move(cr.seen_bucket);
}

}  // namespace

CallPlan Client::Impl::PlanUsers(const Work* work, size_t n, int64_t now_s) {
  CallPlan plan;
  plan.results.resize(n);
  plan.plans.resize(n);
  plan.valid.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Result& r = plan.results[i];
    r.seen.assign(work[i].candidates.size(), false);
    r.served.assign(work[i].candidates.size(), false);
    r.near_duplicate.assign(work[i].candidates.size(), false);
    plan.candidates += work[i].candidates.size();
    if (near_duplicates && work[i].clusters.size() != 0 &&
        work[i].clusters.size() != work[i].candidates.size()) {
      Failed(ef::InvalidArgument("clusters: " + std::to_string(work[i].clusters.size()) +
                                 " given for " + std::to_string(work[i].candidates.size()) +
                                 " candidates (give one per candidate, \"\" = unknown)"),
             false, &r);
      continue;
    }
    // Keys depend only on prefix, bucket and window, which the stored layout
    // shares with the configured one.
    auto read = ef::PlanRead(configured, work[i].user, now_s);
    if (!read.ok()) {
      Failed(read.status(), false, &r);
      continue;
    }
    r.buckets_read = read->keys.size();
    plan.plans[i] = std::move(*read);
    plan.valid.push_back(i);
  }
  return plan;
}

Status Client::Impl::ReadUsers(const std::vector<std::vector<std::string>>& commands,
                               Lookups* lookups, Clock::time_point start,
                               Clock::time_point deadline, CallPlan* plan, CallReplies* replies) {
  if (!cluster) return SingleMget(commands, start, deadline, &replies->single);
  ef::client::Pooled<RouterSlot> pr(routers);
  Status st = PrepareRouter(pr, start, deadline);
  if (st.ok())
    st = ClusterMget(pr.conn()->router, commands, start, deadline, &replies->cluster,
                     &replies->user_status, lookups->keys.empty() ? nullptr : lookups);
  for (size_t v = 0; st.ok() && v < replies->user_status.size(); ++v) {
    if (replies->user_status[v].ok()) continue;
    ++replies->failed_users;
    Failed(replies->user_status[v], true, &plan->results[plan->valid[v]]);
  }
  if ((!st.ok() || replies->failed_users > 0) && pr.conn()) pr.conn()->meta_due = true;
  return st;
}

bool Client::Impl::AnyLongValue(const CallReplies& replies, size_t users,
                                const ef::Layout& layout) {
  std::vector<std::string_view> scratch;
  bool long_value = false;
  for (size_t v = 0; v < users && !long_value; ++v) {
    if (!replies.answered(v)) continue;
    const std::vector<std::string_view>& values = replies.values(v, &scratch);
    for (size_t b = 0; b + 1 < values.size(); ++b)  // the buckets (the served ring is last)
      long_value = long_value || NoteValueLength(values[b].size(), layout);
  }
  return long_value;
}

void Client::Impl::TestUsers(const Work* work, const CallOptions& call, const Lookups& lookups,
                             const CallReplies& replies, const ef::Layout& layout, CallPlan* plan) {
  uint64_t seen_total = 0, served_total = 0, near_total = 0, invalid_total = 0;
  thread_local std::vector<std::string_view> buckets;
  std::vector<std::string_view> scratch;
  std::vector<std::string_view> clusters;  // one user's, with filter.near_duplicates
  size_t next_lookup = 0;
  for (size_t v = 0; v < plan->valid.size(); ++v) {
    const size_t i = plan->valid[v];
    const Work& w = work[i];
    if (near_duplicates) UserClusters(w, v, lookups, &next_lookup, &clusters);
    if (!replies.answered(v)) continue;  // failed in ReadUsers
    const std::vector<std::string_view>& values = replies.values(v, &scratch);
    buckets.assign(values.begin(), values.end() - 1);
    const std::vector<int64_t>& starts = plan->plans[i].bucket_starts;
    ef::CheckResult cr =
        near_duplicates ? ef::TestItems(layout, buckets, starts, w.candidates,
                                        std::span<const std::string_view>(clusters), values.back())
                        : ef::TestItems(layout, buckets, starts, w.candidates, values.back());
    Result& r = plan->results[i];
    invalid_total += cr.invalid_keys;
    TakeCheck(std::move(cr), near_duplicates, call.with_buckets, clusters, &r);
    near_total += near_duplicates ? r.near_duplicate_count : 0;
    seen_total += r.seen_count;
    served_total += r.served_count;
  }
  Add(counters.seen, seen_total);
  Add(counters.served, served_total);
  Add(counters.near_duplicates, near_total);
  Add(counters.invalid_keys, invalid_total);
}

std::vector<Result> Client::Impl::RunOnce(const Work* work, size_t n, const CallOptions& call,
                                          bool first, bool* redo) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : options.timeout);
  const int64_t now_s = call.at_unix_seconds > 0
                            ? call.at_unix_seconds
                            : std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  CallPlan plan = PlanUsers(work, n, now_s);
  if (first) {
    Add(counters.calls, 1);
    Add(counters.users, n);
    Add(counters.candidates, plan.candidates);
  }
  if (plan.valid.empty()) return std::move(plan.results);

  std::vector<std::vector<std::string>> commands = MgetCommands(&plan);
  Lookups lookups;
  if (near_duplicates && call.cluster_lookup)
    lookups = PlanLookups(work, plan.valid, configured.prefix, cluster_cache.get(), configured.seed,
                          cluster_cache ? cache_now_ms() : 0);
  const bool single_lookup = !cluster && !lookups.keys.empty();
  if (single_lookup) AppendLookupMget(&lookups, &commands);
  CallReplies replies;
  const Status st = ReadUsers(commands, &lookups, start, deadline, &plan, &replies);
  if (!st.ok()) {
    Add(counters.redis_errors, 1);
    ready.store(false, std::memory_order_relaxed);
    for (size_t i : plan.valid) Failed(st, true, &plan.results[i]);
    return std::move(plan.results);
  }
  if (replies.failed_users > 0) Add(counters.redis_errors, 1);
  ready.store(replies.failed_users < plan.valid.size(), std::memory_order_relaxed);

  const std::shared_ptr<const ef::Layout> layout_now = CurrentLayout();
  if (first && AnyLongValue(replies, plan.valid.size(), *layout_now)) {
    *redo = true;
    return std::move(plan.results);
  }
  if (single_lookup) DecodeLookups((*replies.single)[plan.valid.size()].values, nullptr, &lookups);
  if (!lookups.of.empty()) {  // counted once per call, not again by a redo (above)
    Add(counters.cluster_lookups, lookups.of.size());
    Add(counters.cluster_cache_hits, lookups.hits);
    Add(counters.cluster_cache_misses, lookups.keys.size());
    Add(counters.clusters_unknown, lookups.unknown);
    Add(counters.map_bad_values, lookups.bad);
  }
  TestUsers(work, call, lookups, replies, *layout_now, &plan);
  return std::move(plan.results);
}

void Client::Impl::DecodeLookups(const std::vector<std::string_view>& values,
                                 const std::vector<bool>* answered, Lookups* lookups) {
  const int64_t now_ms = cluster_cache ? cache_now_ms() : 0;
  uint64_t unknown = 0, bad = 0;
  std::vector<ef::Hash128> put;  // what the map answered, for the cache
  std::vector<std::string_view> put_items, put_clusters;
  for (size_t k = 0; k < lookups->keys.size(); ++k) {
    std::string& cluster = lookups->clusters[lookups->key_of[k]];
    cluster.clear();
    const bool read = k < values.size() && (answered == nullptr || (*answered)[k]);
    if (read && !values[k].empty()) {  // empty: nil, not indexed yet, or expired
      std::optional<ef::contentdb::MapValue> mv = ef::contentdb::DecodeMapValue(values[k]);
      if (mv && !mv->cluster.empty()) {
        cluster = std::move(mv->cluster);
      } else {
        ++bad;
      }
    }
    unknown += cluster.empty() ? 1 : 0;
    // An answer of the map is kept (a cluster, or "not known" for a short while);
    // no answer (a master down) is not.
    if (cluster_cache && read) {
      put.push_back(lookups->hashes[k]);
      put_items.push_back(lookups->items[k]);
      put_clusters.push_back(cluster);
    }
  }
  if (!put.empty())
    cluster_cache->PutMany(put.data(), put_items.data(), put_clusters.data(), put.size(), now_ms);
  lookups->unknown += unknown;
  lookups->bad = bad;
}

bool Client::Impl::Ping(std::chrono::milliseconds deadline_in) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + deadline_in;
  Status st = cluster ? PingCluster(start, deadline) : PingSingle(start, deadline);
  if (!st.ok()) Add(counters.redis_errors, 1);
  ready.store(st.ok(), std::memory_order_relaxed);
  return st.ok();
}

}  // namespace exposure_filter
