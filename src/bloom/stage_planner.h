// StagePlanner: the writer's side of layouts v2 and v3 (docs/FORMAT.md rule 8,
// "Writers: fill accounting and the stage limit") for one key of a batch: which
// stage each item goes to, and the positions to set. It follows the rule exactly,
// item by item: an item whose positions in the key's current stage are all set is
// present (not written, starts nothing); otherwise, once the current stage's set
// bits have reached its `fill`, the next stage starts, and in the last stage the
// item is not written at all (counted: `limit_items`; the key keeps its designed
// false-positive rate, that user may see such an item again). The fill grows by
// the item's distinct positions that were 0, so repeats and items already there
// add nothing.
// Exactness needs the current stage's bits only where a stage may fill within the
// batch. The writer asks NeedsValue: if `fill + k_s * distinct items < fill_s`, no
// item of the batch can bring the stage to fill_s, and Plan from the state alone
// is exact (every item into the current stage; the writer learns the new fill from
// the old bits its write returns). Otherwise, or when the state is unknown, the
// writer reads the key and calls PlanValue. A key at the stage limit needs no
// read: nothing of it is written.
// Not thread-safe; reuses its storage across keys.
#pragma once

#include <cstdint>
#include <string_view>
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

  // What NeedsValue found of a batch, for Plan of the same state and items: with
  // kBelowFill, Plan does not count the distinct items again (a sort of the items'
  // hashes: 2.3% of the daemon's CPU in a module-mode drain when done twice).
  enum class Fit : uint8_t {
    kUnknown,    // Plan finds out itself
    kBelowFill,  // fill + k_s * distinct items < fill_s: every item into the stage
  };

  // `stages` must outlive the planner (or the next Use).
  explicit StagePlanner(const std::vector<Stage>& stages) : stages_(&stages) {}

  // Plans from here on with `stages` (which must outlive its use): layout v4 plans
  // each key by its class's table (docs/FORMAT.md rule 11). own_stage0: Plan and
  // PlanValue never return false (the caller has no stage-0 positions of this
  // table: the coalescer's are the meta's m, at offset 0).
  void Use(const std::vector<Stage>& stages, bool own_stage0) {
    stages_ = &stages;
    own_stage0_ = own_stage0;
  }

  // True if planning these items from `state` alone could break the rule: some item
  // may bring the current stage to its fill (fill + k_s * the number of distinct
  // items >= fill_s) and the key is not at the stage limit. Then read the key and
  // call PlanValue. fit (may be null): what to pass to Plan for these items and
  // this state (kUnknown unless the bound was found to hold).
  bool NeedsValue(StageState state, const Hash128* items, size_t n, Fit* fit = nullptr);

  // Plans `n` items from `state`, without the key's bits. Exact when NeedsValue is
  // false for them. Otherwise (a caller that does not read the key) the items'
  // positions are counted against the bits of this batch alone: an upper bound of
  // the fill, so a stage never passes fill_s but may start early. skip (may be null)
  // marks items not to write (not placed, not counted): a caller that passes it
  // skips items present in an older stage of the value (replay), and the plan
  // then also skips an item it wrote earlier into a stage it has since left
  // (counted in present()), so the batch follows that rule as a whole; `rule` is the key's
  // bucket's position rule. Returns false if every item goes into stage 0 and none
  // is skipped, present or dropped (and not own_stage0, see Use): the caller can then
  // write stage 0's positions as the coalescer computed them (no groups are made). Else fills
  // groups() (at most one per stage, ascending; none if nothing is to be written). fit:
  // NeedsValue's for the same state and items (kBelowFill from anything else makes the plan
  // inexact), or kUnknown.
  bool Plan(StageState state, const Hash128* items, size_t n, const uint8_t* skip,
            PositionRule rule, StageStats* stats, Fit fit = Fit::kUnknown);

  // The same from the key's value as just read (GET; "" for a missing key): the
  // state is the value's newest stage and its fill, and the plan follows the rule
  // exactly whatever the batch.
  bool PlanValue(std::string_view value, const Hash128* items, size_t n, const uint8_t* skip,
                 PositionRule rule, StageStats* stats);

  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<uint32_t>& positions() const { return positions_; }
  // Of the last plan: the state it started from, and how many items it found
  // present in the current stage (not written; repeats within the batch included;
  // with skip, also items it wrote earlier into a stage it has since left).
  // Items are looked up only where some item of the batch could bring the stage to
  // its fill: below that (fill + k_s * distinct items < fill_s) every item is
  // planned into the stage, present or not (its bits are set already: the same
  // bits), and present() is 0.
  StageState start() const { return start_; }
  uint64_t present() const { return present_; }

 private:
  bool PlanFrom(StageState state, const std::string_view* value, const Hash128* items, size_t n,
                const uint8_t* skip, PositionRule rule, StageStats* stats, Fit fit);
  // PlanFrom where no item can bring stage s to its fill: every item not skipped
  // into s (no bits needed). False (no groups) for stage 0 with nothing skipped.
  bool PlanIntoStage(uint32_t s, const Hash128* items, size_t n, const uint8_t* skip,
                     size_t skipped, PositionRule rule, StageStats* stats);
  // PlanFrom item by item against the bits of stage s (of *value, or zeros), from
  // its fill: runs_ and positions_ (not grouped yet), present_ counted. Returns
  // whether some item was dropped at the stage limit.
  bool PlanItemByItem(uint32_t s, uint64_t fill, const std::string_view* value,
                      const Hash128* items, size_t n, const uint8_t* skip, PositionRule rule,
                      StageStats* stats);
  // Starts stage *s + 1 (counted in stats; with keep_left, the stage left goes to
  // left_ with its bits): loads its bits and returns its fill from *value (0 without).
  uint64_t NextStage(uint32_t* s, uint64_t fill, const std::string_view* value, bool keep_left,
                     StageStats* stats);
  // The number of distinct items (by hash).
  size_t Distinct(const Hash128* items, size_t n);
  // fill + k_s * (distinct items) < fill_s in state.stage (<= the last stage).
  bool BelowFill(StageState state, const Hash128* items, size_t n);
  // bits_ := stage s's bits from *value (zeros past its end, or without a value).
  void LoadStage(uint32_t s, const std::string_view* value);
  // Sorts and dedupes each stage's run of positions_ and records the groups.
  void MakeGroups();

  const std::vector<Stage>* stages_;
  bool own_stage0_ = false;
  std::vector<uint8_t> bits_;  // the current stage's bits, Redis bit order
  std::vector<Group> runs_;    // per stage used: its run of positions_
  std::vector<Group> groups_;
  std::vector<uint32_t> positions_;
  std::vector<uint32_t> item_;     // one item's positions in its stage
  std::vector<Hash128> distinct_;  // NeedsValue's scratch
  // PlanFrom with skip: the stages this plan has left, with their bits as it
  // left them; InLeftStage: an item's positions all set in one of them.
  struct Left {
    uint32_t stage;
    std::vector<uint8_t> bits;
  };
  std::vector<Left> left_;
  bool InLeftStage(const Hash128& item, PositionRule rule);
  UniquePositions unique_;  // each group's sort and dedupe
  StageState start_;
  uint64_t present_ = 0;
};

}  // namespace ef
