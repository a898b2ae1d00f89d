// Layout v4's size classes (bloom/size_classes.h; the design in docs/DESIGN.md,
// "Per-user sizes: layout version 4"): the class series, each class's stage table
// after the header byte, and the item estimate a writer sizes a new key from.
// Pure: no Redis.
#include "bloom/size_classes.h"

#include <catch2/catch.hpp>
#include <cmath>
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

TEST_CASE("size classes: four per octave from 128 bytes, stage 0 filling its allocation",
          "[unit][bloom][v4]") {
  const std::vector<uint64_t> bytes = {128, 160, 192, 224, 256, 320, 384, 448, 512, 640};
  for (uint32_t c = 0; c < bytes.size(); ++c) {
    CHECK(SizeClassBytes(c) == bytes[c]);
    CHECK(SizeClassBits(c) == 8 * (bytes[c] - 17));
  }
  // The default layout's stage 0 (3,345 bits) fits class 7 (448 bytes, 3,448 bits).
  CHECK(SmallestClassWithBits(3345) == 7);
  CHECK(SmallestClassWithBits(3448) == 7);
  CHECK(SmallestClassWithBits(3449) == 8);
  CHECK(SmallestClassWithBits(1) == 0);
}

TEST_CASE("size classes: a class's stages are rule 8's with m_c, after the header byte",
          "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  const uint32_t n = SizeClassCount(p);
  REQUIRE(n > 40);
  CHECK_FALSE(ComputeClassStages(p, n).ok());  // the first class that does not fit
  for (uint32_t c = 0; c < n; c += 7) {
    auto t = ComputeClassStages(p, c);
    REQUIRE(t.ok());
    StageParams q = p;
    q.m0 = static_cast<uint32_t>(SizeClassBits(c));
    auto plain = ComputeStages(q);
    REQUIRE(plain.ok());
    REQUIRE(t->size() == p.stages);
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
    CHECK(StagesPresent(*t, created + 1) == 2);
  }
  StageParams bad = p;
  bad.first_bit = 4;
  CHECK_FALSE(ComputeStages(bad).ok());
}

TEST_CASE("size classes: the item estimate from a value's set bits", "[unit][bloom][v4]") {
  const StageParams p = DefaultParams();
  CHECK(EstimateItems("", *ComputeClassStages(p, 7)) == 0);
  // One stage, and several: the estimate is within 5% of the distinct items written.
  struct Case {
    uint32_t cls;
    int items;
    size_t stages_expected;
  };
  for (const Case& tc :
       {Case{7, 100, 1}, Case{7, 200, 1}, Case{0, 40, 1}, Case{0, 400, 4}, Case{12, 3000, 3}}) {
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
  const double cap7 = StageCapacity(SizeClassBits(7), p.k0, p.fill_ppm);
  CHECK(std::fabs(cap7 - 200.0 * 3448 / 3345) < 1.0);
}

}  // namespace
}  // namespace ef
