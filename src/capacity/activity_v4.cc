#include "capacity/activity_v4.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bloom/size_classes.h"

namespace ef {

namespace {

size_t LongestTable(const ClassTables& classes) {
  size_t n = 0;
  for (const auto& t : classes.tables) n = std::max(n, t.size());
  return n;
}

// The multiples (x n0) at which the class or the stages used change, ascending.
std::vector<double> Breakpoints(const ClassTables& classes, int64_t n0) {
  const double n = static_cast<double>(n0);
  const StageParams& p = classes.params;
  std::vector<double> out;
  double lo = 0;  // the class's interval of multiples: (lo, hi]
  for (size_t c = 0; c < classes.tables.size(); ++c) {
    const bool last = c + 1 == classes.tables.size();
    const double hi =
        last ? std::numeric_limits<double>::infinity()
             : kClassSplit *
                   StageCapacity(SizeClassBits(static_cast<uint32_t>(c)), p.k0, p.fill_ppm) / n;
    for (double cap : StageCapacities(classes.tables[c])) {
      const double x = cap * (1 + kStageSlack) / n;
      if (x > lo && x < hi) out.push_back(x);
    }
    if (!last) out.push_back(hi);
    lo = hi;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void Count(const ClassedCost& c, uint64_t users, uint32_t buckets, ActivityTotals* t) {
  t->users_by_stages[c.cost.stages_used - 1] += users;
  if (c.cost.stages_used > 1) t->users_past_stage0 += users;
  if (c.cost.at_limit) t->users_at_limit += users;
  t->bytes += static_cast<unsigned __int128>(c.cost.bytes_per_key) * buckets * users;
}

}  // namespace

ClassedCost CostOfUserV4(const ClassTables& classes, int64_t n0, double multiple,
                         uint32_t buckets) {
  ClassedCost c;
  c.size_class = ChooseClass(classes.params, static_cast<uint32_t>(classes.tables.size()),
                             multiple * static_cast<double>(n0));
  c.cost = CostOfUser(classes.tables[c.size_class], n0, multiple, buckets);
  return c;
}

ActivityTotals ComputeActivityTotalsV4(const Activity& activity, const ClassTables& classes,
                                       int64_t n0, uint32_t buckets, uint64_t users) {
  ActivityTotals t;
  t.users = users;
  t.users_by_stages.assign(LongestTable(classes), 0);
  t.keys = static_cast<unsigned __int128>(users) * buckets;
  if (activity.kind == Activity::Kind::kClasses) {
    const std::vector<uint64_t> counts = ClassUsers(activity.classes, users);
    for (size_t i = 0; i < counts.size(); ++i)
      Count(CostOfUserV4(classes, n0, activity.classes[i].multiple, buckets), counts[i], buckets,
            &t);
    return t;
  }
  // Zipf: between two breakpoints every user costs the same; count the users there.
  std::vector<double> bounds = Breakpoints(classes, n0);
  bounds.push_back(std::numeric_limits<double>::infinity());
  double lo = 0;
  uint64_t below = 0;
  for (double hi : bounds) {
    const uint64_t at_most = ZipfUsersAtMost(hi, activity.zipf_s, users);
    const double x = std::isinf(hi) ? 2 * lo + 1 : lo > 0 ? std::sqrt(lo * hi) : hi / 2;
    if (at_most > below) Count(CostOfUserV4(classes, n0, x, buckets), at_most - below, buckets, &t);
    below = at_most;
    lo = hi;
  }
  return t;
}

}  // namespace ef
