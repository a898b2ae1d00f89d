// Client::Impl (client/impl.h): a call. Its users' keys are planned, read with
// one MGET per user (single_node.cc or cluster_calls.cc), and the candidates
// tested against the layout read with them; errors and fail-open; Ping.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

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
  std::vector<Result> results(n);
  std::vector<ef::ReadPlan> plans(n);
  std::vector<size_t> valid;
  valid.reserve(n);
  uint64_t candidates = 0;
  for (size_t i = 0; i < n; ++i) {
    Result& r = results[i];
    r.seen.assign(work[i].candidates.size(), false);
    r.served.assign(work[i].candidates.size(), false);
    r.near_duplicate.assign(work[i].candidates.size(), false);
    candidates += work[i].candidates.size();
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
    auto plan = ef::PlanRead(configured, work[i].user, now_s);
    if (!plan.ok()) {
      Failed(plan.status(), false, &r);
      continue;
    }
    r.buckets_read = plan->keys.size();
    plans[i] = std::move(*plan);
    valid.push_back(i);
  }
  if (first) {
    Add(counters.calls, 1);
    Add(counters.users, n);
    Add(counters.candidates, candidates);
  }
  if (valid.empty()) return results;

  std::vector<std::vector<std::string>> commands(valid.size());
  for (size_t v = 0; v < valid.size(); ++v) {
    std::vector<std::string>& keys = plans[valid[v]].keys;
    commands[v].reserve(keys.size() + 2);
    commands[v].emplace_back("MGET");
    for (std::string& key : keys) commands[v].push_back(std::move(key));
    commands[v].push_back(std::move(plans[valid[v]].served_key));  // the last value
  }
  // filter.near_duplicates: the map entries of the candidates with no cluster
  // given, read with the MGETs (docs/CONTENT.md rule 5).
  Lookups lookups;
  if (near_duplicates && call.cluster_lookup) {
    for (size_t v = 0; v < valid.size(); ++v) {
      const Work& w = work[valid[v]];
      for (size_t j = 0; j < w.candidates.size(); ++j) {
        const std::string_view item = w.candidates[j];
        if (w.clusters.size() != 0 && !w.clusters[j].empty()) continue;
        // Not an item the index files (contentdb/map.h): unknown, nothing read.
        if (item.empty() || item.size() > ef::contentdb::kMaxContentItemBytes) continue;
        lookups.keys.push_back(ef::contentdb::MapKey(configured.prefix, item));
        lookups.of.emplace_back(v, j);
      }
    }
  }
  const bool single_lookup = !cluster && !lookups.keys.empty();
  if (single_lookup) {  // one more MGET in the same pipeline: one Redis has no slots
    commands.emplace_back();
    commands.back().reserve(lookups.keys.size() + 1);
    commands.back().emplace_back("MGET");
    for (const std::string& key : lookups.keys) commands.back().push_back(key);
  }
  std::vector<ef::RedisReply> cluster_replies;
  // Standalone: the replies' values, views into the thread's receive buffer.
  std::vector<ef::RedisConnection::ArrayReply>* single_replies = nullptr;
  // Cluster: per user (a master down fails its users only); empty = all OK.
  std::vector<Status> user_status;
  size_t failed_users = 0;
  Status st;
  if (cluster) {
    ef::client::Pooled<RouterSlot> pr(routers);
    st = PrepareRouter(pr, start, deadline);
    if (st.ok())
      st = ClusterMget(pr.conn()->router, commands, start, deadline, &cluster_replies, &user_status,
                       lookups.keys.empty() ? nullptr : &lookups);
    for (size_t v = 0; st.ok() && v < user_status.size(); ++v) {
      if (user_status[v].ok()) continue;
      ++failed_users;
      Failed(user_status[v], true, &results[valid[v]]);
    }
    if ((!st.ok() || failed_users > 0) && pr.conn()) pr.conn()->meta_due = true;
  } else {
    st = SingleMget(commands, start, deadline, &single_replies);
  }
  if (!st.ok()) {
    Add(counters.redis_errors, 1);
    ready.store(false, std::memory_order_relaxed);
    for (size_t i : valid) Failed(st, true, &results[i]);
    return results;
  }
  if (failed_users > 0) Add(counters.redis_errors, 1);
  ready.store(failed_users < valid.size(), std::memory_order_relaxed);

  const std::shared_ptr<const ef::Layout> layout_now = CurrentLayout();
  std::vector<std::string_view> cluster_values;
  auto values_of = [&](size_t v) -> const std::vector<std::string_view>& {
    if (single_replies) return (*single_replies)[v].values;
    cluster_values.clear();
    for (const ef::RedisReply& e : cluster_replies[v].elements) cluster_values.emplace_back(e.str);
    return cluster_values;
  };
  if (first) {
    bool long_value = false;
    for (size_t v = 0; v < valid.size() && !long_value; ++v) {
      if (!user_status.empty() && !user_status[v].ok()) continue;
      const std::vector<std::string_view>& values = values_of(v);
      for (size_t b = 0; b + 1 < values.size(); ++b)  // the buckets (the served ring is last)
        long_value = long_value || NoteValueLength(values[b].size(), *layout_now);
    }
    if (long_value) {
      *redo = true;
      return results;
    }
  }
  if (single_lookup) DecodeLookups((*single_replies)[valid.size()].values, &lookups);
  if (!lookups.keys.empty()) {  // counted once per call, not again by a redo (above)
    Add(counters.cluster_lookups, lookups.keys.size());
    Add(counters.clusters_unknown, lookups.unknown);
    Add(counters.map_bad_values, lookups.bad);
  }
  uint64_t seen_total = 0, served_total = 0, near_total = 0;
  thread_local std::vector<std::string_view> buckets;
  std::vector<std::string_view> clusters;  // one user's, with filter.near_duplicates
  size_t next_lookup = 0;                  // lookups.of is in user order
  for (size_t v = 0; v < valid.size(); ++v) {
    const size_t i = valid[v];
    const Work& w = work[i];
    if (near_duplicates) {
      clusters.assign(w.candidates.size(), std::string_view());
      for (size_t j = 0; j < w.clusters.size(); ++j) clusters[j] = w.clusters[j];
      for (; next_lookup < lookups.of.size() && lookups.of[next_lookup].first == v; ++next_lookup)
        clusters[lookups.of[next_lookup].second] = lookups.clusters[next_lookup];
    }
    if (!user_status.empty() && !user_status[v].ok()) continue;  // failed above
    const std::vector<std::string_view>& values = values_of(v);
    buckets.assign(values.begin(), values.end() - 1);
    ef::CheckResult cr =
        near_duplicates ? ef::TestItems(*layout_now, buckets, plans[i].bucket_starts, w.candidates,
                                        std::span<const std::string_view>(clusters), values.back())
                        : ef::TestItems(*layout_now, buckets, plans[i].bucket_starts, w.candidates,
                                        values.back());
    Result& r = results[i];
    if (near_duplicates) {
      r.near_duplicate = std::move(cr.near_duplicate);
      r.near_duplicate_count = cr.near_duplicate_count;
      r.cluster.assign(clusters.begin(), clusters.end());
      near_total += r.near_duplicate_count;
    }
    r.seen = std::move(cr.seen);
    r.seen_count = cr.seen_count;
    r.buckets_present = cr.buckets_present;
    if (cr.served.empty()) {
      r.served.assign(r.seen.size(), false);
    } else {
      r.served = std::move(cr.served);
      r.served_count = cr.served_count;
    }
    if (call.with_buckets) r.seen_bucket = std::move(cr.seen_bucket);
    seen_total += r.seen_count;
    served_total += r.served_count;
  }
  Add(counters.seen, seen_total);
  Add(counters.served, served_total);
  Add(counters.near_duplicates, near_total);
  return results;
}

void Client::Impl::DecodeLookups(const std::vector<std::string_view>& values, Lookups* lookups) {
  lookups->clusters.assign(lookups->keys.size(), std::string());
  uint64_t unknown = 0, bad = 0;
  for (size_t k = 0; k < lookups->keys.size() && k < values.size(); ++k) {
    if (values[k].empty()) {  // nil: not indexed yet, or expired
      ++unknown;
      continue;
    }
    std::optional<ef::contentdb::MapValue> mv = ef::contentdb::DecodeMapValue(values[k]);
    if (!mv || mv->cluster.empty()) {
      ++unknown;
      ++bad;
      continue;
    }
    lookups->clusters[k] = std::move(mv->cluster);
  }
  unknown += lookups->keys.size() - std::min(values.size(), lookups->keys.size());
  lookups->unknown = unknown;
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
