// Layout v4's size classes (bloom/size_classes.h; the design in docs/DESIGN.md,
// "Per-user sizes: layout version 4"): the class series, each class's stage table
// after the header byte, and the item estimate a writer sizes a new key from.
// Pure: no Redis.
#include "bloom/size_classes.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stages.h"

namespace ef {
namespace {

StageParams DefaultParams() {
  FilterConfig f;
  StatusOr<Layout> l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  StageParams p;
  p.m0 = l->m;
  p.k0 = l->k;
  p.growth = l->growth;
  p.k_step = l->k_step;
  p.stages = l->stages;
  p.fill_ppm = l->fill_ppm;
  return p;
}

// Writes `n` distinct items into `value` by the writer's rule (FORMAT.md rule 8:
// the next stage starts at the first item after the current one reached its fill).
void WriteItems(std::string* value, const std::vector<Stage>& stages, int first, int n) {
  size_t s = 0;
  while (s + 1 < stages.size() && value->size() > stages[s + 1].offset / 8) ++s;
  std::vector<uint32_t> pos(64);
  for (int i = first; i < first + n; ++i) {
    if (StagePopcount(*value, stages[s]) >= stages[s].fill && s + 1 < stages.size()) ++s;
    const Hash128 h = HashItem("item-" + std::to_string(i), 0);
    ComputeStagePositions(h, stages[s], PositionRule::kRemix, pos.data());
    for (uint32_t j = 0; j < stages[s].k; ++j) {
      const uint32_t p = pos[j];
      if (value->size() <= p / 8) value->resize(p / 8 + 1, '\0');
      (*value)[p / 8] = static_cast<char>((*value)[p / 8] | (0x80 >> (p % 8)));
    }
  }
}

TEST_CASE("size classes: four per octave from 64 bytes, stage 0 filling its allocation",
          "[unit][bloom][v4]") {
  const std::vector<uint64_t> bytes = {64,  80,  96,  112, 128, 160, 192,
                                       224, 256, 320, 384, 448, 512};
  for (uint32_t c = 0; c < bytes.size(); ++c) {
    CHECK(SizeClassBytes(c) == bytes[c]);
    CHECK(SizeClassBits(c) == 8 * (bytes[c] - 17));
  }
  // The default layout's stage 0 (3,345 bits) fits class 11 (448 bytes, 3,448 bits).
  CHECK(SmallestClassWithBits(3345) == 11);
  CHECK(SmallestClassWithBits(3448) == 11);
  CHECK(SmallestClassWithBits(3449) == 12);
  CHECK(SmallestClassWithBits(1) == 0);
}

TEST_CASE("size classes: each class's stage limit gives about the layout's capacity",
          "[unit][bloom][v4]") {
  // The smallest e with m_c * 2^e >= m, added to the layout's limit.
  CHECK(ClassStageLimit(3345, 8, 0) == 12);   // 376 bits: 4 doublings to 6,016
  CHECK(ClassStageLimit(3345, 8, 10) == 9);   // 3,064 bits: 1 doubling
  CHECK(ClassStageLimit(3345, 8, 11) == 8);   // 3,448 bits: the default class
  CHECK(ClassStageLimit(3345, 8, 15) == 7);   // 7,032 >= 2 * 3,345
  CHECK(ClassStageLimit(3345, 8, 42) == 1);   // 98,304 bytes: below m * 2^8
  CHECK(ClassStageLimit(3345, 8, 43) == 0);   // 917,368 bits >= m * 2^8: unused
  CHECK(ClassStageLimit(3345, 30, 0) == 32);  // capped at the stage limit's maximum
  CHECK(ClassStageLimit(376, 1, 0) == 1);     // m_c == m
  CHECK(ClassStageLimit(377, 1, 0) == 2);

  const StageParams p = DefaultParams();
  REQUIRE(SizeClassCount(p) == 43);
  auto v3 = ComputeStages(p);
  REQUIRE(v3.ok());
  auto total = [&](const std::vector<Stage>& t) {
    double n = 0;
    for (const Stage& st : t) n += StageCapacity(st.m, st.k, p.fill_ppm);
    return n;
  };
  const double v3_total = total(*v3);
  for (uint32_t c = 0; c < SizeClassCount(p); ++c) {
    auto t = ComputeClassStages(p, c);
    REQUIRE(t.ok());
    INFO("class " << c << ": " << t->size() << " stages, capacity " << total(*t) << " vs "
                  << v3_total);
    CHECK(t->size() == ClassStageLimit(p.m0, p.stages, c));
    CHECK(total(*t) >= 0.5 * v3_total);
    CHECK(total(*t) <= 2.0 * v3_total);
  }
}

TEST_CASE("size classes: a class's stages are rule 8's with m_c, after the header byte",
          "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  const uint32_t n = SizeClassCount(p);
  CHECK_FALSE(ComputeClassStages(p, n).ok());  // the first class that does not fit
  for (uint32_t c = 0; c < n; c += 5) {
    auto t = ComputeClassStages(p, c);
    REQUIRE(t.ok());
    StageParams q = p;
    q.m0 = static_cast<uint32_t>(SizeClassBits(c));
    q.stages = ClassStageLimit(p.m0, p.stages, c);
    auto plain = ComputeStages(q);
    REQUIRE(plain.ok());
    REQUIRE(t->size() == q.stages);
    for (size_t s = 0; s < t->size(); ++s) {
      CHECK((*t)[s].m == (*plain)[s].m);
      CHECK((*t)[s].k == (*plain)[s].k);
      CHECK((*t)[s].fill == (*plain)[s].fill);
      CHECK((*t)[s].offset == (*plain)[s].offset + kSizeClassHeaderBits);
    }
    // A value created with its whole stage 0 is S_c - 16 bytes and holds stage 0 alone.
    const size_t created = 1 + ((*t)[0].m + 7) / 8;
    CHECK(created == SizeClassBytes(c) - 16);
    CHECK(StagesPresent(*t, created) == 1);
    if (t->size() > 1) CHECK(StagesPresent(*t, created + 1) == 2);
  }
  StageParams bad = p;
  bad.first_bit = 4;
  CHECK_FALSE(ComputeStages(bad).ok());
}

TEST_CASE("size classes: the class rule", "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  const uint32_t n = SizeClassCount(p);
  // No previous bucket: the class of the layout's m.
  CHECK(ChooseClass(p, n, std::nullopt) == 11);
  CHECK(ChooseClass(p, 5, std::nullopt) == 4);  // capped
  CHECK(ChooseClass(p, n, 0.0) == 0);
  for (double est : {10.0, 150.0, 600.0, 2000.0, 12800.0, 1e5}) {
    const uint32_t c = ChooseClass(p, n, est);
    INFO("estimate " << est << ": class " << c);
    CHECK(StageCapacity(SizeClassBits(c), p.k0, p.fill_ppm) >= est / kClassSplit);
    if (c > 0) CHECK(StageCapacity(SizeClassBits(c - 1), p.k0, p.fill_ppm) < est / kClassSplit);
  }
  // A user at 3x the design load (600 items) gets a stage 0 for 200: the default class.
  CHECK(ChooseClass(p, n, 600.0 * 3345 / 3448) == 11);
  // Past the largest class: the largest.
  CHECK(ChooseClass(p, n, 1e9) == n - 1);
}

TEST_CASE("size classes: the class rule keeps the previous class at most kClassKeep above",
          "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  const uint32_t n = SizeClassCount(p);
  for (double est : {10.0, 150.0, 600.0, 2000.0, 12800.0}) {
    const uint32_t c = ChooseClass(p, n, est);
    INFO("estimate " << est << ": class " << c);
    for (uint32_t previous = 0; previous < n; ++previous) {
      const bool keep = previous >= c && previous <= c + kClassKeep;
      CHECK(ChooseClass(p, n, est, previous) == (keep ? previous : c));
    }
  }
  // No estimate (no previous key): no previous class either; the default.
  CHECK(ChooseClass(p, n, std::nullopt, 12) == 11);
  // Capped: the largest class is kept, never one past it.
  CHECK(ChooseClass(p, n, 1e9, n - 1) == n - 1);
  CHECK(ChooseClass(p, n - 1, 1e9, n - 1) == n - 2);
}

TEST_CASE("size classes: ChooseClassFrom reads the estimates and the newer class from values",
          "[unit][bloom][v4]") {
  FilterConfig f;
  f.layout_version = 4;
  const Layout l = LayoutFromConfig(f).value();
  const int64_t day = l.bucket_seconds, today = 40 * day;
  const uint32_t n = static_cast<uint32_t>(l.class_tables.size());
  // A class-c value holding about `items` (stage 0's bits set as a fill would).
  auto value = [&](uint32_t c, uint64_t set_bits) {
    std::string v(SizeClassBytes(c) - 16, '\0');
    v[0] = static_cast<char>(c + 1);
    for (uint64_t b = 0; b < set_bits; ++b) v[1 + b / 8] |= static_cast<char>(0x80u >> (b % 8));
    return v;
  };
  const std::string a = value(9, 900), b = value(14, 300);
  const double ea = EstimateItems(a, l.class_tables[9]), eb = EstimateItems(b, l.class_tables[14]);
  // The smaller estimate; the class of the newer key that names one.
  CHECK(ChooseClassFrom(l, today, a, b) == ChooseClass(l.Params(), n, std::min(ea, eb), 9));
  CHECK(ChooseClassFrom(l, today, b, a) == ChooseClass(l.Params(), n, std::min(ea, eb), 14));
  CHECK(ChooseClassFrom(l, today, "", b) == ChooseClass(l.Params(), n, eb, 14));
  CHECK(ChooseClassFrom(l, today, "", "") == ChooseClass(l.Params(), n, std::nullopt));
  // A header naming no class: neither an estimate nor a class.
  std::string broken = a;
  broken[0] = 0;
  CHECK(ChooseClassFrom(l, today, broken, b) == ChooseClass(l.Params(), n, eb, 14));
}

TEST_CASE("size classes: the item estimate from a value's set bits", "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  CHECK(EstimateItems("", *ComputeClassStages(p, 11)) == 0);
  // One stage, and several: the estimate is within 5% of the distinct items written.
  struct Case {
    uint32_t cls;
    int items;
    size_t stages_expected;
  };
  for (const Case& tc :
       {Case{11, 100, 1}, Case{11, 200, 1}, Case{4, 40, 1}, Case{4, 400, 4}, Case{16, 3000, 3}}) {
    auto t = ComputeClassStages(p, tc.cls);
    REQUIRE(t.ok());
    std::string value(1 + ((*t)[0].m + 7) / 8, '\0');
    value[0] = static_cast<char>(tc.cls + 1);
    WriteItems(&value, *t, 0, tc.items);
    INFO("class " << tc.cls << ", " << tc.items << " items, " << value.size() << " bytes");
    CHECK(StagesPresent(*t, value.size()) == tc.stages_expected);
    const double est = EstimateItems(value, *t);
    CHECK(std::fabs(est - tc.items) <= 0.05 * tc.items);
  }
  // A class's design capacity: m_c / m of the default layout's 200 items.
  const double cap11 = StageCapacity(SizeClassBits(11), p.k0, p.fill_ppm);
  CHECK(std::fabs(cap11 - 200.0 * 3448 / 3345) < 1.0);
}

}  // namespace
}  // namespace ef
