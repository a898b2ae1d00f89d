// The Redis edge as the pipeline sees it. Implemented by RedisBitWriter and by an
// in-memory fake in tests.
#pragma once

#include <cstdint>

#include "bloom/bit_batch.h"
#include "common/status.h"

namespace ef {

struct WriteStats {
  uint64_t commands = 0;         // Redis commands sent
  uint64_t bits = 0;             // positions sent (after per-key dedupe)
  uint64_t keys = 0;             // keys written
  uint64_t skipped_keys = 0;     // keys Redis refused for good (e.g. WRONGTYPE): logged, counted
  uint64_t expires_skipped = 0;  // EXPIREATs not sent: the key already has that expiry

  WriteStats& operator+=(const WriteStats& o) {
    commands += o.commands;
    bits += o.bits;
    keys += o.keys;
    skipped_keys += o.skipped_keys;
    expires_skipped += o.expires_skipped;
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
  virtual Status Await(WriteStats* stats) {
    const BitBatch* batch = in_flight_;
    in_flight_ = nullptr;
    return Write(*batch, stats);
  }

 private:
  const BitBatch* in_flight_ = nullptr;
};

}  // namespace ef
