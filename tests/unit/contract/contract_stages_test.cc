// Layout contract version 2 (docs/FORMAT.md rule 8): the stage table against the
// documented formulas, the test vectors the Python reference prints, stage
// presence from a value's length, the query rule, the meta fields, and the
// writer's StagePlanner.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stage_planner.h"
#include "bloom/stages.h"

namespace ef {
namespace {

Layout DefaultV2() {
  FilterConfig f;
  f.layout_version = 2;
  StatusOr<Layout> l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

// Sets the bits of `positions` in *value (grown as Redis grows a string).
void SetBits(std::string* value, const std::vector<uint32_t>& positions) {
  for (uint32_t p : positions) {
    if (value->size() <= p / 8) value->resize(p / 8 + 1, '\0');
    (*value)[p / 8] =
        static_cast<char>(static_cast<unsigned char>((*value)[p / 8]) | (0x80u >> (p & 7)));
  }
}

std::vector<uint32_t> Positions(const std::string& item, const Stage& st, uint32_t seed = 0) {
  std::vector<uint32_t> out(st.k);
  ComputeStagePositions(HashItem(item, seed), st, PositionRule::kModulo, out.data());
  return out;
}

}  // namespace

TEST_CASE("v2 stage table: the documented formulas and the FORMAT.md vectors", "[bloom][v2]") {
  const Layout l = DefaultV2();
  REQUIRE(l.version() == 2);
  REQUIRE(l.m == 3345);
  REQUIRE(l.k == 12);
  // fill_ppm = ceil(10^6 (1 - e^(-k n / m))) with n = items_per_bucket = 200.
  CHECK(l.fill_ppm == static_cast<uint32_t>(std::ceil(-std::expm1(-12.0 * 200 / 3345) * 1e6)));
  CHECK(l.fill_ppm == 512024);
  REQUIRE(l.stage_table.size() == 8);
  // The formulas, recomputed here with plain integers.
  uint64_t offset = 0, scale = 1;
  for (uint32_t s = 0; s < 8; ++s) {
    const Stage& st = l.stage_table[s];
    INFO("stage " << s);
    CHECK(st.k == 12 + 2 * s);
    const uint64_t num = uint64_t{3345} * scale * st.k;
    CHECK(st.m == (num + 11) / 12);
    CHECK(st.offset == offset);
    CHECK(st.offset % 8 == 0);
    CHECK(st.fill == (uint64_t{st.m} * 512024 + 999999) / 1000000);
    offset += (st.m + 7) / 8 * 8;
    scale *= 2;
  }
  // The table docs/FORMAT.md prints (from the Python reference).
  const std::vector<std::vector<uint64_t>> doc = {
      {3345, 12, 0, 1713},          {7805, 14, 3352, 3997},      {17840, 16, 11160, 9135},
      {40140, 18, 29000, 20553},    {89200, 20, 69144, 45673},   {196240, 22, 158344, 100480},
      {428160, 24, 354584, 219229}, {927680, 26, 782744, 474995}};
  for (size_t s = 0; s < doc.size(); ++s) {
    INFO("stage " << s);
    CHECK(l.stage_table[s].m == doc[s][0]);
    CHECK(l.stage_table[s].k == doc[s][1]);
    CHECK(l.stage_table[s].offset == doc[s][2]);
    CHECK(l.stage_table[s].fill == doc[s][3]);
  }
}

TEST_CASE("v2 positions: stage 0 is the v1 filter, stages 1-3 match the vectors", "[bloom][v2]") {
  const Layout l = DefaultV2();
  struct Row {
    std::string item;
    uint32_t seed;
    std::vector<std::vector<uint32_t>> stages;
  };
  const std::vector<Row> rows = {
      {"hello",
       0,
       {{2631, 3301, 2682, 2063, 2733, 2114, 1495, 2165, 1546, 927, 1597, 978},
        {10443, 7768, 9379, 10990, 8315, 9926, 3732, 8862, 10473, 4279, 9409, 11020, 8345, 9956},
        {14906, 16691, 11612, 24373, 26158, 21079, 16000, 17785, 12706, 25467, 27252, 22173, 23958,
         18879, 13800, 15585},
        {55046, 38991, 51752, 64513, 48458, 61219, 33840, 57925, 30546, 43307, 67392, 40013, 64098,
         36719, 49480, 33425, 46186, 58947}}},
      {"i9",
       0,
       {{3031, 2117, 1203, 289, 2720, 1806, 892, 1267, 353, 2784, 1870, 956},
        {7498, 4354, 9015, 5871, 10532, 7388, 4244, 4619, 9280, 6136, 10797, 7653, 4509, 9170},
        {16421, 23312, 12363, 19254, 26145, 15196, 22087, 18002, 24893, 13944, 20835, 27726, 16777,
         23668, 12719, 26474},
        {65481, 67912, 30203, 32634, 35065, 37496, 39927, 53682, 56113, 58544, 60975, 63406, 65837,
         68268, 30559, 44314, 46745, 49176}}},
      {"\xe5\x95\x86\xe5\x93\x81-1",
       0,
       {{101, 2757, 2068, 1379, 690, 1, 2657, 1968, 1279, 590, 3246, 2557},
        {4568, 9454, 6535, 3616, 8502, 5583, 10469, 7550, 4631, 9517, 6598, 3679, 8565, 5646},
        {17951, 18377, 18803, 19229, 19655, 20081, 20507, 20933, 21359, 21785, 22211, 22637, 23063,
         23489, 23915, 24341},
        {35791, 31757, 67863, 63829, 59795, 55761, 51727, 47693, 43659, 39625, 35591, 31557, 67663,
         63629, 59595, 55561, 51527, 47493}}},
      {"hello",
       42,
       {{3220, 2668, 60, 2853, 2301, 1749, 1197, 645, 93, 830, 278, 3071},
        {8802, 8250, 3412, 10665, 10113, 9561, 9009, 8457, 7905, 10872, 10320, 9768, 9216, 8664},
        {27760, 16058, 11220, 17358, 23496, 11794, 17932, 24070, 12368, 25370, 13668, 19806, 25944,
         14242, 20380, 26518},
        {58980, 65118, 42440, 48578, 54716, 60854, 66992, 32990, 39128, 56590, 62728, 68866, 34864,
         41002, 47140, 53278, 59416, 36738}}},
  };
  for (const Row& r : rows) {
    for (size_t s = 0; s < 4; ++s) {
      INFO(r.item << " seed " << r.seed << " stage " << s);
      CHECK(Positions(r.item, l.stage_table[s], r.seed) == r.stages[s]);
      for (uint32_t p : r.stages[s]) {
        CHECK(p >= l.stage_table[s].offset);
        CHECK(p < l.stage_table[s].offset + l.stage_table[s].m);
      }
    }
    // Stage 0 is bit for bit the v1 rule.
    std::vector<uint32_t> v1(l.k);
    ComputePositions(HashItem(r.item, r.seed), l.m, l.k, v1.data());
    CHECK(v1 == r.stages[0]);
  }
}

TEST_CASE("v2 stages present: from the value's length alone", "[bloom][v2]") {
  const Layout l = DefaultV2();
  const auto& t = l.stage_table;
  CHECK(StagesPresent(t, 0) == 1);
  CHECK(StagesPresent(t, 419) == 1);  // v1 value: ceil(3345 / 8) bytes
  CHECK(StagesPresent(t, 3352 / 8) == 1);
  CHECK(StagesPresent(t, 3352 / 8 + 1) == 2);  // a byte of stage 1
  CHECK(StagesPresent(t, 11160 / 8 + 1) == 3);
  CHECK(StagesPresent(t, 1u << 30) == 8);
}

TEST_CASE("v2 query rule: seen iff all k_s positions of some present stage are set",
          "[bloom][v2]") {
  const Layout l = DefaultV2();
  const auto& t = l.stage_table;
  std::string value;
  SetBits(&value, Positions("a", t[0]));
  SetBits(&value, Positions("b", t[2]));  // also makes stages 1 and 2 present
  CHECK(ValueContains(value, t, PositionRule::kModulo, HashItem("a", 0)));
  CHECK(ValueContains(value, t, PositionRule::kModulo, HashItem("b", 0)));
  CHECK_FALSE(ValueContains(value, t, PositionRule::kModulo, HashItem("c", 0)));
  CHECK(StageContains(value, t[2], PositionRule::kModulo, HashItem("b", 0)));
  CHECK_FALSE(StageContains(value, t[0], PositionRule::kModulo, HashItem("b", 0)));
  // All but one position of "d" in stage 1: not seen.
  auto d = Positions("d", t[1]);
  d.pop_back();
  std::string partial = value;
  SetBits(&partial, d);
  CHECK_FALSE(ValueContains(partial, t, PositionRule::kModulo, HashItem("d", 0)));
  // Bits of a stage past the value's stages (truncated value): not read.
  std::string cut = value.substr(0, 419);
  CHECK_FALSE(ValueContains(cut, t, PositionRule::kModulo, HashItem("b", 0)));
  CHECK(ValueContains(cut, t, PositionRule::kModulo, HashItem("a", 0)));
}

TEST_CASE("v2 StagePopcount counts a stage's bits only", "[bloom][v2]") {
  const Layout l = DefaultV2();
  const auto& t = l.stage_table;
  std::string value;
  SetBits(&value, {0, 7, 3344, 3352, 3353, 11156, 11160});  // 11156: stage 1's last bit
  CHECK(StagePopcount(value, t[0]) == 3);
  CHECK(StagePopcount(value, t[1]) == 3);
  CHECK(StagePopcount(value, t[2]) == 1);
  CHECK(StagePopcount(value, t[3]) == 0);
  // A stray padding bit of stage 0's last byte (3345..3351) is not counted.
  SetBits(&value, {3350, 11158});
  CHECK(StagePopcount(value, t[0]) == 3);
  CHECK(StagePopcount(value, t[1]) == 3);
}

TEST_CASE("v2 StagePopcount equals a bit-by-bit count for random values of every length",
          "[bloom][v2]") {
  const Layout l = DefaultV2();
  const auto& t = l.stage_table;
  std::mt19937_64 rng(17);
  size_t checked = 0;
  for (size_t s = 0; s < 4; ++s) {
    const Stage& st = t[s];
    for (int trial = 0; trial < 60; ++trial) {
      // Values ending before, inside (at every byte of its first 40 and last 40)
      // and past the stage, with random bytes (padding bits included).
      const size_t first = st.offset / 8, bytes = (st.m + 7) / 8;
      size_t len = first + bytes + 16;
      if (trial < 40)
        len = first + static_cast<size_t>(trial);
      else if (trial < 55)
        len = first + bytes - static_cast<size_t>(trial - 40);
      else if (trial == 55)
        len = first > 0 ? first - 1 : 0;
      std::string value(len, '\0');
      for (char& c : value) c = static_cast<char>(rng() & 0xff);
      uint32_t want = 0;
      for (uint64_t p = st.offset; p < uint64_t{st.offset} + st.m && p / 8 < value.size(); ++p)
        want += (static_cast<unsigned char>(value[p / 8]) >> (7 - p % 8)) & 1u;
      INFO("stage " << s << ", value bytes " << len);
      CHECK(StagePopcount(value, st) == want);
      ++checked;
    }
  }
  CHECK(checked == 240);
}

TEST_CASE("v2 stage table rejects bad parameters and Redis's string limit", "[bloom][v2]") {
  StageParams p;
  p.m0 = 3345;
  p.k0 = 12;
  p.fill_ppm = 500000;
  CHECK(ComputeStages(p).ok());
  p.stages = 0;
  CHECK_FALSE(ComputeStages(p).ok());
  p.stages = 32;
  p.growth = 2;
  auto r = ComputeStages(p);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("2^32") != std::string::npos);
  p.stages = 1;
  p.fill_ppm = 0;
  CHECK_FALSE(ComputeStages(p).ok());
}

TEST_CASE("v2 meta fields: version 2 adds the stage parameters, v1 stays as it was",
          "[bloom][v2]") {
  const Layout l = DefaultV2();
  auto f = l.ToFields();
  CHECK(f.at("version") == "2");
  CHECK(f.at("growth") == "2");
  CHECK(f.at("k_step") == "2");
  CHECK(f.at("stages") == "8");
  CHECK(f.at("fill_ppm") == "512024");
  const std::map<std::string, std::string> v1 = {{"version", "1"},
                                                 {"m", "3345"},
                                                 {"k", "12"},
                                                 {"seed", "0"},
                                                 {"prefix", "ef:"},
                                                 {"bucket_seconds", "86400"},
                                                 {"window_seconds", "2592000"}};
  CHECK(l.SingleStage().ToFields() == v1);
  CHECK(IsUpgradableV1(v1, l));
  auto other = v1;
  other["m"] = "4000";
  CHECK_FALSE(IsUpgradableV1(other, l));
  // Round trip through the stored fields.
  auto back = LayoutFromFields(f, "ef:meta");
  REQUIRE(back.ok());
  CHECK(back->ToFields() == f);
  CHECK(back->stage_table.size() == 8);
  auto back1 = LayoutFromFields(v1, "ef:meta");
  REQUIRE(back1.ok());
  CHECK(back1->version() == 1);
  CHECK(back1->stage_table.size() == 1);
  // A v1 program compares its fields with a v2 meta: refused (it would miss
  // items of later stages).
  Status st = CompareLayout(f, l.SingleStage(), "ef:meta");
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("version: stored 2, configured 1") != std::string::npos);
  // An unknown version is refused by name.
  auto v5 = f;
  v5["version"] = "5";
  auto bad = LayoutFromFields(v5, "ef:meta");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("field version: 5 is newer") != std::string::npos);
}

TEST_CASE("StagePlanner: a light key stays in stage 0 and uses the coalescer's positions",
          "[bloom][v2][planner]") {
  const Layout l = DefaultV2();
  StagePlanner planner(l.stage_table);
  std::vector<Hash128> items;
  for (int i = 0; i < 50; ++i) items.push_back(HashItem("item-" + std::to_string(i), 0));
  StageStats stats;
  CHECK_FALSE(planner.Plan(StageState{0, 100}, items.data(), items.size(), nullptr,
                           PositionRule::kModulo, &stats));
  CHECK(stats.items[0] == 50);
  CHECK(stats.advances == 0);
}

TEST_CASE("StagePlanner: items past stage 0's fill go to stage 1, then on",
          "[bloom][v2][planner]") {
  const Layout l = DefaultV2();
  const auto& t = l.stage_table;
  StagePlanner planner(l.stage_table);
  std::vector<Hash128> items;
  for (int i = 0; i < 1000; ++i) items.push_back(HashItem("x-" + std::to_string(i), 0));
  StageStats stats;
  // Stage 0 just below its fill: the first item still goes there, later ones move on.
  REQUIRE(planner.Plan(StageState{0, t[0].fill - 1}, items.data(), items.size(), nullptr,
                       PositionRule::kModulo, &stats));
  const auto& g = planner.groups();
  REQUIRE(g.size() >= 2);
  CHECK(g[0].stage == 0);
  CHECK(g[1].stage == 1);
  CHECK(stats.advances == g.size() - 1);
  CHECK(stats.stage0_advances == 1);
  CHECK(stats.items[0] >= 1);
  uint64_t placed = 0;
  for (uint64_t n : stats.items) placed += n;
  CHECK(placed == 1000);
  // Every group's positions lie in its stage, sorted and unique.
  for (const auto& gr : g) {
    const Stage& st = t[gr.stage];
    for (size_t i = gr.begin; i < gr.end; ++i) {
      CHECK(planner.positions()[i] >= st.offset);
      CHECK(planner.positions()[i] < st.offset + st.m);
      if (i > gr.begin) CHECK(planner.positions()[i - 1] < planner.positions()[i]);
    }
  }
  // ~ fill bits per stage: stage 1 (capacity ~400 items) takes most of the 1000
  // minus stage 0's share, the rest goes to stage 2.
  CHECK(stats.items[1] > 300);
  CHECK(stats.items[1] < 500);
}

TEST_CASE("StagePlanner: at the stage limit nothing is planned, and the items are counted",
          "[bloom][v2][planner][limit]") {
  FilterConfig f;
  f.stages = 2;
  StatusOr<Layout> l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  const Stage& last = l->stage_table[1];
  StagePlanner planner(l->stage_table);
  std::vector<Hash128> items;
  for (int i = 0; i < 10; ++i) items.push_back(HashItem("y-" + std::to_string(i), 0));
  // Known state at the limit: no read is needed, nothing is written.
  const StageState full{1, last.fill};
  CHECK_FALSE(planner.NeedsValue(full, items.data(), items.size()));
  StageStats stats;
  REQUIRE(planner.Plan(full, items.data(), items.size(), nullptr, PositionRule::kRemix, &stats));
  CHECK(planner.groups().empty());
  CHECK(planner.positions().empty());
  CHECK(stats.limit_items == 10);
  CHECK(stats.limit_keys == 1);
  CHECK(stats.advances == 0);
  CHECK(stats.items[1] == 0);
  // One bit below the limit: the first new item still goes in (it brings the stage
  // to or past fill_s), the rest are not written.
  const StageState almost{1, last.fill - 1};
  CHECK(planner.NeedsValue(almost, items.data(), items.size()));
  StageStats s2;
  REQUIRE(planner.Plan(almost, items.data(), items.size(), nullptr, PositionRule::kRemix, &s2));
  REQUIRE(planner.groups().size() == 1);
  CHECK(planner.groups()[0].stage == 1);
  CHECK(s2.items[1] == 1);
  CHECK(s2.limit_items == 9);
  CHECK(s2.limit_keys == 1);
  // The same from a value: a key whose last stage holds fill_s bits is left alone.
  std::string value(last.offset / 8 + (last.m + 7) / 8, '\0');
  for (uint32_t b = 0; b < last.fill; ++b) {
    const uint64_t p = last.offset + b;
    value[p / 8] = static_cast<char>(static_cast<unsigned char>(value[p / 8]) | (0x80u >> (p & 7)));
  }
  StageStats s3;
  REQUIRE(planner.PlanValue(value, items.data(), items.size(), nullptr, PositionRule::kRemix, &s3));
  CHECK(planner.start().stage == 1);
  CHECK(planner.start().fill == last.fill);
  CHECK(planner.groups().empty());
  CHECK(s3.limit_items + planner.present() == 10);
  CHECK(s3.limit_keys == (s3.limit_items > 0 ? 1 : 0));
}

TEST_CASE("StagePlanner: a read is needed only where a stage may fill in the batch",
          "[bloom][v2][planner]") {
  const Layout l = DefaultV2();
  const Stage& s0 = l.stage_table[0];
  StagePlanner planner(l.stage_table);
  std::vector<Hash128> items;
  for (int i = 0; i < 10; ++i) items.push_back(HashItem("n-" + std::to_string(i), 0));
  // fill + k * 10 < fill_0: no item can bring stage 0 to its fill.
  CHECK_FALSE(planner.NeedsValue(StageState{0, s0.fill - 12 * 10 - 1}, items.data(), 10));
  CHECK(planner.NeedsValue(StageState{0, s0.fill - 12 * 10}, items.data(), 10));
  // The bound counts distinct items: 10 items of which 5 repeat the others.
  std::vector<Hash128> repeated(items.begin(), items.begin() + 5);
  repeated.insert(repeated.end(), items.begin(), items.begin() + 5);
  CHECK_FALSE(planner.NeedsValue(StageState{0, s0.fill - 12 * 5 - 1}, repeated.data(), 10));
  CHECK(planner.NeedsValue(StageState{0, s0.fill - 12 * 5}, repeated.data(), 10));
  // A full stage that is not the last: the next new item starts a stage, a present
  // one does not; only the bits tell.
  CHECK(planner.NeedsValue(StageState{0, s0.fill}, items.data(), 1));
}

TEST_CASE("StagePlanner: from a value, repeats and items already there add no fill",
          "[bloom][v2][planner]") {
  const Layout l = DefaultV2();
  const Stage& s0 = l.stage_table[0];
  StagePlanner planner(l.stage_table);
  // A stage 0 one item short of its fill: 140 items bring it near, the rest of
  // the batch repeats them. Planned exactly, nothing starts stage 1.
  std::string value;
  std::vector<Hash128> items;
  uint32_t fill = 0;
  for (int i = 0; fill + s0.k < s0.fill; ++i) {
    const Hash128 h = HashItem("r-" + std::to_string(i), 0);
    items.push_back(h);
    SetBits(&value, [&] {
      std::vector<uint32_t> p(s0.k);
      ComputeStagePositions(h, s0, PositionRule::kModulo, p.data());
      return p;
    }());
    fill = StagePopcount(value, s0);
  }
  std::vector<Hash128> batch = items;
  batch.insert(batch.end(), items.begin(), items.end());
  StageStats stats;
  REQUIRE(
      planner.PlanValue(value, batch.data(), batch.size(), nullptr, PositionRule::kModulo, &stats));
  CHECK(planner.groups().empty());  // every item is there already: nothing to write
  CHECK(planner.present() == batch.size());
  CHECK(stats.advances == 0);
}

TEST_CASE("StagePlanner: skipped items are neither placed nor counted", "[bloom][v2][planner]") {
  const Layout l = DefaultV2();
  StagePlanner planner(l.stage_table);
  std::vector<Hash128> items = {HashItem("a", 0), HashItem("b", 0), HashItem("c", 0)};
  const uint8_t skip[] = {1, 0, 1};
  StageStats stats;
  REQUIRE(planner.Plan(StageState{0, 0}, items.data(), items.size(), skip, PositionRule::kModulo,
                       &stats));
  REQUIRE(planner.groups().size() == 1);
  CHECK(planner.groups()[0].stage == 0);
  std::vector<uint32_t> got(planner.positions().begin(), planner.positions().end());
  auto want = Positions("b", l.stage_table[0]);
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  CHECK(got == want);
  CHECK(stats.items[0] == 1);
  const uint8_t all[] = {1, 1, 1};
  StageStats none;
  REQUIRE(planner.Plan(StageState{0, 0}, items.data(), items.size(), all, PositionRule::kModulo,
                       &none));
  CHECK(planner.groups().empty());
  CHECK(none.items[0] == 0);
}

}  // namespace ef
