// Contract v2 (docs/FORMAT.md rule 8): a bucket key holds the stages 0,
// 1, 2, ... of one scalable Bloom filter (Almeida et al., 2007) in one Redis
// string. Stage 0 is the v1 filter (m_0 = m, k_0 = k, offset 0). For s >= 1:
//   k_s      = k_0 + s * k_step
//   m_s      = ceil(m_0 * growth^s * k_s / k_0)          (integer arithmetic)
//   offset_s = offset_{s-1} + 8 * ceil(m_{s-1} / 8)      (byte-aligned)
// so every stage has the bits per item of stage 0 scaled by k_s / k_0 (capacity
// n_s = n_0 * growth^s at the same design fill) and a false-positive rate about
// fill^(k_s), i.e. tighter by about fill^k_step (the paper's r) per stage.
// Position i of an item in stage s: offset_s + ((h1 + i*h2) mod 2^64) mod m_s
// (rule 2), or in a version-3 bucket offset_s + rule 9's position in [0, m_s).
// A stage exists in a value iff the value is longer than offset_s / 8 bytes.
// Writers start stage s+1 once stage s has `fill_s` bits set:
//   fill_s = ceil(m_s * fill_ppm / 10^6), fill_ppm = ceil(10^6 * (1 - e^(-k_0 n_0 / m_0))),
// the expected fill of stage 0 at its design load n_0 (filter.items_per_bucket).
// Everything here is pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "bloom/positions.h"
#include "common/status.h"

namespace ef {

struct Stage {
  uint32_t m = 0;       // bits
  uint32_t k = 0;       // positions per item
  uint64_t offset = 0;  // first bit, a multiple of 8
  uint32_t fill = 0;    // set bits at which writers start the next stage
};

struct StageParams {
  uint32_t m0 = 0;
  uint32_t k0 = 0;
  uint32_t growth = 2;     // capacity factor from one stage to the next, >= 1
  uint32_t k_step = 2;     // extra positions per stage
  uint32_t stages = 8;     // stage limit, >= 1 (1 = the v1 filter alone)
  uint32_t fill_ppm = 0;   // 1..999999 (only writers use it)
  uint64_t first_bit = 0;  // offset_0, a multiple of 8 (8 after a v4 class header)
};

// What a writer did with stages, per batch (summed over keys).
struct StageStats {
  static constexpr size_t kTrackedStages = 32;   // = the stage limit's maximum
  std::array<uint64_t, kTrackedStages> items{};  // items placed in stage s
  uint64_t advances = 0;                         // stages started
  uint64_t limit_items = 0;                      // items past the last stage's fill
  uint64_t limit_keys = 0;                       // keys that had such items
  uint64_t stage0_advances = 0;                  // advances out of stage 0 ...
  uint64_t stage0_fill_ppm_sum = 0;              // ... and stage 0's fill then (ppm of m_0)

  StageStats& operator+=(const StageStats& o);
};

// Stage table for the parameters. kInvalidArgument naming the parameter if a
// value is out of range or a stage would end past Redis's 2^32-bit string limit.
StatusOr<std::vector<Stage>> ComputeStages(const StageParams& p);

// ceil(10^6 * (1 - e^(-k0 n0 / m0))), clamped to 1..999999.
uint32_t DesignFillPpm(uint32_t m0, uint32_t k0, int64_t n0);

// How many stages a value of `value_bytes` bytes holds (>= 1: a missing or
// empty value is an empty stage 0).
inline size_t StagesPresent(const std::vector<Stage>& stages, size_t value_bytes) {
  size_t n = 1;
  while (n < stages.size() && value_bytes > stages[n].offset / 8) ++n;
  return n;
}

// The length in bytes of a value that holds stages 0 .. n-1 of `stages` to the
// end (1 <= n <= stages.size()).
inline uint64_t ValueBytes(const std::vector<Stage>& stages, size_t n) {
  const Stage& last = stages[n - 1];
  return last.offset / 8 + (static_cast<uint64_t>(last.m) + 7) / 8;
}

// Writes stage.k bit offsets (positions within the value) to out, by the
// bucket's position rule.
inline void ComputeStagePositions(Hash128 h, const Stage& stage, PositionRule rule, uint32_t* out) {
  ComputePositions(h, stage.m, stage.k, rule, out);
  for (uint32_t i = 0; i < stage.k; ++i) out[i] += static_cast<uint32_t>(stage.offset);
}

// Number of set bits of `value` in [stage.offset, stage.offset + stage.m).
uint32_t StagePopcount(std::string_view value, const Stage& stage);

// True iff all stage.k positions of h (by `rule`) are set in `value` (bits past
// the end are 0).
bool StageContains(std::string_view value, const Stage& stage, PositionRule rule, Hash128 h);

// True iff h is in some stage present in `value` (rule 6 for one key), with the
// positions of the key's bucket's rule.
bool ValueContains(std::string_view value, const std::vector<Stage>& stages, PositionRule rule,
                   Hash128 h);

}  // namespace ef
