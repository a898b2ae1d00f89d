#include "bloom/stage_planner.h"

#include <algorithm>
#include <cstring>

#include "bloom/positions.h"

namespace ef {

size_t StagePlanner::Distinct(const Hash128* items, size_t n) {
  distinct_.assign(items, items + n);
  std::sort(distinct_.begin(), distinct_.end(), [](const Hash128& a, const Hash128& b) {
    return a.h1 != b.h1 ? a.h1 < b.h1 : a.h2 < b.h2;
  });
  const auto end =
      std::unique(distinct_.begin(), distinct_.end(),
                  [](const Hash128& a, const Hash128& b) { return a.h1 == b.h1 && a.h2 == b.h2; });
  return static_cast<size_t>(end - distinct_.begin());
}

bool StagePlanner::BelowFill(StageState state, const Hash128* items, size_t n) {
  const Stage& st = (*stages_)[state.stage];
  const uint64_t fill = state.fill;
  // Each item adds at most k_s bits (repeats none): below fill_s after all of them,
  // no item starts a stage or reaches the limit.
  if (fill + uint64_t{st.k} * n < st.fill) return true;
  return fill + uint64_t{st.k} * Distinct(items, n) < st.fill;
}

bool StagePlanner::NeedsValue(StageState state, const Hash128* items, size_t n, Fit* fit) {
  if (fit) *fit = Fit::kUnknown;
  const uint32_t last = static_cast<uint32_t>(stages_->size() - 1);
  state.stage = std::min(state.stage, last);
  // At the stage limit nothing is written, whatever the bits.
  if (state.stage == last && state.fill >= (*stages_)[last].fill) return false;
  if (!BelowFill(state, items, n)) return true;
  if (fit) *fit = Fit::kBelowFill;
  return false;
}

bool StagePlanner::Plan(StageState state, const Hash128* items, size_t n, const uint8_t* skip,
                        PositionRule rule, StageStats* stats, Fit fit) {
  return PlanFrom(state, nullptr, items, n, skip, rule, stats, fit);
}

bool StagePlanner::PlanValue(std::string_view value, const Hash128* items, size_t n,
                             const uint8_t* skip, PositionRule rule, StageStats* stats) {
  StageState state;
  state.stage = static_cast<uint32_t>(StagesPresent(*stages_, value.size()) - 1);
  state.fill = StagePopcount(value, (*stages_)[state.stage]);
  return PlanFrom(state, &value, items, n, skip, rule, stats, Fit::kUnknown);
}

bool StagePlanner::InLeftStage(const Hash128& item, PositionRule rule) {
  for (const Left& l : left_) {
    const Stage& st = (*stages_)[l.stage];
    ComputePositions(item, st.m, st.k, rule, item_.data());
    bool all = true;
    for (uint32_t j = 0; j < st.k && all; ++j)
      all = (l.bits[item_[j] >> 3] & (0x80u >> (item_[j] & 7))) != 0;
    if (all) return true;
  }
  return false;
}

void StagePlanner::LoadStage(uint32_t s, const std::string_view* value) {
  const Stage& st = (*stages_)[s];
  const size_t bytes = (static_cast<size_t>(st.m) + 7) / 8;
  bits_.assign(bytes, 0);
  if (!value) return;
  const size_t first = st.offset / 8;
  if (value->size() <= first) return;
  std::memcpy(bits_.data(), value->data() + first, std::min(bytes, value->size() - first));
}

namespace {

// Every one of an item's k positions is set in a stage's bits (Redis bit order).
inline bool AllSet(const std::vector<uint8_t>& bits, const uint32_t* pos, uint32_t k) {
  bool all = true;
  for (uint32_t j = 0; j < k && all; ++j) all = (bits[pos[j] >> 3] & (0x80u >> (pos[j] & 7))) != 0;
  return all;
}

// Sets an item's k positions in a stage's bits; returns how many were 0.
inline uint64_t SetAll(std::vector<uint8_t>& bits, const uint32_t* pos, uint32_t k) {
  uint64_t added = 0;
  for (uint32_t j = 0; j < k; ++j) {
    uint8_t& byte = bits[pos[j] >> 3];
    const uint8_t mask = static_cast<uint8_t>(0x80u >> (pos[j] & 7));
    if (!(byte & mask)) {
      byte |= mask;
      ++added;
    }
  }
  return added;
}

inline size_t CountSkipped(const uint8_t* skip, size_t n) {
  size_t skipped = 0;
  if (skip)
    for (size_t i = 0; i < n; ++i) skipped += skip[i] != 0;
  return skipped;
}

}  // namespace

bool StagePlanner::PlanFrom(StageState state, const std::string_view* value, const Hash128* items,
                            size_t n, const uint8_t* skip, PositionRule rule, StageStats* stats,
                            Fit fit) {
  groups_.clear();
  runs_.clear();
  positions_.clear();
  present_ = 0;
  const uint32_t last = static_cast<uint32_t>(stages_->size() - 1);
  const uint32_t s = std::min(state.stage, last);
  const uint64_t fill = state.fill;
  start_ = StageState{s, state.fill};
  const size_t skipped = CountSkipped(skip, n);
  const uint64_t placed = n - skipped;

  // At the stage limit: nothing is written (counted), and no bit is needed.
  if (!value && s == last && fill >= (*stages_)[s].fill) {
    stats->limit_items += placed;
    if (placed) ++stats->limit_keys;
    return true;
  }
  // No item can bring the current stage to its fill: every item goes there (one that
  // is present already sets no bit), which needs no bits, even where the value was
  // read (a key the writer did not know: mostly new keys). Item by item only where
  // the bits decide (ef_microbench and scripts/bench.sh module mode, 2026-11-28:
  // this path was most of PlanFrom's 6.8% of the daemon's CPU).
  if ((skip ? fill + uint64_t{(*stages_)[s].k} * placed < (*stages_)[s].fill
            : fit == Fit::kBelowFill || BelowFill(StageState{s, state.fill}, items, n)))
    return PlanIntoStage(s, items, n, skip, skipped, rule, stats);

  const bool dropped_any = PlanItemByItem(s, fill, value, items, n, skip, rule, stats);
  if (dropped_any) ++stats->limit_keys;
  // Everything into stage 0 (or no item) and nothing left out: the coalescer's
  // positions are these.
  if (skipped == 0 && present_ == 0 && !dropped_any && !own_stage0_ &&
      (runs_.empty() || (runs_.size() == 1 && runs_[0].stage == 0)))
    return false;
  MakeGroups();
  return true;
}

bool StagePlanner::PlanIntoStage(uint32_t s, const Hash128* items, size_t n, const uint8_t* skip,
                                 size_t skipped, PositionRule rule, StageStats* stats) {
  stats->items[s] += n - skipped;
  if (s == 0 && skipped == 0 && !own_stage0_) return false;
  const Stage& st = (*stages_)[s];
  for (size_t i = 0; i < n; ++i) {
    if (skip && skip[i]) continue;
    const size_t at = positions_.size();
    positions_.resize(at + st.k);
    ComputeStagePositions(items[i], st, rule, positions_.data() + at);
  }
  if (!positions_.empty()) runs_.push_back(Group{s, 0, positions_.size()});
  MakeGroups();
  return true;
}

bool StagePlanner::PlanItemByItem(uint32_t s, uint64_t fill, const std::string_view* value,
                                  const Hash128* items, size_t n, const uint8_t* skip,
                                  PositionRule rule, StageStats* stats) {
  // Item by item, against the current stage's bits (rule 8 exactly, given them).
  const uint32_t last = static_cast<uint32_t>(stages_->size() - 1);
  LoadStage(s, value);
  bool dropped_any = false;
  item_.resize(stages_->back().k);
  // With skip (replay: items present in an older stage of the value read are
  // skipped), a stage this plan leaves is an older stage too: an item present in
  // its bits as this plan left them is skipped the same way (left_: empty until
  // a stage starts within the batch).
  left_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (skip && skip[i]) continue;
    if (!left_.empty() && InLeftStage(items[i], rule)) {
      ++present_;
      continue;
    }
    const Stage* st = &(*stages_)[s];
    ComputePositions(items[i], st->m, st->k, rule, item_.data());
    if (AllSet(bits_, item_.data(), st->k)) {
      ++present_;
      continue;
    }
    if (fill >= st->fill) {
      if (s == last) {
        ++stats->limit_items;
        dropped_any = true;
        continue;
      }
      fill = NextStage(&s, fill, value, skip != nullptr, stats);
      st = &(*stages_)[s];
      ComputePositions(items[i], st->m, st->k, rule, item_.data());
    }
    fill += SetAll(bits_, item_.data(), st->k);
    if (runs_.empty() || runs_.back().stage != s)
      runs_.push_back(Group{s, positions_.size(), positions_.size()});
    const uint32_t offset = static_cast<uint32_t>(st->offset);
    for (uint32_t j = 0; j < st->k; ++j) positions_.push_back(offset + item_[j]);
    runs_.back().end = positions_.size();
    ++stats->items[s];
  }
  return dropped_any;
}

uint64_t StagePlanner::NextStage(uint32_t* s, uint64_t fill, const std::string_view* value,
                                 bool keep_left, StageStats* stats) {
  if (*s == 0) {
    ++stats->stage0_advances;
    stats->stage0_fill_ppm_sum += fill * 1000000 / (*stages_)[0].m;
  }
  ++stats->advances;
  ++*s;
  if (keep_left) left_.push_back(Left{*s - 1, bits_});  // its bits, with this plan's
  LoadStage(*s, value);
  return value ? StagePopcount(*value, (*stages_)[*s]) : 0;
}

void StagePlanner::MakeGroups() {
  size_t out = 0;
  for (const Group& run : runs_) {
    const Stage& st = (*stages_)[run.stage];
    // Sorted and unique: the writer's lost-key check takes any old bit 1 of a
    // write as data already in the key, and a position repeated in one BITFIELD
    // reads 1 the second time (without it, redis_writer_test "(v2): stages grow,
    // known keys cost no read, a lost key heals" fails: no EXPIREAT after a DEL).
    uint32_t* end = unique_.Run(positions_.data() + run.begin, positions_.data() + run.end,
                                static_cast<uint32_t>(st.offset), st.m);
    const size_t len = static_cast<size_t>(end - (positions_.data() + run.begin));
    if (out != run.begin)
      std::memmove(positions_.data() + out, positions_.data() + run.begin, len * sizeof(uint32_t));
    groups_.push_back(Group{run.stage, out, out + len});
    out += len;
  }
  positions_.resize(out);
}

}  // namespace ef
