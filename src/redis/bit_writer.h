// RedisBitWriter: the BitSink over one pipelined hiredis connection.
// Per key and batch: `BITFIELD key SET u1 p1 1 SET u1 p2 1 ...` (write_mode
// bitfield) or one `SETBIT key p 1` per position (setbit), then `EXPIREAT key t`.
// Commands are pipelined in rounds of at most max_commands_per_round.
// A lost connection is re-established on the next Write. WRONGTYPE on a key is
// that key's problem alone: it is logged, counted and skipped, so one bad key
// cannot stall the stream; every other error fails the whole Write (retriable).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/sink.h"
#include "redis/connection.h"

namespace ef {

enum class WriteMode { kBitfield, kSetbit };

struct BitWriterOptions {
  RedisOptions redis;
  WriteMode mode = WriteMode::kBitfield;
  size_t max_commands_per_round = 20000;
};

class RedisBitWriter : public BitSink {
 public:
  explicit RedisBitWriter(BitWriterOptions options);
  ~RedisBitWriter() override;

  Status Write(const BitBatch& batch, WriteStats* stats) override;

  // Error kind of the last failed Write (for metrics), kNone after a success.
  RedisErrorKind last_error_kind() const { return last_error_; }
  // Called once per error reply that was skipped or failed the write.
  void SetErrorObserver(std::function<void(RedisErrorKind)> observer) {
    observer_ = std::move(observer);
  }

 private:
  Status EnsureConnected();
  // Appends the commands of one key; returns how many commands it appended.
  size_t AppendKey(const KeyBits& kb);

  BitWriterOptions options_;
  std::unique_ptr<RedisConnection> conn_;
  std::string buffer_;
  std::vector<size_t> command_key_;  // for each command of the round: its key index
  std::vector<RedisConnection::ReplyError> errors_;
  RedisErrorKind last_error_ = RedisErrorKind::kNone;
  std::function<void(RedisErrorKind)> observer_;
};

}  // namespace ef
