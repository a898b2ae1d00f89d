// RedisSink: the BitSink the programs write with, for redis.*: a RedisBitWriter
// for one Redis node, or a ClusterBitWriter for Redis Cluster (redis.cluster true,
// or auto on a cluster). With redis.cluster auto the choice is made at the first
// Write, by asking the seeds (UseCluster); while none answers, Writes fail with
// kUnavailable and are retried like any write to an unreachable Redis.
// Thread-compatible like the writers; ForgetKeyStates is thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "pipeline/sink.h"
#include "write/bit_writer.h"
#include "write/cluster_writer.h"

namespace ef {

class RedisSink : public BitSink {
 public:
  explicit RedisSink(BitWriterOptions options);
  ~RedisSink() override;

  Status Write(const BitBatch& batch, WriteStats* stats) override;
  void Send(const BitBatch& batch) override;
  Status Await(WriteStats* stats) override;
  bool Ready() override;
  bool WaitReady(int64_t timeout_ms) override;
  void ForgetKeyStates() override;

  // Called once per error reply or failure kind (RedisBitWriter::SetErrorObserver).
  void SetErrorObserver(std::function<void(RedisErrorKind)> observer);
  // True once the writer was chosen and it is the cluster writer.
  bool cluster() const { return cluster_ != nullptr; }

 private:
  Status Resolve();
  BitSink* target() const;

  BitWriterOptions options_;
  std::function<void(RedisErrorKind)> observer_;
  std::unique_ptr<RedisBitWriter> single_;
  std::unique_ptr<ClusterBitWriter> cluster_;
  std::atomic<BitSink*> target_{nullptr};  // single_ or cluster_, once chosen
  std::atomic<bool> forget_{false};        // ForgetKeyStates before the writer existed
  Status send_failed_;                     // Send could not choose the writer
};

}  // namespace ef
