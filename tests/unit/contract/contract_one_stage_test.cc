// docs/FORMAT.md "One stage: no limit" (rule 8 item 3, issue 47): with one stage
// there is no stage limit, so every item is written, also past fill_0. The
// vector's row is computed here from the rule, bit by bit: items written, set
// bits, value bytes, and where a writer that applied the limit to one stage
// would have stopped.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

uint64_t Number(const std::string& cell) {
  std::string digits;
  for (char c : cell)
    if (c >= '0' && c <= '9') digits.push_back(c);
  REQUIRE_FALSE(digits.empty());
  return std::stoull(digits);
}

}  // namespace

TEST_CASE("FORMAT.md vector: one stage has no stage limit", "[contract][v3][stages]") {
  FilterConfig f;
  f.stages = 1;
  f.layout_version = 3;
  StatusOr<Layout> l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 3);
  REQUIRE(l->stage_table.size() == 1);
  const Stage& st = l->stage_table[0];
  REQUIRE(st.m == 3345);
  REQUIRE(st.k == 12);
  REQUIRE(st.fill == 1713);
  const std::vector<test::DocRow> rows = test::DocTableRows("FORMAT.md", "### One stage: no limit");
  REQUIRE(rows.size() == 1);
  const test::DocRow& row = rows[0];
  REQUIRE(row.size() == 5);
  const uint64_t n = Number(row[0]);
  std::vector<uint8_t> bits((st.m + 7) / 8, 0);
  uint64_t fill = 0, highest = 0;
  std::string first_dropped;
  uint64_t fill_at_stop = 0;
  std::vector<uint32_t> p(st.k);
  for (uint64_t i = 0; i < n; ++i) {
    const std::string item = "one-" + std::to_string(i);
    ComputePositions(HashItem(item, 0), st.m, st.k, PositionRule::kRemix, p.data());
    bool present = true;
    for (uint32_t q : p) present = present && (bits[q >> 3] & (0x80u >> (q & 7)));
    // Where a limit on the one stage would have stopped (not the rule).
    if (!present && fill >= st.fill && first_dropped.empty()) {
      first_dropped = item;
      fill_at_stop = fill;
    }
    for (uint32_t q : p) {  // the rule: written whatever the fill
      if (!(bits[q >> 3] & (0x80u >> (q & 7)))) ++fill;
      bits[q >> 3] |= static_cast<uint8_t>(0x80u >> (q & 7));
      highest = std::max<uint64_t>(highest, q);
    }
  }
  INFO("computed: " << n << " items, " << fill << " set bits, " << highest / 8 + 1
                    << " bytes, first dropped by a limit " << first_dropped << " at "
                    << fill_at_stop);
  CHECK(Number(row[1]) == fill);
  CHECK(Number(row[2]) == highest / 8 + 1);
  CHECK(row[3] == "`\"" + first_dropped + "\"`");
  CHECK(Number(row[4]) == fill_at_stop);
  CHECK(fill > st.fill);  // past fill_0: the vector shows the difference
}

}  // namespace ef
