// What users cost under layout version 4 (docs/FORMAT.md rule 11: a size class
// per key), for `exposure-filter size`, beside the version-3 figures of
// capacity/activity.h.
//
// Assumption: activity persists. A user's previous bucket held as many items as
// today's, so the writer's class rule (ChooseClass) takes the user's own
// multiple x n0 as its estimate, and the key then fills the class's stages by
// the stage model of capacity/activity.h (CostOfUser with the class's table).
// With activity that changes from day to day the figures differ (docs/DESIGN.md
// models both). Pure and thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "bloom/stages.h"
#include "capacity/activity.h"

namespace ef {

struct ClassTables {
  StageParams params;                      // the layout's (Layout::Params)
  std::vector<std::vector<Stage>> tables;  // Layout::class_tables of its version-4 form
  bool empty() const { return tables.empty(); }
};

struct ClassedCost {
  uint32_t size_class = 0;
  UserCost cost;  // with the class's table
};

// A user at `multiple` x n0 whose previous bucket held as much (tables non-empty).
ClassedCost CostOfUserV4(const ClassTables& classes, int64_t n0, double multiple, uint32_t buckets);

// ComputeActivityTotals for version 4 under the same assumption: users_by_stages
// has one entry per stage of the longest class table. Zipf totals are exact over
// the ranks: the cost is constant between the multiples where the class or the
// stages used change.
ActivityTotals ComputeActivityTotalsV4(const Activity& activity, const ClassTables& classes,
                                       int64_t n0, uint32_t buckets, uint64_t users);

}  // namespace ef
