// The stage model and --activity distributions of `exposure-filter size`
// (capacity/activity.h): the model against the formulas recomputed here, against
// the real writer's StagePlanner, the parser's good and bad inputs, and the
// distribution counts against a rank-by-rank count.
#include "capacity/activity.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/stage_planner.h"
#include "bloom/stages.h"

namespace ef {
namespace {

Layout LayoutFor(int64_t n, uint32_t stages) {
  FilterConfig f;
  f.items_per_bucket = n;
  f.stages = stages;
  StatusOr<Layout> l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

// The contract's stage formulas and the model of the size report, written out
// independently in long double (no code shared with the library).
struct Reference {
  uint32_t stages_used = 0;
  bool at_limit = false;
  long double not_written = 0;  // items past the last stage's fill (stages > 1)
  long double bytes = 0;
  long double bucket_fpr = 0;
};

Reference ReferenceCost(long double m0, long double k0, long double n0, long double growth,
                        long double k_step, int stages, long double multiple) {
  const long double fill_ppm = std::ceil(1e6L * (1 - std::exp(-k0 * n0 / m0)));
  long double items = multiple * n0, offset = 0, miss = 1;
  Reference r;
  for (int s = 0; s < stages; ++s) {
    const long double k = k0 + s * k_step;
    const long double m = std::ceil(m0 * std::pow(growth, s) * k / k0);
    const long double fill = std::ceil(m * fill_ppm / 1e6L);
    const long double capacity = -(m / k) * std::log(1 - fill / m);
    const bool last = s + 1 == stages;
    const bool fits = items <= capacity * (1 + 1e-9L);
    // Past the stage limit the last stage stops at its fill and the rest is not
    // written; a one-stage layout (v1) writes every item.
    const long double x = fits || (last && stages == 1) ? items : capacity;
    miss *= 1 - std::pow(1 - std::exp(-k * x / m), k);
    r.stages_used = static_cast<uint32_t>(s + 1);
    r.bytes = offset / 8 + std::ceil(m / 8);
    if (fits || last) {
      r.at_limit = !fits;
      r.not_written = items - x;
      break;
    }
    items -= capacity;
    offset += 8 * std::ceil(m / 8);
  }
  r.bucket_fpr = 1 - miss;
  return r;
}

}  // namespace

TEST_CASE("Stage model: stages and bytes and FPR per key follow the formulas",
          "[bloom][activity]") {
  for (int64_t n : {40, 200, 1000}) {
    for (uint32_t stages : {1u, 3u, 8u}) {
      const Layout l = LayoutFor(n, stages);
      for (double x : {0.25, 1.0, 2.0, 4.0, 16.0, 64.0, 1000.0}) {
        INFO("n=" << n << " stages=" << stages << " multiple=" << x);
        const UserCost c = CostOfUser(l.stage_table, n, x, 31);
        const Reference r = ReferenceCost(l.m, l.k, n, 2, 2, static_cast<int>(stages), x);
        CHECK(c.stages_used == r.stages_used);
        CHECK(c.at_limit == r.at_limit);
        CHECK(c.items_not_written ==
              Approx(static_cast<double>(r.not_written)).epsilon(1e-9).margin(1e-6));
        CHECK(c.share_not_written ==
              Approx(static_cast<double>(r.not_written / (x * n))).epsilon(1e-9).margin(1e-12));
        CHECK(c.bytes_per_key == static_cast<uint64_t>(r.bytes));
        CHECK(c.bucket_fpr == Approx(static_cast<double>(r.bucket_fpr)).epsilon(1e-9));
        CHECK(c.window_fpr ==
              Approx(static_cast<double>(1 - std::pow(1 - r.bucket_fpr, 31))).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("Stage model: 1x is the v1 filter, heavier users take more stages, FPR stays bounded",
          "[bloom][activity]") {
  const int64_t n = 200;
  const Layout l = LayoutFor(n, 8);
  const double v1 = std::pow(1 - std::exp(-static_cast<double>(l.k) * n / l.m), l.k);
  const UserCost one = CostOfUser(l.stage_table, n, 1, 31);
  CHECK(one.stages_used == 1);
  CHECK_FALSE(one.at_limit);
  CHECK(one.bytes_per_key == (l.m + 7) / 8);
  CHECK(one.bucket_fpr == Approx(v1).epsilon(1e-12));
  uint32_t previous = 1;
  for (double x : {4.0, 16.0, 64.0}) {
    const UserCost c = CostOfUser(l.stage_table, n, x, 31);
    INFO("multiple " << x);
    CHECK(c.stages_used > previous);
    previous = c.stages_used;
    CHECK_FALSE(c.at_limit);
    // The scalable filter's promise: within 2x the 1x rate at any load below the limit.
    CHECK(c.bucket_fpr > v1);
    CHECK(c.bucket_fpr < 2 * v1);
  }
  // Past the last stage's fill the user is at the limit: the last stage stops at
  // its fill, the items past it are not written (rule 8), and the rate stays
  // where it was at the limit, within the bound.
  const double limit = StageCapacities(l.stage_table).back() / n;
  const UserCost at = CostOfUser(l.stage_table, n, limit, 31);
  CHECK_FALSE(at.at_limit);
  CHECK(at.items_not_written == 0);
  for (double times : {2.0, 10.0}) {
    INFO(times << " x the limit");
    const UserCost past = CostOfUser(l.stage_table, n, times * limit, 31);
    CHECK(past.at_limit);
    CHECK(past.stages_used == 8);
    CHECK(past.bytes_per_key == at.bytes_per_key);
    CHECK(past.items_not_written == Approx((times - 1) * limit * n).epsilon(1e-9));
    CHECK(past.share_not_written == Approx(1 - 1 / times).epsilon(1e-9));
    CHECK(past.bucket_fpr == Approx(at.bucket_fpr).epsilon(1e-12));
    CHECK(past.bucket_fpr < 2 * v1);
  }
  CHECK_FALSE(CostOfUser(l.stage_table, n, limit * 0.99, 31).at_limit);
  CHECK(CostOfUser(l.stage_table, n, 64, 31).items_not_written == 0);
}

TEST_CASE("Stage model with stages = 1 is v1: the FPR explodes past the design load",
          "[bloom][activity]") {
  const int64_t n = 200;
  const Layout l = LayoutFor(n, 1);
  for (double x : {1.0, 4.0, 16.0}) {
    INFO("multiple " << x);
    const UserCost c = CostOfUser(l.stage_table, n, x, 31);
    CHECK(c.stages_used == 1);
    CHECK(c.at_limit == (x > 1));
    CHECK(c.items_not_written == 0);  // one stage: every item is written, as v1
    CHECK(c.bytes_per_key == (l.m + 7) / 8);
    CHECK(c.bucket_fpr ==
          Approx(std::pow(1 - std::exp(-static_cast<double>(l.k) * x * n / l.m), l.k))
              .epsilon(1e-12));
  }
  CHECK(CostOfUser(l.stage_table, n, 4, 31).bucket_fpr > 0.4);
}

// The model against what the real writer does: the StagePlanner with the true
// fill after each batch (as BitWriter learns it from the old bits its writes
// return), positions by
// ComputeStagePositions, the value as Redis grows it, and never-inserted probes
// read with ValueContains. The model is the expectation: a key exactly at a
// stage's capacity (1x is stage 0's) starts the next stage in about 4 of 10
// cases, so the multiples here sit well inside a stage.
TEST_CASE("Stage model agrees with the StagePlanner: stages and bytes exactly and FPR roughly",
          "[bloom][activity]") {
  const int64_t n = 200;
  const Layout l = LayoutFor(n, 8);
  const std::vector<Stage>& st = l.stage_table;
  for (double x : {0.9, 2.0, 4.0, 16.0, 64.0}) {
    INFO("multiple " << x);
    const UserCost model = CostOfUser(st, n, x, 31);
    const int keys = 6;
    uint64_t hits = 0, probes = 0;
    for (int key = 0; key < keys; ++key) {
      std::string value;
      StagePlanner planner(st);
      StageState state;
      StageStats stats;
      const int64_t items = static_cast<int64_t>(x * n);
      for (int64_t i = 0; i < items; i += 25) {
        std::vector<Hash128> batch;
        for (int64_t j = i; j < std::min(items, i + 25); ++j) {
          batch.push_back(HashItem("k" + std::to_string(key) + "-i" + std::to_string(j), 0));
        }
        std::vector<uint32_t> positions;
        if (planner.Plan(state, batch.data(), batch.size(), nullptr, PositionRule::kModulo,
                         &stats)) {
          positions = planner.positions();
          if (!planner.groups().empty()) state.stage = planner.groups().back().stage;
        } else {
          for (const Hash128& h : batch) {
            std::vector<uint32_t> p(st[0].k);
            ComputeStagePositions(h, st[0], PositionRule::kModulo, p.data());
            positions.insert(positions.end(), p.begin(), p.end());
          }
        }
        for (uint32_t p : positions) {
          if (value.size() <= p / 8) value.resize(p / 8 + 1, '\0');
          value[p / 8] =
              static_cast<char>(static_cast<unsigned char>(value[p / 8]) | (0x80u >> (p & 7)));
        }
        state.fill = StagePopcount(value, st[state.stage]);
      }
      CHECK(state.stage + 1 == model.stages_used);
      CHECK(StagesPresent(st, value.size()) == model.stages_used);
      CHECK(value.size() <= model.bytes_per_key);
      CHECK(value.size() + 64 > model.bytes_per_key);  // the last stage reaches near its end
      for (int p = 0; p < 50000; ++p, ++probes) {
        hits += ValueContains(value, st, PositionRule::kModulo,
                              HashItem("probe-" + std::to_string(key) + "-" + std::to_string(p), 0))
                    ? 1
                    : 0;
      }
    }
    const double measured = static_cast<double>(hits) / static_cast<double>(probes);
    INFO("measured " << measured << " model " << model.bucket_fpr);
    // An ideal model: the measured rate runs somewhat above it (the position
    // rule's floor with small m: ~1.3x at m = 3345) but within 2x, and not far below.
    CHECK(measured < 2 * model.bucket_fpr);
    CHECK(measured > 0.5 * model.bucket_fpr);
  }
}

// Past the stage limit, against the real writer: the StagePlanner (PlanValue on
// the value as Redis grows it, as a writer that reads the key) writes nothing
// once the last stage has reached its fill. The items it drops (limit_items) are
// the model's items_not_written, and the key's measured rate stays near the
// model's, at the rate of a user at the limit.
TEST_CASE("Stage model past the stage limit agrees with the StagePlanner: items not written",
          "[bloom][activity]") {
  const int64_t n = 200;
  const Layout l = LayoutFor(n, 3);
  const std::vector<Stage>& st = l.stage_table;
  const double limit = StageCapacities(st).back() / n;
  REQUIRE(limit < 10);
  for (double x : {16.0, 64.0}) {
    INFO("multiple " << x << " (limit " << limit << "x)");
    const UserCost model = CostOfUser(st, n, x, 31);
    REQUIRE(model.at_limit);
    const int keys = 4;
    uint64_t hits = 0, probes = 0, dropped = 0;
    for (int key = 0; key < keys; ++key) {
      std::string value;
      StagePlanner planner(st);
      StageStats stats;
      const int64_t items = static_cast<int64_t>(x * n);
      for (int64_t i = 0; i < items; i += 25) {
        std::vector<Hash128> batch;
        for (int64_t j = i; j < std::min(items, i + 25); ++j) {
          batch.push_back(HashItem("l" + std::to_string(key) + "-i" + std::to_string(j), 0));
        }
        std::vector<uint32_t> positions;
        if (planner.PlanValue(value, batch.data(), batch.size(), nullptr, PositionRule::kModulo,
                              &stats)) {
          positions = planner.positions();
        } else {
          for (const Hash128& h : batch) {
            std::vector<uint32_t> p(st[0].k);
            ComputeStagePositions(h, st[0], PositionRule::kModulo, p.data());
            positions.insert(positions.end(), p.begin(), p.end());
          }
        }
        for (uint32_t p : positions) {
          if (value.size() <= p / 8) value.resize(p / 8 + 1, '\0');
          value[p / 8] =
              static_cast<char>(static_cast<unsigned char>(value[p / 8]) | (0x80u >> (p & 7)));
        }
      }
      CHECK(StagesPresent(st, value.size()) == model.stages_used);
      CHECK(value.size() <= model.bytes_per_key);
      dropped += stats.limit_items;
      for (int p = 0; p < 50000; ++p, ++probes) {
        hits += ValueContains(value, st, PositionRule::kModulo,
                              HashItem("probe-" + std::to_string(key) + "-" + std::to_string(p), 0))
                    ? 1
                    : 0;
      }
    }
    const double mean_dropped = static_cast<double>(dropped) / keys;
    const double measured = static_cast<double>(hits) / static_cast<double>(probes);
    INFO("dropped " << mean_dropped << " model " << model.items_not_written << "; measured FPR "
                    << measured << " model " << model.bucket_fpr);
    CHECK(mean_dropped == Approx(model.items_not_written).epsilon(0.05));
    CHECK(measured < 2 * model.bucket_fpr);
    CHECK(measured > 0.5 * model.bucket_fpr);
  }
}

TEST_CASE("ParseActivity reads zipf:S and MULTIPLE:PERCENT lists", "[bloom][activity]") {
  StatusOr<Activity> z = ParseActivity("zipf:1.1");
  REQUIRE(z.ok());
  CHECK(z->kind == Activity::Kind::kZipf);
  CHECK(z->zipf_s == 1.1);
  CHECK(z->ToString() == "zipf:1.1");

  StatusOr<Activity> c = ParseActivity("0.5:60,1:25,4:10,16:4,64:1");
  REQUIRE(c.ok());
  CHECK(c->kind == Activity::Kind::kClasses);
  REQUIRE(c->classes.size() == 5);
  CHECK(c->classes[0].multiple == 0.5);
  CHECK(c->classes[0].percent == 60);
  CHECK(c->classes[4].multiple == 64);
  CHECK(c->classes[4].percent == 1);
  CHECK(c->ToString() == "0.5:60,1:25,4:10,16:4,64:1");
  // What ToString prints reads back the same.
  StatusOr<Activity> again = ParseActivity(c->ToString());
  REQUIRE(again.ok());
  CHECK(again->ToString() == c->ToString());

  // "x" after a multiple and "%" after a share are allowed; shares may be fractions.
  StatusOr<Activity> suffixed = ParseActivity("1x:33.3%,2x:33.3,4:33.4%");
  REQUIRE(suffixed.ok());
  CHECK(suffixed->ToString() == "1:33.3,2:33.3,4:33.4");

  // The default is everybody at 1x.
  CHECK(Activity{}.ToString() == "1:100");
}

TEST_CASE("ParseActivity rejects bad input with one line naming the bad part",
          "[bloom][activity]") {
  struct Bad {
    const char* text;
    std::vector<std::string> names;  // what the message must contain
  };
  const Bad cases[] = {
      {"", {"empty"}},
      {"zipf:", {"zipf exponent", "''"}},
      {"zipf:abc", {"zipf exponent", "'abc'"}},
      {"zipf:0", {"'0'", "(0, 5]"}},
      {"zipf:9", {"'9'", "(0, 5]"}},
      {"zipf:nan", {"'nan'", "not a number"}},
      {"pareto:2", {"'pareto:2'"}},  // "pareto" is not a multiple
      {"4", {"class '4'", "MULTIPLE:PERCENT"}},
      {"abc:10", {"multiple 'abc'", "'abc:10'"}},
      {"0:100", {"multiple '0'", "(0, 1000000]"}},
      {"-1:100", {"multiple '-1'"}},
      {"4:x", {"share 'x'", "'4:x'"}},
      {"4:0,1:100", {"share '0'", "(0, 100]"}},
      {"4:150", {"share '150'"}},
      {"0.5:60,1:25", {"sum to 85%", "not 100%"}},
      {"1:50,,2:50", {"empty class"}},
      {"1:50,1x:50", {"multiple '1x' appears twice"}},
      {"1:100,", {"empty class"}},
  };
  for (const Bad& b : cases) {
    INFO("input '" << b.text << "'");
    StatusOr<Activity> a = ParseActivity(b.text);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == StatusCode::kInvalidArgument);
    const std::string& msg = a.status().message();
    INFO("message: " << msg);
    CHECK(msg.find('\n') == std::string::npos);
    for (const std::string& name : b.names) CHECK(msg.find(name) != std::string::npos);
  }
}

TEST_CASE("ClassUsers splits users by share and sums to the total exactly", "[bloom][activity]") {
  const std::vector<ActivityClass> thirds = {{1, 33.3}, {2, 33.3}, {4, 33.4}};
  CHECK(ClassUsers(thirds, 10) == std::vector<uint64_t>{3, 3, 4});
  CHECK(ClassUsers(thirds, 1000) == std::vector<uint64_t>{333, 333, 334});
  const std::vector<ActivityClass> mix = {{0.5, 60}, {1, 25}, {4, 10}, {16, 4}, {64, 1}};
  CHECK(ClassUsers(mix, 1000000) == std::vector<uint64_t>{600000, 250000, 100000, 40000, 10000});
  for (uint64_t users : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{999983}, UINT64_MAX}) {
    INFO("users " << users);
    uint64_t sum = 0;
    for (uint64_t u : ClassUsers(mix, users)) sum += u;
    CHECK(sum == users);
  }
}

TEST_CASE("Activity totals: classes sum bytes per user, 100% at 1x is the 1x total",
          "[bloom][activity]") {
  const int64_t n = 200;
  const uint32_t buckets = 31;
  const Layout l = LayoutFor(n, 8);
  const uint64_t users = 1000000;

  const ActivityTotals one = ComputeActivityTotals(Activity{}, l.stage_table, n, buckets, users);
  CHECK(one.bytes == static_cast<unsigned __int128>((l.m + 7) / 8) * buckets * users);
  CHECK(one.keys == static_cast<unsigned __int128>(users) * buckets);
  CHECK(one.users_past_stage0 == 0);
  CHECK(one.users_at_limit == 0);
  CHECK(one.users_by_stages[0] == users);

  StatusOr<Activity> mix = ParseActivity("0.5:60,1:25,4:10,16:4,64:1,1000:0.5,2:-0.5");
  CHECK_FALSE(mix.ok());  // a negative share
  mix = ParseActivity("0.5:60,1:25,4:10,16:3.5,64:1,1000:0.5");
  REQUIRE(mix.ok());
  const ActivityTotals t = ComputeActivityTotals(*mix, l.stage_table, n, buckets, users);
  const std::vector<uint64_t> counts = ClassUsers(mix->classes, users);
  unsigned __int128 bytes = 0;
  uint64_t past0 = 0, at_limit = 0, sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const UserCost c = CostOfUser(l.stage_table, n, mix->classes[i].multiple, buckets);
    bytes += static_cast<unsigned __int128>(c.bytes_per_key) * buckets * counts[i];
    if (c.stages_used > 1) past0 += counts[i];
    if (c.at_limit) at_limit += counts[i];
  }
  for (uint64_t u : t.users_by_stages) sum += u;
  CHECK(sum == users);
  CHECK(t.bytes == bytes);
  CHECK(t.users_past_stage0 == past0);
  CHECK(t.users_past_stage0 == 150000);  // 4x, 16x, 64x, 1000x
  CHECK(t.users_at_limit == at_limit);
  CHECK(t.users_at_limit == 5000);  // 1000x is past 255x
}

TEST_CASE("Activity totals for zipf:S match a rank-by-rank count", "[bloom][activity]") {
  const int64_t n = 40;
  const uint32_t buckets = 8;
  for (uint32_t stages : {1u, 4u, 8u}) {
    const Layout l = LayoutFor(n, stages);
    for (double s : {0.7, 1.1, 2.0}) {
      for (uint64_t users : {uint64_t{1}, uint64_t{2}, uint64_t{1001}, uint64_t{20000}}) {
        INFO("stages " << stages << " s " << s << " users " << users);
        Activity a;
        a.kind = Activity::Kind::kZipf;
        a.zipf_s = s;
        const ActivityTotals t = ComputeActivityTotals(a, l.stage_table, n, buckets, users);
        std::vector<uint64_t> by_stages(stages, 0);
        uint64_t at_limit = 0;
        unsigned __int128 bytes = 0;
        for (uint64_t r = 1; r <= users; ++r) {
          const double multiple = std::pow((static_cast<double>(users) + 1) / (2.0 * r), s);
          const UserCost c = CostOfUser(l.stage_table, n, multiple, buckets);
          ++by_stages[c.stages_used - 1];
          at_limit += c.at_limit ? 1 : 0;
          bytes += static_cast<unsigned __int128>(c.bytes_per_key) * buckets;
        }
        CHECK(t.users_by_stages == by_stages);
        CHECK(t.users_at_limit == at_limit);
        CHECK(t.bytes == bytes);
        // The median user is at 1x: at most half the users are past stage 0.
        CHECK(t.users_past_stage0 <= users / 2);
      }
    }
  }
}

}  // namespace ef
