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

// WAIT's reply after marks: enough replicas acknowledged, else kUnavailable.
Status WaitReplyStatus(const ef::RedisReply& w, int64_t wait_replicas, const std::string& where) {
  if (w.type == ef::RedisReply::Type::kInteger && w.integer >= wait_replicas) return Status::Ok();
  return ef::Unavailable(where + ": marking served items: WAIT: " +
                         (w.type == ef::RedisReply::Type::kError
                              ? w.str
                              : std::to_string(w.integer) + " of " + std::to_string(wait_replicas) +
                                    " replicas acknowledged within redis.wait_timeout"));
}

// The script's reply for the ring of `user`: its size in *filled, else the error.
Status ScriptReplyStatus(const ef::RedisReply& r, const std::string& where, std::string_view prefix,
                         std::string_view user, size_t* filled) {
  if (r.type == ef::RedisReply::Type::kError) {
    return ef::RedisConnection::ErrorReplyStatus(
        r.str, where + ": marking served items (" + ef::ServedKey(prefix, user) + "): " + r.str);
  }
  if (r.type != ef::RedisReply::Type::kInteger)
    return ef::Internal(where + ": marking served items: unexpected reply");
  *filled = static_cast<size_t>(r.integer);
  return Status::Ok();
}

}  // namespace

void Client::Impl::MarkPlans(std::span<const MarkPlan> plans, Clock::time_point start,
                             Clock::time_point deadline, std::vector<Status>* status,
                             std::vector<size_t>* filled) {
  status->assign(plans.size(), Status::Ok());
  filled->assign(plans.size(), 0);
  const std::string where = cluster ? "redis cluster" : "redis " + redis.addresses.front();
  auto script_call = [&](const MarkPlan& p, bool whole) {
    return std::vector<std::string>{whole ? "EVAL" : "EVALSHA",
                                    whole ? ef::ServedScript() : ScriptSha(),
                                    "1",
                                    ef::ServedKey(configured.prefix, p.user),
                                    std::to_string(served_capacity),
                                    std::to_string(served_width),
                                    std::to_string(served_ttl_ms),
                                    p.fingerprints};
  };
  // One exchange of the plans `which`: EVALSHA (EVAL when `whole`) each, then
  // WAIT. Those the server lacks the script for go to *noscript.
  auto exchange = [&](const std::vector<size_t>& which, bool whole, std::vector<size_t>* noscript) {
    std::vector<std::vector<std::string>> commands;
    commands.reserve(which.size() + 1);
    for (size_t i : which) commands.push_back(script_call(plans[i], whole));
    if (wait_replicas > 0)
      commands.push_back({"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout_ms)});
    std::vector<ef::RedisReply> replies;
    Status st = cluster ? ClusterCommands(ef::ServedKey(configured.prefix, plans[which[0]].user),
                                          commands, start, deadline, &replies)
                        : SingleCommands(commands, start, deadline, &replies);
    if (st.ok() && replies.size() != commands.size())
      st = ef::Internal(where + ": EVALSHA: unexpected reply");
    if (st.ok() && wait_replicas > 0) st = WaitReplyStatus(replies.back(), wait_replicas, where);
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      if (!st.ok()) {
        (*status)[i] = st;
        continue;
      }
      const ef::RedisReply& r = replies[k];
      // The server has not cached the script (a restart, SCRIPT FLUSH, a new
      // master): sent whole once, which caches it.
      if (!whole && r.type == ef::RedisReply::Type::kError && StartsWith(r.str, "NOSCRIPT")) {
        noscript->push_back(i);
      } else {
        (*status)[i] = ScriptReplyStatus(r, where, configured.prefix, plans[i].user, &(*filled)[i]);
      }
    }
  };
  std::vector<std::vector<size_t>> rounds;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].entries == 0) continue;
    // A cluster's plans go one per exchange (their keys' masters differ).
    if (rounds.empty() || cluster) rounds.emplace_back();
    rounds.back().push_back(i);
  }
  for (const std::vector<size_t>& which : rounds) {
    std::vector<size_t> noscript;
    exchange(which, false, &noscript);
    if (!noscript.empty()) {
      std::vector<size_t> again;
      exchange(noscript, true, &again);
    }
  }
}

MarkResult Client::MarkServed(std::string_view user, const std::vector<std::string>& items) {
  std::vector<std::string_view> views(items.begin(), items.end());
  return MarkServedViews(user, views);
}

MarkResult Client::MarkServedViews(std::string_view user, std::span<const std::string_view> items,
                                   const CallOptions& call) {
  if (Status st = ef::CheckUserId(user); !st.ok()) {
    MarkResult m;
    m.ok = false;
    m.code = CodeOf(st);
    m.error = st.message();
    return m;
  }
  if (items.empty()) return MarkResult{};
  std::vector<ef::Hash128> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    hashes[i] = ef::HashItem(items[i], impl_->configured.seed);
  MarkPlan plan;
  plan.user = std::string(user);
  plan.items = plan.entries = items.size();
  ef::AppendServedFingerprints(hashes.data(), hashes.size(), impl_->served_width,
                               &plan.fingerprints);
  return WriteMarks({&plan, 1}, call).front();
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

void Client::Impl::PlanMarks(std::string_view user, std::span<const std::string_view> candidates,
                             size_t n, Result* r, MarkPlan* plan) const {
  *plan = MarkPlan{};
  r->marked.assign(candidates.size(), false);
  r->marked_count = 0;
  if (!r->ok || r->failed_open) return;
  std::vector<ef::Hash128> hashes;
  for (size_t i = 0; i < candidates.size() && r->marked_count < n; ++i) {
    if (r->seen[i] || r->served[i] || r->near_duplicate[i]) continue;
    // docs/CONTENT.md rule 5's writers' rule (revision 2), in the ring: C when C != J.
    const bool mark = !r->cluster.empty() && ef::WritesClusterMark(candidates[i], r->cluster[i]);
    // The ring keeps every item this call marks: marking stops where the next
    // one (and its cluster's mark) would overwrite one marked before it.
    if (hashes.size() + 1 + (mark ? 1 : 0) > served_capacity) break;
    r->marked[i] = true;
    ++r->marked_count;
    hashes.push_back(ef::HashItem(candidates[i], configured.seed));
    if (mark) hashes.push_back(ef::HashItem(r->cluster[i], configured.seed));
  }
  if (hashes.empty()) return;
  plan->user = std::string(user);
  plan->items = r->marked_count;
  plan->entries = hashes.size();
  ef::AppendServedFingerprints(hashes.data(), hashes.size(), served_width, &plan->fingerprints);
}

Result Client::FilterAndPlanMark(std::string_view user,
                                 std::span<const std::string_view> candidates,
                                 std::span<const std::string_view> clusters, size_t n,
                                 const CallOptions& call, MarkPlan* plan) {
  Result r = SeenWithClusters(user, candidates, clusters, call);
  impl_->PlanMarks(user, candidates, n, &r, plan);
  return r;
}

std::vector<MarkResult> Client::WriteMarks(std::span<const MarkPlan> plans,
                                           const CallOptions& call) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : impl_->options.timeout);
  std::vector<Status> status;
  std::vector<size_t> filled;
  impl_->MarkPlans(plans, start, deadline, &status, &filled);
  std::vector<MarkResult> out(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    MarkResult& m = out[i];
    if (!status[i].ok()) {
      Add(impl_->counters.redis_errors, 1);
      Add(impl_->counters.mark_errors, 1);
      m.code = CodeOf(status[i]);
      m.error = status[i].message();
      if (impl_->options.on_error == OnError::kFailOpen) {
        m.failed_open = true;
      } else {
        m.ok = false;
      }
      continue;
    }
    Add(impl_->counters.marked, plans[i].items);
    m.marked = plans[i].items;
    m.filled = filled[i];
  }
  return out;
}

Result Client::FilterAndMarkWithClusters(std::string_view user,
                                         std::span<const std::string_view> candidates,
                                         std::span<const std::string_view> clusters, size_t n,
                                         const CallOptions& call) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (call.deadline.count() > 0 ? call.deadline : impl_->options.timeout);
  MarkPlan plan;
  Result r = FilterAndPlanMark(user, candidates, clusters, n, call, &plan);
  if (plan.entries == 0) return r;
  std::vector<Status> status;
  std::vector<size_t> filled;
  // What is left of the call's deadline (the read used the rest).
  impl_->MarkPlans({&plan, 1}, start, deadline, &status, &filled);
  const Status& st = status.front();
  if (!st.ok()) {
    Add(impl_->counters.redis_errors, 1);
    Add(impl_->counters.mark_errors, 1);
    r.marked.assign(candidates.size(), false);
    r.marked_count = 0;
    r.code = CodeOf(st);
    r.error = st.message();
    if (impl_->options.on_error == OnError::kFailOpen) {
      r.mark_failed = true;
    } else {
      impl_->Failed(st, false, &r);
    }
    return r;
  }
  Add(impl_->counters.marked, r.marked_count);
  return r;
}

}  // namespace exposure_filter
