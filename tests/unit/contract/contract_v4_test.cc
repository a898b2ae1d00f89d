// Layout contract version 4 (docs/FORMAT.md rule 11, size classes): the C++
// classes, class tables, value reading and class rule against the section
// "Version 4: size classes, a value, the class rule", read out of FORMAT.md so
// that the document is what is tested (the Python reference printed there
// generates it).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "read/bloom_reader.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

const char kSection[] = "### Version 4: size classes, a value, the class rule";

std::map<std::string, std::string> DefaultV4Meta() { return test::DefaultMetaFields(4); }

Layout V4Layout() {
  StatusOr<Layout> l = LayoutFromFields(DefaultV4Meta(), "ef:meta");
  REQUIRE(l.ok());
  REQUIRE(l->version() == 4);
  return *l;
}

std::vector<uint64_t> Numbers(const std::string& cell) { return test::DocNumbers(cell); }
std::string Item(const std::string& cell) { return test::DocItem(cell); }

void SetBit(std::string* v, uint64_t p) {
  if (v->size() <= p / 8) v->resize(p / 8 + 1, '\0');
  (*v)[p / 8] = static_cast<char>((*v)[p / 8] | (0x80 >> (p % 8)));
}

std::vector<uint64_t> StagePositions(const std::string& item, const Stage& st) {
  std::vector<uint32_t> out(st.k);
  ComputeStagePositions(HashItem(item, 0), st, PositionRule::kRemix, out.data());
  return {out.begin(), out.end()};
}

}  // namespace

TEST_CASE("contract v4: the class table matches FORMAT.md", "[contract][v4]") {
  const Layout l = V4Layout();
  CHECK(l.class_tables.size() == SizeClassCount(l.Params()));
  const auto rows = test::DocTableRows("FORMAT.md", kSection, 0);
  REQUIRE(rows.size() >= 5);
  size_t checked = 0;
  for (const auto& row : rows) {
    REQUIRE(row.size() == 9);
    for (size_t at : {size_t{0}, size_t{5}}) {
      const uint32_t c = static_cast<uint32_t>(std::stoul(row[at]));
      INFO("class " << c);
      CHECK(SizeClassBytes(c) == std::stoull(row[at + 1]));
      CHECK(SizeClassBits(c) == std::stoull(row[at + 2]));
      CHECK(ClassStageLimit(l.m, l.stages, c) == std::stoul(row[at + 3]));
      REQUIRE(c < l.class_tables.size());
      CHECK(l.class_tables[c].size() == std::stoul(row[at + 3]));
      ++checked;
    }
  }
  CHECK(checked == 2 * rows.size());
  // "has C = 43 classes"
  const std::string text = test::DocSection("FORMAT.md", kSection);
  CHECK(text.find("`C = " + std::to_string(l.class_tables.size()) + "` classes") !=
        std::string::npos);
  // Class 4's table, as the indented block prints it (s m_s k_s offset_s fill_s offset_s/8).
  std::istringstream in(text);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("    ", 0) != 0 || line.find_first_not_of(" 0123456789") != std::string::npos)
      continue;
    const std::vector<uint64_t> f = [&] {
      std::istringstream w(line);
      std::vector<uint64_t> v;
      for (uint64_t x; w >> x;) v.push_back(x);
      return v;
    }();
    REQUIRE(f.size() == 6);
    const Stage& st = l.class_tables[4].at(f[0]);
    INFO("class 4 stage " << f[0]);
    CHECK(st.m == f[1]);
    CHECK(st.k == f[2]);
    CHECK(st.offset == f[3]);
    CHECK(st.fill == f[4]);
    CHECK(st.offset / 8 == f[5]);
    ++lines;
  }
  CHECK(lines == 5);
}

TEST_CASE("contract v4: a class-4 value is read with its class's table", "[contract][v4]") {
  const Layout l = V4Layout();
  const std::vector<Stage>& t4 = l.class_tables[4];
  std::string value(SizeClassBytes(4) - 16, '\0');  // as a writer creates it
  value[0] = 5;
  std::vector<uint64_t> expected_bits = {5, 7};  // the header 0x05
  for (const auto& row : test::DocTableRows("FORMAT.md", kSection, 1)) {
    REQUIRE(row.size() == 3);
    const std::string item = Item(row[0]);
    const Stage& st = t4.at(std::stoul(row[1]));
    INFO(item);
    CHECK(StagePositions(item, st) == Numbers(row[2]));
    for (uint64_t p : StagePositions(item, st)) {
      SetBit(&value, p);
      expected_bits.push_back(p);
    }
  }
  const std::string text = test::DocSection("FORMAT.md", kSection);
  REQUIRE(text.find("The value is " + std::to_string(value.size()) + " bytes and holds " +
                    std::to_string(StagesPresent(t4, value.size())) + " stages") !=
          std::string::npos);
  std::vector<uint64_t> bits;
  for (uint64_t p = 0; p < 8 * value.size(); ++p)
    if ((static_cast<unsigned char>(value[p / 8]) >> (7 - p % 8)) & 1) bits.push_back(p);
  std::sort(expected_bits.begin(), expected_bits.end());
  expected_bits.erase(std::unique(expected_bits.begin(), expected_bits.end()), expected_bits.end());
  CHECK(bits == expected_bits);

  // Bucket 2025-12-01 of u1 among the read's keys, the others missing.
  const int64_t now = 1764547200;
  const std::vector<int64_t> starts = ReadBuckets(now, l.window_seconds, l.bucket_seconds);
  std::vector<std::string> values(starts.size());
  const auto at = std::find(starts.begin(), starts.end(), now) - starts.begin();
  values[at] = value;
  const std::vector<std::string> items = {"hello", "i9", "商品-1"};
  const CheckResult r = TestItems(l, values, starts, items);
  CHECK(r.seen == std::vector<bool>{true, true, false});
  CHECK(r.invalid_keys == 0);
  CHECK(l.TableFor(value, now) == &t4);
  // The same value read with the meta's table (a version-3 reader): neither is seen.
  const CheckResult v3 = TestItems(l.WithoutV4(), values, starts, items);
  CHECK(v3.seen == std::vector<bool>{false, false, false});
  // A header naming no class: not valid, not tested.
  for (unsigned char header : {0, 44}) {
    INFO("header " << int{header});
    values[at][0] = static_cast<char>(header);
    CHECK(l.TableFor(values[at], now) == nullptr);
    const CheckResult bad = TestItems(l, values, starts, items);
    CHECK(bad.seen_count == 0);
    CHECK(bad.invalid_keys == 1);
    CHECK(bad.buckets_present == 1);
  }
}

TEST_CASE("contract v4: the class rule matches FORMAT.md", "[contract][v4]") {
  const Layout l = V4Layout();
  const StageParams p = l.Params();
  const auto n = static_cast<uint32_t>(l.class_tables.size());
  CHECK(ChooseClass(p, n, std::nullopt) == 11);
  const auto rows = test::DocTableRows("FORMAT.md", kSection, 2);
  REQUIRE(rows.size() >= 5);
  for (const auto& row : rows) {
    INFO("estimate " << row[0]);
    CHECK(ChooseClass(p, n, std::stod(row[0])) == std::stoul(row[1]));
  }
  // With the newer previous key's class p: kept when c <= p <= c + 1.
  const auto kept = test::DocTableRows("FORMAT.md", kSection, 3);
  REQUIRE(kept.size() >= 5);
  for (const auto& row : kept) {
    INFO("estimate " << row[0] << ", previous class " << row[1]);
    REQUIRE(row.size() == 3);
    CHECK(ChooseClass(p, n, std::stod(row[0]), std::stoul(row[1])) == std::stoul(row[2]));
  }
  // item-0 .. item-299 into class 11 by rule 8's fill rule: 1,438 bytes, 2 stages,
  // estimate 299.68, class 8.
  const std::vector<Stage>& t = l.class_tables[11];
  std::string value(SizeClassBytes(11) - 16, '\0');
  value[0] = 12;
  for (int i = 0; i < 300; ++i) {
    size_t s = StagesPresent(t, value.size()) - 1;
    if (StagePopcount(value, t[s]) >= t[s].fill) ++s;
    for (uint64_t pos : StagePositions("item-" + std::to_string(i), t[s])) SetBit(&value, pos);
  }
  const double estimate = EstimateItems(value, t);
  char text[512];
  std::snprintf(text, sizeof text, "is %s bytes with %zu stages; its estimate is %.2f,",
                value.size() == 1438 ? "1,438" : std::to_string(value.size()).c_str(),
                StagesPresent(t, value.size()), estimate);
  INFO(text);
  CHECK(test::DocSection("FORMAT.md", kSection).find(text) != std::string::npos);
  CHECK(test::DocSection("FORMAT.md", kSection)
            .find("the class of a key sized from it is " +
                  std::to_string(ChooseClass(p, n, estimate))) != std::string::npos);
}

TEST_CASE("contract v4: a version-4 meta round-trips and compares", "[contract][v4]") {
  const Layout l = V4Layout();
  CHECK(l.ToFields() == DefaultV4Meta());
  CHECK(l.v3);
  CHECK(l.HasClass(0));
  // A version-3 configuration is no difference against a stored version-4 meta.
  Layout v3 = l.WithoutV4();
  CHECK(v3.version() == 3);
  CHECK(CompareLayout(DefaultV4Meta(), v3, "ef:meta").ok());
  // Buckets before v4_from keep the meta's table.
  auto upgraded = DefaultV4Meta();
  upgraded["v4_from"] = "1764547200";
  StatusOr<Layout> u = LayoutFromFields(upgraded, "ef:meta");
  REQUIRE(u.ok());
  const std::string value = "\x05xyz";
  CHECK(u->TableFor(value, 1764460800) == &u->stage_table);
  CHECK(u->TableFor(value, 1764547200) == &u->class_tables[4]);
  CHECK(u->TableFor("", 1764547200) == &u->stage_table);  // missing: an empty filter
}

}  // namespace ef
