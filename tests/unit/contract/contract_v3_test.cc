// Layout contract version 3 (docs/FORMAT.md rule 9): the C++ position rule against
// the tables "Version 3: positions", "Version 3: stage positions" and "Version 3:
// a bucket on each side of `v3_from`", read out of FORMAT.md so that the document
// is what is tested (the Python reference printed there generates them), and rule
// 9 recomputed with plain 128-bit integers.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/positions.h"
#include "bloom/stages.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

using Row = test::DocRow;

std::vector<Row> TableRows(const std::string& heading) {
  return test::DocTableRows("FORMAT.md", heading);
}

std::string Item(const std::string& cell) { return test::DocItem(cell); }

// 0, 42 or `0xdeadbeef`.
uint32_t Seed(std::string cell) {
  if (!cell.empty() && cell.front() == '`') cell = cell.substr(1, cell.size() - 2);
  return static_cast<uint32_t>(std::stoul(cell, nullptr, 0));
}

std::vector<uint64_t> Numbers(const std::string& cell) { return test::DocNumbers(cell); }

std::vector<uint64_t> Remix(Hash128 h, uint32_t m, uint32_t k) {
  std::vector<uint32_t> out(k);
  ComputePositions(h, m, k, PositionRule::kRemix, out.data());
  return {out.begin(), out.end()};
}

std::vector<uint64_t> StagePositions(Hash128 h, const Stage& st, PositionRule rule) {
  std::vector<uint32_t> out(st.k);
  ComputeStagePositions(h, st, rule, out.data());
  return {out.begin(), out.end()};
}

// Rule 9 as FORMAT.md writes it, every step in 128-bit integers.
uint64_t Oracle(uint64_t x, uint32_t m) {
  const unsigned __int128 two64 = static_cast<unsigned __int128>(1) << 64;
  const uint64_t folded = x ^ (x >> 32);
  const uint64_t y = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(folded) * 0xff51afd7ed558ccdULL) % two64);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(y) * m) / two64);
}

Layout Default() {
  StatusOr<Layout> l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  REQUIRE(l->m == 3345);
  REQUIRE(l->k == 12);
  REQUIRE(l->stage_table.size() == 8);
  return *l;
}

}  // namespace

TEST_CASE("contract v3: rule 9 positions match the FORMAT.md table", "[contract][v3]") {
  const std::vector<Row> rows = TableRows("### Version 3: positions");
  REQUIRE(rows.size() == 9);
  for (const Row& r : rows) {
    REQUIRE(r.size() == 4);
    const Hash128 h = HashItem(Item(r[0]), Seed(r[1]));
    INFO("item " << r[0] << " seed " << r[1]);
    CHECK(Remix(h, 1000, 7) == Numbers(r[2]));
    CHECK(Remix(h, 3345, 12) == Numbers(r[3]));
  }
  // Already checked against the independent implementation (positions_v3_test.cc).
  CHECK(Numbers(rows[0][2]) == std::vector<uint64_t>{564, 938, 985, 992, 662, 174, 668});
}

TEST_CASE("contract v3: rule 9 stage positions match the FORMAT.md table", "[contract][v3]") {
  const Layout l = Default();
  const std::vector<Row> rows = TableRows("### Version 3: stage positions");
  REQUIRE(rows.size() == 16);
  for (const Row& r : rows) {
    REQUIRE(r.size() == 5);
    const Stage& st = l.stage_table.at(std::stoul(r[2]));
    INFO("item " << r[0] << " seed " << r[1] << " stage " << r[2]);
    CHECK(Numbers(r[3]) == std::vector<uint64_t>{st.offset, st.m, st.k});
    const std::vector<uint64_t> want = Numbers(r[4]);
    CHECK(StagePositions(HashItem(Item(r[0]), Seed(r[1])), st, PositionRule::kRemix) == want);
    for (uint64_t p : want) CHECK((p >= st.offset && p < st.offset + st.m));
  }
}

TEST_CASE("contract v3: each bucket follows its own rule around v3_from", "[contract][v3]") {
  auto fields = Default().ToFields();
  fields["version"] = "3";
  fields["v3_from"] = "1764547200";  // 2025-12-01T00:00:00Z
  StatusOr<Layout> l = LayoutFromFields(fields, "ef:meta");
  REQUIRE(l.ok());
  const std::vector<Row> rows = TableRows("### Version 3: a bucket on each side of `v3_from`");
  REQUIRE(rows.size() == 2);
  for (const Row& r : rows) {
    REQUIRE(r.size() == 5);
    const int64_t start = std::stoll(r[1]);
    INFO("bucket " << r[0]);
    CHECK("`" + MakeKey("ef:", "u1", start, 86400) + "`" == r[2]);
    const bool nine = r[3].rfind("9 ", 0) == 0;
    CHECK((nine || r[3].rfind("2 ", 0) == 0));
    const PositionRule rule = nine ? PositionRule::kRemix : PositionRule::kModulo;
    CHECK(l->RuleFor(start) == rule);
    CHECK(StagePositions(HashItem("hello", 0), l->stage_table[0], rule) == Numbers(r[4]));
  }
  // The text under the table: the rollover is complete from v3_from + window, and
  // `layout upgrade --to 3 --lead 60` picks 2025-12-01 up to 23:59:00Z the day before.
  CHECK(l->RollingOver(1764550800));
  CHECK(l->RollingOver(1767139199));
  CHECK_FALSE(l->RollingOver(1767139200));
  CHECK(V3FromAfter(1764547140, 60, 86400) == 1764547200);
  CHECK(V3FromAfter(1764547170, 60, 86400) == 1764633600);
}

TEST_CASE("contract v3: rule 9 against a 128-bit oracle for random x and m", "[contract][v3]") {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<uint32_t> any_m(1, 0xffffffffu);
  int wrong = 0, out_of_range = 0, checked = 0;
  auto check = [&](uint64_t x, uint32_t m) {
    const uint32_t got = PositionOf(PositionRule::kRemix, x, m);
    uint32_t via_hash = 0;  // k = 1: the first term of the progression is h1 = x
    ComputePositions(Hash128{x, rng()}, m, 1, PositionRule::kRemix, &via_hash);
    if (got != Oracle(x, m) || via_hash != got) {
      if (wrong++ == 0) UNSCOPED_INFO("first mismatch: x " << x << " m " << m << " got " << got);
    }
    out_of_range += got >= m;
    ++checked;
  };
  for (int n = 0; n < 10000; ++n) {
    const uint64_t x = rng();
    check(x, any_m(rng));
  }
  for (uint64_t x : {uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 63, uint64_t{0xffffffff}})
    for (uint32_t m : {1u, 2u, 3345u, 0x80000000u, 0xffffffffu}) check(x, m);
  CHECK(checked == 10020);
  CHECK(wrong == 0);
  CHECK(out_of_range == 0);
  // Rule 2 stays x mod m.
  CHECK(PositionOf(PositionRule::kModulo, 2807774592216315931ULL, 7805) == 4416);
}

}  // namespace ef
