#include "write/cluster_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "bloom/keys.h"
#include "common/printable.h"
#include "redis/meta.h"

namespace ef {

ClusterBitWriter::ClusterBitWriter(BitWriterOptions options, ClusterRouterOptions router)
    : options_(std::move(options)), router_(router), meta_router_(router) {
  options_.cluster_node = true;
}

ClusterBitWriter::~ClusterBitWriter() {
  if (in_flight_.valid()) in_flight_.wait();
}

void ClusterBitWriter::SetErrorObserver(std::function<void(RedisErrorKind)> observer) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  observer_ = std::move(observer);
  for (auto& [addr, w] : nodes_) w->SetErrorObserver(observer_);
}

void ClusterBitWriter::ForgetKeyStates() {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  for (auto& [addr, w] : nodes_) w->ForgetKeyStates();
}

const Layout* ClusterBitWriter::effective_layout() const {
  return effective_ ? &*effective_ : nullptr;
}

Status ClusterBitWriter::EnsureMeta(const Layout& layout, Layout* effective) {
  std::lock_guard<std::mutex> lock(meta_mu_);
  // As RedisBitWriter::CheckMeta: a lost meta comes back as last read.
  Status st =
      ::ef::EnsureMeta(meta_router_, layout, effective, effective_ ? &*effective_ : nullptr);
  if (st.ok()) effective_ = *effective;
  return st;
}

std::vector<NodeAddress> ClusterBitWriter::node_writers() const {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  std::vector<NodeAddress> out;
  for (const auto& [addr, w] : nodes_) out.push_back(addr);
  return out;
}

RedisBitWriter& ClusterBitWriter::Node(const NodeAddress& master) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  auto it = nodes_.find(master);
  if (it != nodes_.end()) return *it->second;
  BitWriterOptions o = options_;
  o.redis.host = master.host;
  o.redis.port = master.port;
  if (o.layout) {
    o.ensure_meta = [this](const Layout& layout, Layout* effective) {
      return EnsureMeta(layout, effective);
    };
  }
  auto w = std::make_unique<RedisBitWriter>(std::move(o));
  if (observer_) w->SetErrorObserver(observer_);
  return *nodes_.emplace(master, std::move(w)).first->second;
}

Status ClusterBitWriter::Fail(RedisErrorKind kind, Status st) {
  last_error_ = kind;
  if (observer_ && kind != RedisErrorKind::kNone) observer_(kind);
  return st;
}

Status ClusterBitWriter::Write(const BitBatch& batch, WriteStats* stats) {
  Status st = WriteRounds(batch, stats);
  // Every node write WriteRounds sent is awaited: none is in flight now.
  RetireGoneNodes();
  return st;
}

void ClusterBitWriter::RetireGoneNodes() {
  const uint64_t reads = router_.stats().topology_reads;
  if (reads == retired_at_reads_) return;
  retired_at_reads_ = reads;
  const auto& shards = router_.slot_map().shards();
  std::vector<std::unique_ptr<RedisBitWriter>> gone;
  std::string names;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      const bool master = std::any_of(shards.begin(), shards.end(), [&](const SlotMap::Shard& s) {
        return s.master == it->first;
      });
      if (master) {
        ++it;
        continue;
      }
      names += (names.empty() ? "" : ", ") + it->first.ToString();
      gone.push_back(std::move(it->second));
      it = nodes_.erase(it);
    }
  }
  if (gone.empty()) return;
  // Destroyed outside the lock: each joins its thread and closes its connection.
  gone.clear();
  spdlog::info(
      "redis cluster: {} no longer master(s) in the slot map; their writers (connection, "
      "expire cache) released, {} left",
      names, node_writers().size());
}

namespace {

// An error that needs a person (auth, a layout mismatch): kept over others.
inline bool FinalError(const Status& st) {
  return st.code() == StatusCode::kPermissionDenied || st.code() == StatusCode::kFailedPrecondition;
}

}  // namespace

Status ClusterBitWriter::WriteRounds(const BitBatch& batch, WriteStats* stats) {
  WriteStats total;
  EF_RETURN_IF_ERROR(RouteKeys(batch));
  std::string last_redirect;
  for (int round = 0; round < kMaxRounds && !pending_.empty(); ++round) {
    const size_t n_parts = MakeParts(batch);
    Round r;
    // A node writer runs one job at a time, and a master can have two parts in
    // a round (keys a MOVED sent there, and keys an ASK sent there, with
    // ASKING): the plain parts go out and are awaited first, then the ASKING
    // ones, so each wave has at most one part per node. (Both at once replaced
    // the first job, and its Await waited for ever: tests/cluster
    // cluster_writer_test.cc, "MOVED and by ASK in one round".)
    for (const bool asking : {false, true})
      RunWave(batch, n_parts, asking, &total, &r, &last_redirect);
    if (!r.failure.ok()) {
      (void)router_.Refresh();  // a master may have failed over: re-read before the retry
      if (stats) *stats = total;
      return Fail(r.failure_kind, r.failure);
    }
    if (r.moved) (void)router_.Refresh();
    pending_.swap(r.next);
  }
  if (stats) *stats = total;
  if (!pending_.empty()) {
    (void)router_.Refresh();
    return Fail(RedisErrorKind::kBusy,
                Unavailable("redis cluster: " + std::to_string(pending_.size()) +
                            " key(s) still redirected after " + std::to_string(kMaxRounds) +
                            " rounds, e.g. " + last_redirect));
  }
  LogRedirects();
  last_error_ = RedisErrorKind::kNone;
  return Status::Ok();
}

Status ClusterBitWriter::RouteKeys(const BitBatch& batch) {
  if (!discovered_) {
    Status st = router_.Discover();
    if (!st.ok()) return Fail(RedisErrorKind::kConnect, st);
    discovered_ = true;
  }
  // Where each key goes: its slot's master, or where a redirection pointed.
  route_.resize(batch.size);
  pending_.clear();
  for (size_t k = 0; k < batch.size; ++k) {
    const NodeAddress* master = router_.slot_map().MasterOf(KeySlot(batch.keys[k].key));
    if (!master) {
      // A slot without a master: the map is stale, or the cluster is down.
      (void)router_.Refresh();
      master = router_.slot_map().MasterOf(KeySlot(batch.keys[k].key));
      if (!master)
        return Fail(RedisErrorKind::kBusy,
                    Unavailable("redis cluster: no master serves the slot of '" +
                                Printable(batch.keys[k].key) + "' (CLUSTERDOWN?)"));
    }
    route_[k] = {*master, false};
    pending_.push_back(k);
  }
  return Status::Ok();
}

size_t ClusterBitWriter::MakeParts(const BitBatch& batch) {
  // One part per (node, ASKING), in a stable order.
  std::map<std::pair<NodeAddress, bool>, size_t> index;
  size_t n_parts = 0;
  for (size_t k : pending_) {
    auto [it, added] = index.emplace(std::make_pair(route_[k].node, route_[k].asking), n_parts);
    if (added) {
      if (parts_.size() <= n_parts) parts_.emplace_back();
      Part& p = parts_[n_parts++];
      p.node = route_[k].node;
      p.asking = route_[k].asking;
      p.keys.clear();
      p.batch.Clear();
    }
    Part& p = parts_[it->second];
    if (p.batch.keys.size() <= p.batch.size) p.batch.keys.emplace_back();
    p.batch.keys[p.batch.size++] = batch.keys[k];
    p.keys.push_back(k);
  }
  return n_parts;
}

void ClusterBitWriter::RunWave(const BitBatch& batch, size_t n_parts, bool asking,
                               WriteStats* total, Round* r, std::string* last_redirect) {
  for (size_t i = 0; i < n_parts; ++i) {
    if (parts_[i].asking != asking) continue;
    RedisBitWriter& w = Node(parts_[i].node);
    w.set_asking(asking);
    w.Send(parts_[i].batch);
  }
  for (size_t i = 0; i < n_parts; ++i) {
    const Part& p = parts_[i];
    if (p.asking != asking) continue;
    RedisBitWriter& w = Node(p.node);
    WriteStats ws;
    Status st = w.Await(&ws);
    w.set_asking(false);
    *total += ws;
    if (st.ok()) {
      TakeRedirects(batch, p, w, r, last_redirect);
    } else if (r->failure.ok() || FinalError(st)) {
      // Keep the most final error: auth and layout errors need a person.
      r->failure = st;
      r->failure_kind = w.last_error_kind();
    }
  }
}

void ClusterBitWriter::TakeRedirects(const BitBatch& batch, const Part& p, const RedisBitWriter& w,
                                     Round* r, std::string* last_redirect) {
  for (const auto& red_key : w.redirects()) {
    const size_t k = p.keys[red_key.key];
    std::optional<Redirect> red = ParseRedirect(red_key.error);
    if (!red) continue;  // cannot happen: the node writer parsed it
    NodeAddress to = red->address;
    if (to.host.empty()) to.host = p.node.host;  // "MOVED 3999 :6381": the same host
    r->moved = r->moved || red->kind == Redirect::Kind::kMoved;
    ++(red->kind == Redirect::Kind::kMoved ? moved_keys_ : asked_keys_);
    route_[k] = {to, red->kind == Redirect::Kind::kAsk};
    r->next.push_back(k);
    *last_redirect = "'" + Printable(batch.keys[k].key) + "': " + red_key.error;
  }
}

void ClusterBitWriter::LogRedirects() {
  if (moved_keys_ + asked_keys_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - logged_at_ < std::chrono::seconds(10)) return;
  spdlog::info(
      "redis cluster: {} key write(s) followed a MOVED and {} an ASK since the last report "
      "(slots moving between masters, or a failover); topology re-read {} time(s) in all",
      moved_keys_, asked_keys_, router_.stats().topology_reads);
  moved_keys_ = asked_keys_ = 0;
  logged_at_ = now;
}

void ClusterBitWriter::Send(const BitBatch& batch) {
  in_flight_ =
      std::async(std::launch::async, [this, &batch] { return Write(batch, &in_flight_stats_); });
}

Status ClusterBitWriter::Await(WriteStats* stats) {
  Status st = in_flight_.get();
  if (stats) *stats = in_flight_stats_;
  return st;
}

bool ClusterBitWriter::WaitReady(int64_t timeout_ms) {
  return !in_flight_.valid() ||
         in_flight_.wait_for(std::chrono::milliseconds(timeout_ms)) == std::future_status::ready;
}

bool ClusterBitWriter::Ready() {
  return !in_flight_.valid() ||
         in_flight_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace ef
