// The Redis edge as the pipeline sees it. Implemented by RedisBitWriter and by an
// in-memory fake in tests.
#pragma once

#include <cstdint>

#include "bloom/bit_batch.h"
#include "common/status.h"

namespace ef {

struct WriteStats {
  uint64_t commands = 0;      // Redis commands sent
  uint64_t bits = 0;          // positions sent (after per-key dedupe)
  uint64_t keys = 0;          // keys written
  uint64_t skipped_keys = 0;  // keys Redis refused for good (e.g. WRONGTYPE): logged, counted
};

class BitSink {
 public:
  virtual ~BitSink() = default;
  // Writes every key of the batch (bits and expiry) and returns once Redis has
  // acknowledged all of it. Idempotent: the same batch may be written again.
  // kUnavailable = nothing may be assumed written; retry the whole batch.
  virtual Status Write(const BitBatch& batch, WriteStats* stats) = 0;
};

}  // namespace ef
