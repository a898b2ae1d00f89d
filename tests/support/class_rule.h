// Helpers of the tests of layout v4's class rule (the creation script,
// EF.CLASSKEY, ChooseClassFrom): a version-4 layout, and filter values filled by
// the writer's rule.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stages.h"
#include "config/config.h"

namespace ef::test {

// A version-4 layout under `prefix` (items_per_bucket `items`, stage limit
// `stages`), whose keys have a class from bucket v4_from on.
inline Layout V4Layout(const std::string& prefix, int64_t items, uint32_t stages, int64_t v4_from) {
  FilterConfig f;
  f.key_prefix = prefix;
  f.items_per_bucket = items;
  f.stages = stages;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  l->v4 = true;
  l->v4_from = v4_from;
  REQUIRE(l->Finish().ok());
  return *l;
}

// A value of `table` (a class's, header first, or the meta's with header 0)
// holding n items "i<seed>-<i>" written by rule 8's fill rule: a stage takes
// items until its popcount reaches fill_s, then the next one.
inline std::string Filled(const std::vector<Stage>& table, int header, int n, uint64_t seed) {
  std::string v;
  if (header > 0) {
    v.assign((table[0].offset + table[0].m + 7) / 8, '\0');
    v[0] = static_cast<char>(header);
  }
  std::vector<uint32_t> pos(64);
  size_t s = 0;
  for (int i = 0; i < n; ++i) {
    if (StagePopcount(v, table[s]) >= table[s].fill && s + 1 < table.size()) ++s;
    const Stage& st = table[s];
    ComputeStagePositions(HashItem("i" + std::to_string(seed) + "-" + std::to_string(i), 0), st,
                          PositionRule::kRemix, pos.data());
    for (uint32_t j = 0; j < st.k; ++j) {
      const uint32_t p = pos[j];
      if (v.size() <= p / 8) v.resize(p / 8 + 1, '\0');
      v[p / 8] = static_cast<char>(v[p / 8] | (0x80 >> (p % 8)));
    }
  }
  return v;
}

}  // namespace ef::test
