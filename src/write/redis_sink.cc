#include "write/redis_sink.h"

#include <spdlog/spdlog.h>

#include "redis/cluster.h"

namespace ef {

RedisSink::RedisSink(BitWriterOptions options) : options_(std::move(options)) {}

RedisSink::~RedisSink() = default;

void RedisSink::SetErrorObserver(std::function<void(RedisErrorKind)> observer) {
  observer_ = std::move(observer);
  if (single_) single_->SetErrorObserver(observer_);
  if (cluster_) cluster_->SetErrorObserver(observer_);
}

BitSink* RedisSink::target() const { return target_.load(); }

Status RedisSink::Resolve() {
  if (target()) return Status::Ok();
  StatusOr<bool> use = UseCluster(options_.redis);
  if (!use.ok()) {
    if (observer_) observer_(RedisErrorKind::kConnect);
    return use.status();
  }
  if (*use) {
    auto router = ClusterOptionsFrom(options_.redis);
    if (!router.ok()) return router.status();
    spdlog::info("redis: Redis Cluster at {} (redis.cluster {})", router->seeds.front().ToString(),
                 options_.redis.cluster);
    cluster_ = std::make_unique<ClusterBitWriter>(options_, *router);
    if (observer_) cluster_->SetErrorObserver(observer_);
  } else {
    single_ = std::make_unique<RedisBitWriter>(options_);
    if (observer_) single_->SetErrorObserver(observer_);
  }
  BitSink* chosen = single_ ? static_cast<BitSink*>(single_.get()) : cluster_.get();
  target_.store(chosen);
  if (forget_.exchange(false)) chosen->ForgetKeyStates();
  return Status::Ok();
}

Status RedisSink::Write(const BitBatch& batch, WriteStats* stats) {
  EF_RETURN_IF_ERROR(Resolve());
  return target()->Write(batch, stats);
}

void RedisSink::Send(const BitBatch& batch) {
  send_failed_ = Resolve();
  if (send_failed_.ok()) target()->Send(batch);
}

Status RedisSink::Await(WriteStats* stats) {
  if (!send_failed_.ok()) {
    Status st = send_failed_;
    send_failed_ = Status::Ok();
    return st;
  }
  return target()->Await(stats);
}

bool RedisSink::WaitReady(int64_t timeout_ms) {
  if (!send_failed_.ok() || !target()) return true;
  return target()->WaitReady(timeout_ms);
}

bool RedisSink::Ready() {
  if (!send_failed_.ok() || !target()) return true;
  return target()->Ready();
}

void RedisSink::ForgetKeyStates() {
  // The writer is chosen on the Write thread; until then, Resolve passes it on.
  forget_ = true;
  if (BitSink* t = target()) {
    forget_ = false;
    t->ForgetKeyStates();
  }
}

}  // namespace ef
