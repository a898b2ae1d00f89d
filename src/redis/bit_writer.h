// RedisBitWriter: the BitSink over one pipelined Redis connection.
// Per key and batch: `BITFIELD key SET u1 p1 1 SET u1 p2 1 ...` (write_mode
// bitfield) or one `SETBIT key p 1` per position (setbit), then `EXPIREAT key t`
// unless the expire cache (redis/expire_cache.h) knows the key already has that
// expiry. Commands are pipelined in rounds of at most max_commands_per_round;
// replies are scanned, not materialised.
// Send/Await run the write on a background thread of the writer, so that the
// pipeline decodes the next batch meanwhile; Write runs on the caller's thread.
//
// Self-healing expiry. A key can lose its data behind the writer's back (DEL,
// eviction, FLUSHDB, a restart without persistence, a replica's full resync)
// while the expire cache still trusts its EXPIREAT. So when the cache skips
// EXPIREAT, the write itself tells whether the key held data: BITFIELD reads,
// first, the cache's sentinel (`GET u1 q`: a bit this writer set in the write
// that carried the acknowledged EXPIREAT), and every `SET u1` / `SETBIT` returns
// the old bit. If no old bit was 1, the key may be new, and the writer sends
// its EXPIREAT in a follow-up round of the same Write, before returning OK.
// Why a key that exists without a TTL gets one (bits are only ever set, never
// cleared, by writers; a key's TTL goes only with the key, unless a client
// removes it while keeping the data: PERSIST, RESTORE with ttl 0, SET):
// - A key's lifetime ("incarnation") starts with a write to an absent key. That
//   write reads all old bits 0 (an absent key reads as zeros), so its writer
//   sends EXPIREAT — with the write on a cache miss, as follow-up on a hit —
//   before its Write succeeds. A Write that fails forgets its keys in the cache
//   (a reconnect clears it), so its retry sends EXPIREAT with the write.
// - A later write that reads some old bit 1 sees data of that same incarnation:
//   its first write set the TTL, which only a client's PERSIST-like command can
//   remove. Skipping EXPIREAT is then safe.
// Residual cases: (1) the TTL removed while the data stays (PERSIST, a restore
// from a dump without TTL): healed by the expire_refresh re-send on the key's
// next write after that; a key never written again keeps no TTL — restore tools
// must keep TTLs. (2) The first writer of a new incarnation dies between its
// write and its follow-up EXPIREAT, and the batch is retried by another daemon
// whose cache trusts the key and whose write reads an old bit 1 (its sentinel or
// its positions set by the dead writer): healed like (1).
// In steady state the saving stays: a key written before in its incarnation
// reads its sentinel as 1 (one more BITFIELD operation, no extra command); in
// setbit mode (no sentinel) only some old bit of the write itself counts, so
// sparse keys get more follow-up EXPIREATs.
//
// Connections: a lost connection is re-established on the next Write; the
// expire cache is then cleared and, if options.layout is set, `<prefix>meta` is
// ensured (created if absent, else compared), as it is after a Write found keys
// lost. A layout that differs from the stored one is final: that Write and every
// later one return kFailedPrecondition, without reconnecting. READONLY and
// MASTERDOWN replies drop the connection (redis/connection.h); other retriable
// replies (LOADING, BUSY, OOM, ...) fail the Write (kUnavailable) and keep it.
// NOAUTH/WRONGPASS/NOPERM replies fail it with kPermissionDenied. WRONGTYPE on a
// key is that key's problem alone: it is logged, counted and skipped, so one bad
// key cannot stall the stream. Keys in log lines and errors go through
// Printable (common/printable.h).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bloom/layout.h"
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
  // Set: `<prefix>meta` is ensured (created if absent, else compared) on every
  // (re)connect, so a Redis that restarted empty gets it back.
  std::optional<Layout> layout;
};

// From redis.* config keys (write_mode, expire cache), over `redis`; no layout.
BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis);
// The same, with the layout whose meta the writer ensures on every (re)connect.
BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis,
                                            const Layout& layout);

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
  // What one Write learnt about a key of its batch.
  struct KeyState {
    bool expire_sent = false;  // EXPIREAT went with the write (cache miss)
    bool expire_set = false;   // an EXPIREAT of this Write returned 1
    bool old_bit_set = false;  // a reply of the write showed an old bit 1
    bool failed = false;       // the key's write was refused (WRONGTYPE)
  };

  Status WriteOnce(const BitBatch& batch, WriteStats* stats);
  Status EnsureConnected();
  // EnsureMeta if options_.layout; a mismatch sets fatal_.
  Status CheckMeta(RedisConnection& conn);
  // Sends buffer_ (`commands` commands); replies into errors_ and ints_.
  Status Pipeline(size_t commands);
  Status Fail(RedisErrorKind kind, Status st);
  // The Write's result for an error reply about `key` (not WRONGTYPE): drops the
  // connection on READONLY/MASTERDOWN; kPermissionDenied for auth errors, else
  // kUnavailable.
  Status ReplyFailure(const char* what, const std::string& key,
                      const RedisConnection::ReplyError& e);
  // Appends the commands of one key; returns how many commands it appended.
  // probe: read that bit first (BITFIELD GET), as the reply's first integer.
  size_t AppendKey(const KeyBits& kb, bool with_expire, const uint32_t* probe);
  void AppendExpire(const KeyBits& kb);
  void LogLostKeys(const BitBatch& batch, int64_t now_s);
  void WorkerLoop();

  BitWriterOptions options_;
  std::unique_ptr<RedisConnection> conn_;
  ExpireCache expire_cache_;
  std::string buffer_;
  std::vector<size_t> command_key_;  // for each command of the round: its key index
  std::vector<KeyState> key_state_;  // per key of the batch
  std::vector<size_t> follow_up_;    // keys that get EXPIREAT in a follow-up round
  std::vector<RedisConnection::ReplyError> errors_;
  std::vector<ReplyScanner::Ints> ints_;  // per command of the round
  Status fatal_;                          // set once the stored layout differs
  uint64_t lost_keys_ = 0;                // since the last log line about them
  int64_t lost_logged_at_s_ = 0;
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
