// The Redis edge as the pipeline sees it. Implemented by RedisBitWriter and by an
// in-memory fake in tests.
#pragma once

#include <cstdint>

#include "bloom/bit_batch.h"
#include "bloom/layout.h"
#include "bloom/stages.h"
#include "common/status.h"

namespace ef {

struct WriteStats {
  uint64_t commands = 0;      // Redis commands sent
  uint64_t bits = 0;          // positions sent (after per-key dedupe)
  uint64_t keys = 0;          // keys written
  uint64_t skipped_keys = 0;  // keys Redis refused for good (e.g. WRONGTYPE): logged, counted
  // Keys whose bucket had expired when written (EF.SETBITS refuses a past expiry;
  // the other modes' EXPIREAT deletes such a key at once): dropped, counted.
  uint64_t expired_keys = 0;
  uint64_t expires_skipped = 0;  // EXPIREATs not sent: the key already has that expiry
  uint64_t keys_read = 0;        // keys read first (layout v2: stage state unknown)
  uint64_t items_present = 0;    // items found already set by such a read (not written)
  StageStats stages;             // layout v2: where the items went

  WriteStats& operator+=(const WriteStats& o) {
    commands += o.commands;
    bits += o.bits;
    keys += o.keys;
    skipped_keys += o.skipped_keys;
    expired_keys += o.expired_keys;
    expires_skipped += o.expires_skipped;
    keys_read += o.keys_read;
    items_present += o.items_present;
    stages += o.stages;
    return *this;
  }
};

class BitSink {
 public:
  virtual ~BitSink() = default;
  // Writes every key of the batch (bits and expiry) and returns once Redis has
  // acknowledged all of it. Idempotent: the same batch may be written again.
  // kUnavailable = nothing may be assumed written; retry the whole batch.
  virtual Status Write(const BitBatch& batch, WriteStats* stats) = 0;

  // The same write split in two, so that the caller can prepare the next batch
  // while this one is on its way: Send starts writing `batch`, which must stay
  // unchanged until Await returns Write's result for it. At most one batch is in
  // flight, and Write must not be called meanwhile. By default Await does the
  // whole Write.
  virtual void Send(const BitBatch& batch) { in_flight_ = &batch; }
  // True when Await would return without waiting (the default Await writes
  // synchronously: always true).
  virtual bool Ready() { return true; }
  // Waits up to timeout_ms for Ready; true when ready, false when timeout_ms
  // passed first. The default cannot wait: true at once (Await then waits).
  virtual bool WaitReady(int64_t timeout_ms) {
    (void)timeout_ms;
    return true;
  }
  // The group's assignment changed: what the sink remembers about keys may be
  // stale (another writer may have written them meanwhile). Thread-safe.
  virtual void ForgetKeyStates() {}
  // The stored layout the last write followed (null: not known, or no layout):
  // the pipeline's coalescers take its version-3 rule from it. Call between writes.
  virtual const Layout* effective_layout() const { return nullptr; }
  virtual Status Await(WriteStats* stats) {
    const BitBatch* batch = in_flight_;
    in_flight_ = nullptr;
    return Write(*batch, stats);
  }

 private:
  const BitBatch* in_flight_ = nullptr;
};

}  // namespace ef
