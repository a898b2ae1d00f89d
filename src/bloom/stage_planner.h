// StagePlanner: the writer's side of layout v2 (docs/FORMAT.md rule 8) for one
// key of a batch: which stage each new item goes to, and the positions to set.
// Items go to the key's current stage (the newest present) until its set bits
// reach the stage's `fill`; then the next stage starts. Within a batch the fill
// is estimated (each item adds k_s * (1 - fill / m_s) bits, the expectation for
// random positions); the writer replaces the estimate by the true count from the
// old bits its writes return, so the error does not accumulate across batches.
// Past the last stage's fill, items still go into the last stage (counted:
// `limit_items`): a user that active sees more false positives, never a miss.
// Not thread-safe; reuses its storage across keys.
#pragma once

#include <cstdint>
#include <vector>

#include "bloom/hash.h"
#include "bloom/stages.h"
#include "bloom/unique_positions.h"

namespace ef {

// What the writer knows about a key: the stage it fills and that stage's set bits.
struct StageState {
  uint32_t stage = 0;
  uint32_t fill = 0;
};

class StagePlanner {
 public:
  struct Group {
    uint32_t stage;
    size_t begin, end;  // positions()[begin, end): sorted, unique
  };

  explicit StagePlanner(const std::vector<Stage>& stages) : stages_(stages) {}

  // Plans `n` items from `state`; skip (may be null) marks items already present
  // (not placed, not counted); `rule` is the key's bucket's position rule. Returns false if every
  // placed item stays in stage 0 and nothing is skipped: the caller can then write stage 0's
  // positions as the coalescer computed them (no groups are made). Else fills groups() (at most one
  // per stage, ascending; none if every item is skipped).
  bool Plan(StageState state, const Hash128* items, size_t n, const uint8_t* skip,
            PositionRule rule, StageStats* stats);

  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<uint32_t>& positions() const { return positions_; }

 private:
  const std::vector<Stage>& stages_;
  std::vector<uint8_t> stage_of_;  // per item; 0xff = skipped
  std::vector<Group> groups_;
  std::vector<uint32_t> positions_;
  UniquePositions unique_;  // each group's sort and dedupe
};

}  // namespace ef
