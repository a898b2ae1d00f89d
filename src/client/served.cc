// Client::Impl (client/impl.h) and the public API for paged feeds: marking items
// as served (docs/FORMAT.md rule 10, bloom/served.h) with MarkServed and
// FilterAndMark.
#include "bloom/served.h"

#include <string>
#include <vector>

#include "bloom/cluster_token.h"
#include "bloom/hash.h"
#include "bloom/keys.h"
#include "client/impl.h"
#include "common/sha1.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;

namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

const std::string& ScriptSha() {
  static const std::string sha = ef::Sha1Hex(ef::ServedScript());
  return sha;
}

}  // namespace

Status Client::Impl::Mark(std::string_view user, const ef::Hash128* items, size_t n,
                          Clock::time_point start, Clock::time_point deadline, size_t* filled) {
  const std::string key = ef::ServedKey(configured.prefix, user);
  std::string fps;
  ef::AppendServedFingerprints(items, n, served_width, &fps);
  std::vector<std::vector<std::string>> commands = {
      {"EVALSHA", ScriptSha(), "1", key, std::to_string(served_capacity),
       std::to_string(served_width), std::to_string(served_ttl_ms), std::move(fps)}};
  if (wait_replicas > 0)
    commands.push_back({"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout_ms)});
  const std::string where = cluster ? "redis cluster" : "redis " + redis.addresses.front();
  std::vector<ef::RedisReply> replies;
  for (int attempt = 0;; ++attempt) {
    Status st = cluster ? ClusterCommands(key, commands, start, deadline, &replies)
                        : SingleCommands(commands, start, deadline, &replies);
    if (!st.ok()) return st;
    if (replies.size() != commands.size())
      return ef::Internal(where + ": EVALSHA: unexpected reply");
    const ef::RedisReply& r = replies.front();
    // The server has not cached the script (a restart, SCRIPT FLUSH, a new
    // master): send it whole once, which caches it.
    if (attempt == 0 && r.type == ef::RedisReply::Type::kError && StartsWith(r.str, "NOSCRIPT")) {
      commands.front()[0] = "EVAL";
      commands.front()[1] = ef::ServedScript();
      continue;
    }
    if (r.type == ef::RedisReply::Type::kError) {
      return ef::RedisConnection::ErrorReplyStatus(
          r.str, where + ": marking served items (" + key + "): " + r.str);
    }
    if (r.type != ef::RedisReply::Type::kInteger)
      return ef::Internal(where + ": marking served items: unexpected reply");
    *filled = static_cast<size_t>(r.integer);
    if (wait_replicas > 0) {
      const ef::RedisReply& w = replies.back();
      if (w.type != ef::RedisReply::Type::kInteger || w.integer < wait_replicas)
        return ef::Unavailable(where + ": marking served items: WAIT: " +
                               (w.type == ef::RedisReply::Type::kError
                                    ? w.str
                                    : std::to_string(w.integer) + " of " +
                                          std::to_string(wait_replicas) +
                                          " replicas acknowledged within redis.wait_timeout"));
    }
    return Status::Ok();
  }
}

MarkResult Client::MarkServed(std::string_view user, const std::vector<std::string>& items) {
  std::vector<std::string_view> views(items.begin(), items.end());
  return MarkServedViews(user, views);
}

MarkResult Client::MarkServedViews(std::string_view user, std::span<const std::string_view> items,
                                   const CallOptions& call) {
  MarkResult m;
  Status st = ef::CheckUserId(user);
  auto fail = [&](const Status& s, bool policy_applies) {
    m.code = CodeOf(s);
    m.error = s.message();
    if (policy_applies && impl_->options.on_error == OnError::kFailOpen) {
      m.failed_open = true;
    } else {
      m.ok = false;
    }
    return m;
  };
  if (!st.ok()) return fail(st, false);
  if (items.empty()) return m;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : impl_->options.timeout);
  std::vector<ef::Hash128> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    hashes[i] = ef::HashItem(items[i], impl_->configured.seed);
  size_t filled = 0;
  st = impl_->Mark(user, hashes.data(), hashes.size(), start, deadline, &filled);
  if (!st.ok()) {
    Add(impl_->counters.redis_errors, 1);
    Add(impl_->counters.mark_errors, 1);
    return fail(st, true);
  }
  Add(impl_->counters.marked, items.size());
  m.marked = items.size();
  m.filled = filled;
  return m;
}

Result Client::FilterAndMark(std::string_view user, const std::vector<std::string>& candidates,
                             size_t n) {
  std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return FilterAndMarkViews(user, views, n);
}

Result Client::FilterAndMarkViews(std::string_view user,
                                  std::span<const std::string_view> candidates, size_t n,
                                  const CallOptions& call) {
  return FilterAndMarkWithClusters(user, candidates, {}, n, call);
}

Result Client::FilterAndMarkWithClusters(std::string_view user,
                                         std::span<const std::string_view> candidates,
                                         std::span<const std::string_view> clusters, size_t n,
                                         const CallOptions& call) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : impl_->options.timeout);
  Result r = SeenWithClusters(user, candidates, clusters, call);
  r.marked.assign(candidates.size(), false);
  if (!r.ok || r.failed_open) return r;
  std::vector<ef::Hash128> hashes;
  size_t marked = 0;
  for (size_t i = 0; i < candidates.size() && marked < n; ++i) {
    if (r.seen[i] || r.served[i] || r.near_duplicate[i]) continue;
    // docs/CONTENT.md rule 5's writers' rule, in the ring: token(C) when C != J.
    const bool token = !r.cluster.empty() && ef::WritesClusterToken(candidates[i], r.cluster[i]);
    // The ring keeps every item this call marks: marking stops where the next
    // one (and its token) would overwrite one marked before it.
    if (hashes.size() + 1 + (token ? 1 : 0) > impl_->served_capacity) break;
    r.marked[i] = true;
    ++marked;
    hashes.push_back(ef::HashItem(candidates[i], impl_->configured.seed));
    if (token)
      hashes.push_back(ef::HashItem(ef::ClusterToken(r.cluster[i]), impl_->configured.seed));
  }
  if (hashes.empty()) return r;
  size_t filled = 0;
  // What is left of the call's deadline (the read used the rest).
  Status st = impl_->Mark(user, hashes.data(), hashes.size(), start, deadline, &filled);
  if (!st.ok()) {
    Add(impl_->counters.redis_errors, 1);
    Add(impl_->counters.mark_errors, 1);
    r.marked.assign(candidates.size(), false);
    r.code = CodeOf(st);
    r.error = st.message();
    if (impl_->options.on_error == OnError::kFailOpen) {
      r.mark_failed = true;
    } else {
      impl_->Failed(st, false, &r);
    }
    return r;
  }
  Add(impl_->counters.marked, marked);
  r.marked_count = marked;
  return r;
}

}  // namespace exposure_filter
