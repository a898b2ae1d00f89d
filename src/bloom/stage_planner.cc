#include "bloom/stage_planner.h"

#include <algorithm>

namespace ef {

bool StagePlanner::Plan(StageState state, const Hash128* items, size_t n, const uint8_t* skip,
                        PositionRule rule, StageStats* stats) {
  groups_.clear();
  positions_.clear();
  stage_of_.assign(n, 0xff);
  const uint32_t last = static_cast<uint32_t>(stages_.size() - 1);
  uint32_t s = std::min(state.stage, last);
  double fill = state.fill;
  bool any_skipped = false, beyond0 = s > 0, at_limit = false;
  for (size_t i = 0; i < n; ++i) {
    if (skip && skip[i]) {
      any_skipped = true;
      continue;
    }
    if (fill >= stages_[s].fill) {
      if (s < last) {
        if (s == 0) {
          ++stats->stage0_advances;
          stats->stage0_fill_ppm_sum +=
              static_cast<uint64_t>(fill * 1e6 / static_cast<double>(stages_[0].m));
        }
        ++s;
        fill = 0;
        beyond0 = true;
        ++stats->advances;
      } else {
        ++stats->limit_items;
        at_limit = true;
      }
    }
    stage_of_[i] = static_cast<uint8_t>(s);
    ++stats->items[s];
    const Stage& st = stages_[s];
    fill += st.k * (1.0 - fill / st.m);
  }
  if (at_limit) ++stats->limit_keys;
  if (!beyond0 && !any_skipped) return false;
  // One group per stage used, ascending (stages only grow along the items).
  for (size_t i = 0; i < n;) {
    if (stage_of_[i] == 0xff) {
      ++i;
      continue;
    }
    const uint32_t stage = stage_of_[i];
    const Stage& st = stages_[stage];
    const size_t begin = positions_.size();
    for (; i < n && (stage_of_[i] == stage || stage_of_[i] == 0xff); ++i) {
      if (stage_of_[i] == 0xff) continue;
      const size_t at = positions_.size();
      positions_.resize(at + st.k);
      ComputeStagePositions(items[i], st, rule, positions_.data() + at);
    }
    // Sorted and unique: the writer's lost-key check takes any old bit 1 of a
    // write as data already in the key, and a position repeated in one BITFIELD
    // reads 1 the second time (without it, redis_writer_test "(v2): stages grow,
    // known keys cost no read, a lost key heals" fails: no EXPIREAT after a DEL).
    uint32_t* end = unique_.Run(positions_.data() + begin, positions_.data() + positions_.size(),
                                static_cast<uint32_t>(st.offset), st.m);
    positions_.resize(static_cast<size_t>(end - positions_.data()));
    groups_.push_back(Group{stage, begin, positions_.size()});
  }
  return true;
}

}  // namespace ef
