// Layout v4's costs for `size` (capacity/activity_v4.h): per user, the class the
// writer's rule gives for a user whose previous bucket held as much, and the
// totals over classes and Zipf ranks against a user-by-user count; the FPR
// promise (2x the per-key target) over the activity range.
#include "capacity/activity_v4.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/sizing.h"

namespace ef {
namespace {

ClassTables DefaultClasses(int64_t n0 = 200, uint32_t stages = 8) {
  FilterConfig f;
  f.items_per_bucket = n0;
  f.stages = stages;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  l->v4 = true;
  REQUIRE(l->Finish().ok());
  return {l->Params(), l->class_tables};
}

}  // namespace

TEST_CASE("v4 cost: the class of the writer's rule, and the FPR within 2x of the key's target",
          "[activity][v4]") {
  const ClassTables classes = DefaultClasses();
  const auto sizing = ComputeSizing(200, 0.01, 30 * 86400, 86400);
  REQUIRE(sizing.ok());
  for (double x : {0.1, 0.5, 1.0, 2.0, 4.0, 16.0, 64.0, 200.0}) {
    INFO(x << "x");
    const ClassedCost c = CostOfUserV4(classes, 200, x, sizing->buckets);
    CHECK(c.size_class == ChooseClass(classes.params, classes.tables.size(), 200 * x));
    CHECK(c.cost.bytes_per_key <=
          KeyBytes(classes.tables[c.size_class], c.cost.stages_used));  // its own table's
    CHECK(c.cost.bytes_per_key >= SizeClassBytes(c.size_class) - 16);   // at least as created
    CHECK_FALSE(c.cost.at_limit);
    CHECK(c.cost.bucket_fpr <= 2 * sizing->bucket_fpr);
    // Stage 0 is sized for a third: a user persisting at its level uses stages 0 and 1
    // (or stage 0 alone in the smallest class, or more above the largest).
    if (c.size_class > 0 && c.size_class + 1 < classes.tables.size())
      CHECK(c.cost.stages_used == 2);
  }
}

TEST_CASE("v4 totals: classes and Zipf ranks match a user-by-user count", "[activity][v4]") {
  const int64_t n = 40;
  const uint32_t buckets = 8;
  const ClassTables classes = DefaultClasses(n, 4);
  size_t longest = 0;
  for (const auto& t : classes.tables) longest = std::max(longest, t.size());
  for (double s : {0.7, 1.1, 2.0}) {
    for (uint64_t users : {uint64_t{1}, uint64_t{1001}, uint64_t{20000}}) {
      INFO("s " << s << " users " << users);
      Activity a;
      a.kind = Activity::Kind::kZipf;
      a.zipf_s = s;
      const ActivityTotals t = ComputeActivityTotalsV4(a, classes, n, buckets, users);
      std::vector<uint64_t> by_stages(longest, 0);
      unsigned __int128 bytes = 0;
      uint64_t past0 = 0;
      for (uint64_t r = 1; r <= users; ++r) {
        const double multiple = std::pow((static_cast<double>(users) + 1) / (2.0 * r), s);
        const ClassedCost c = CostOfUserV4(classes, n, multiple, buckets);
        ++by_stages[c.cost.stages_used - 1];
        past0 += c.cost.stages_used > 1;
        bytes += static_cast<unsigned __int128>(c.cost.bytes_per_key) * buckets;
      }
      CHECK(t.users_by_stages == by_stages);
      CHECK(t.users_past_stage0 == past0);
      CHECK(t.bytes == bytes);
      CHECK(t.keys == static_cast<unsigned __int128>(users) * buckets);
    }
  }
  // Classes: the sum of each class's users' costs.
  auto mix = ParseActivity("0.5:60,1:25,4:10,16:4,64:1");
  REQUIRE(mix.ok());
  const ActivityTotals t = ComputeActivityTotalsV4(*mix, classes, n, buckets, 1000);
  unsigned __int128 bytes = 0;
  const std::vector<uint64_t> counts = ClassUsers(mix->classes, 1000);
  for (size_t i = 0; i < counts.size(); ++i)
    bytes += static_cast<unsigned __int128>(
                 CostOfUserV4(classes, n, mix->classes[i].multiple, buckets).cost.bytes_per_key) *
             buckets * counts[i];
  CHECK(t.bytes == bytes);
}

TEST_CASE("v4 totals: the README's mix costs less than under v3 when activity persists",
          "[activity][v4]") {
  const ClassTables classes = DefaultClasses();
  FilterConfig f;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  auto mix = ParseActivity("0.5:60,1:25,4:10,16:4,64:1");
  REQUIRE(mix.ok());
  const ActivityTotals v3 = ComputeActivityTotals(*mix, l->stage_table, 200, 31, 1000000);
  const ActivityTotals v4 = ComputeActivityTotalsV4(*mix, classes, 200, 31, 1000000);
  INFO("v3 " << static_cast<double>(v3.bytes) << " v4 " << static_cast<double>(v4.bytes));
  CHECK(v4.bytes < v3.bytes * 6 / 10);
}

}  // namespace ef
