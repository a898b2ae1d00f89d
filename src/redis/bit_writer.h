// RedisBitWriter: the BitSink over one pipelined Redis connection.
// Per key and batch: `BITFIELD key SET u1 p1 1 SET u1 p2 1 ...` (write_mode
// bitfield) or one `SETBIT key p 1` per position (setbit), then `EXPIREAT key t`
// unless the expire cache (redis/expire_cache.h) knows the key already has that
// expiry. Commands are pipelined in rounds of at most max_commands_per_round;
// replies are scanned, not materialised.
// Send/Await run the write on a background thread of the writer, so that the
// pipeline decodes the next batch meanwhile; Write runs on the caller's thread.
// A lost connection is re-established on the next Write (and the expire cache
// cleared). WRONGTYPE on a key is that key's problem alone: it is logged, counted
// and skipped, so one bad key cannot stall the stream; every other error fails
// the whole Write (retriable).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/sink.h"
#include "redis/connection.h"
#include "redis/expire_cache.h"

namespace ef {

enum class WriteMode { kBitfield, kSetbit };

struct BitWriterOptions {
  RedisOptions redis;
  WriteMode mode = WriteMode::kBitfield;
  size_t max_commands_per_round = 20000;
  size_t expire_cache_keys = 1000000;  // 0 = EXPIREAT with every write of a key
  int64_t expire_refresh_s = 600;      // re-send a cached EXPIREAT after this long
};

// From redis.* config keys (write_mode, expire cache), over `redis`.
BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis);

class RedisBitWriter : public BitSink {
 public:
  explicit RedisBitWriter(BitWriterOptions options);
  ~RedisBitWriter() override;

  Status Write(const BitBatch& batch, WriteStats* stats) override;
  void Send(const BitBatch& batch) override;
  Status Await(WriteStats* stats) override;
  bool Ready() override;

  // Error kind of the last failed Write (for metrics), kNone after a success.
  RedisErrorKind last_error_kind() const { return last_error_; }
  // Called once per error reply that was skipped or failed the write (from the
  // thread that runs the write).
  void SetErrorObserver(std::function<void(RedisErrorKind)> observer) {
    observer_ = std::move(observer);
  }

 private:
  Status EnsureConnected();
  // Appends the commands of one key; returns how many commands it appended.
  size_t AppendKey(const KeyBits& kb, bool with_expire);
  void WorkerLoop();

  BitWriterOptions options_;
  std::unique_ptr<RedisConnection> conn_;
  ExpireCache expire_cache_;
  std::string buffer_;
  std::vector<size_t> command_key_;  // for each command of the round: its key index
  std::vector<size_t> expire_sent_;  // keys whose EXPIREAT this Write sent
  std::vector<RedisConnection::ReplyError> errors_;
  RedisErrorKind last_error_ = RedisErrorKind::kNone;
  std::function<void(RedisErrorKind)> observer_;

  // Send/Await: one job at a time for the worker thread (started on first Send).
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  const BitBatch* job_ = nullptr;
  bool job_done_ = false;
  bool quit_ = false;
  Status job_status_;
  WriteStats job_stats_;
};

}  // namespace ef
