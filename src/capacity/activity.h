// What users of a given activity cost under a layout's stages (bloom/stages.h),
// and the `--activity` distributions of `exposure-filter size`.
//
// Activity is a multiple of the design load n_0 = filter.items_per_bucket: a
// user at 4x puts 4 * n_0 items into each of its bucket keys.
//
// Stage model (the ideal one the writer follows, bloom/stage_planner.h): items
// fill stage 0 until its expected set bits reach fill_0, then stage 1, and so on.
// A stage with x items has m_s * (1 - e^(-k_s x / m_s)) bits set in expectation,
// so stage s is full with
//   x_s = -(m_s / k_s) * ln(1 - fill_s / m_s)     items (infinite if fill_s = m_s);
// the last stage takes the rest up to its fill. Past that the user is "at the
// stage limit": a writer writes no further items into the key (docs/FORMAT.md
// rule 8, "Writers: fill accounting and the stage limit"), so the last stage
// stays at x_{S-1} items, the key keeps the FPR it had at the limit (bounded by
// about p_0 / (1 - r)), and the items past it are counted as not written (they
// may read as unseen). With one stage (v1) every item is written: its FPR
// climbs past the design load and nothing is counted. A stage with x items has
// FPR_s = (1 - e^(-k_s x / m_s))^k_s; a key's FPR is 1 - prod_s (1 - FPR_s) over
// the stages used (rule 6 of v2: seen iff some stage has all its positions set),
// a window's is 1 - (1 - FPR)^B. A key using stages 0..S-1 is a string of
// offset_{S-1} / 8 + ceil(m_{S-1} / 8) bytes (every stage written up to its end: an upper bound
// like v1's ceil(m / 8)). Stage boundaries allow a relative slack of kStageSlack so that a user
// exactly at a boundary (1x fills stage 0 at most to fill_0 by construction) is not pushed into the
// next stage by floating-point rounding. The model ignores the position rule's floor: with small
// m_s the measured rates run somewhat above it at 1x (docs/FORMAT.md).
//
// Distributions (ParseActivity):
//   "zipf:S"  U users ranked r = 1..U by activity; user r is at
//             ((U + 1) / (2 r))^S x n_0: activity proportional to r^-S, as
//             loadgen's Zipf users, scaled so that the median rank (U + 1) / 2
//             is at exactly 1x. 0 < S <= 5. Counts per stage are exact over
//             the ranks (no sampling).
//   "M:P,..." classes: P percent of the users at M x n_0 (M > 0, optional
//             trailing "x"; 0 < P <= 100, optional "%"; the P sum to 100 within
//             1e-6; no multiple twice). A class's user count is its share of U,
//             rounded by largest remainder so the counts sum to U exactly.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/stages.h"
#include "common/status.h"

namespace ef {

inline constexpr double kStageSlack = 1e-9;

// One activity class of a user: per bucket key.
struct UserCost {
  double multiple = 0;       // x n_0
  uint32_t stages_used = 0;  // 1..stages.size()
  bool at_limit = false;     // items past the last stage's fill
  // Of those, the items a writer does not write (rule 8: nothing past the stage
  // limit; 0 with one stage, where every item is written as under v1), and their
  // share of the user's multiple x n0 items per key: items that may read as unseen.
  double items_not_written = 0;
  double share_not_written = 0;
  uint64_t bytes_per_key = 0;
  double bucket_fpr = 0;  // 1 - prod(1 - FPR_s)
  double window_fpr = 0;  // 1 - (1 - bucket_fpr)^buckets
};

// Cumulative capacities in items: [S - 1] = x_0 + ... + x_{S-1} (may be +inf).
std::vector<double> StageCapacities(const std::vector<Stage>& stages);

// Bytes of a key that uses stages 0..stages_used-1 (1 <= stages_used <= size).
uint64_t KeyBytes(const std::vector<Stage>& stages, uint32_t stages_used);

// The model above for a user at `multiple` x n0 (multiple >= 0, n0 >= 1,
// stages non-empty).
UserCost CostOfUser(const std::vector<Stage>& stages, int64_t n0, double multiple,
                    uint32_t buckets);

struct ActivityClass {
  double multiple = 1;
  double percent = 100;
};

struct Activity {
  enum class Kind { kClasses, kZipf };
  Kind kind = Kind::kClasses;
  double zipf_s = 0;                             // kZipf
  std::vector<ActivityClass> classes{{1, 100}};  // kClasses; default: everybody at 1x
  // Canonical text that ParseActivity reads back, e.g. "zipf:1.1", "0.5:60,1:40".
  std::string ToString() const;
};

// Parses "zipf:S" or "M:P,M:P,...". kInvalidArgument with one line naming the
// bad part (the caller prefixes the option), e.g. "share 'x' in '4:x' is not a
// number", "shares sum to 95, not 100".
StatusOr<Activity> ParseActivity(std::string_view text);

struct ActivityTotals {
  uint64_t users = 0;
  std::vector<uint64_t> users_by_stages;  // [S - 1]: users whose keys use S stages
  uint64_t users_past_stage0 = 0;         // using 2 or more stages
  uint64_t users_at_limit = 0;            // past the last stage's fill
  unsigned __int128 bytes = 0;            // sum over users of bytes per key * buckets
  unsigned __int128 keys = 0;             // users * buckets
};

// Totals for `users` users, each active in every one of `buckets` buckets at
// its activity (the upper bound of the size report). Exact in 128 bits.
ActivityTotals ComputeActivityTotals(const Activity& activity, const std::vector<Stage>& stages,
                                     int64_t n0, uint32_t buckets, uint64_t users);

// Users whose multiple is at most `threshold` in the Zipf model of exponent s
// (all of them for an infinite threshold).
uint64_t ZipfUsersAtMost(double threshold, double s, uint64_t users);

// User counts per class, by largest remainder (sum = users); classes in order.
std::vector<uint64_t> ClassUsers(const std::vector<ActivityClass>& classes, uint64_t users);

}  // namespace ef
