// docs/CONTENT.md section 4, index layout revision 2: contentdb::GroupLayout
// against the tables of "Index layout revision 2: table entries", read out of
// CONTENT.md so that the document is what is tested
// (tests/interop/content_ref.py index-vectors checks the same rows with the
// document's Python reference).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "content/block_index.h"
#include "contentdb/groups.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

const char* kHeading = "### Index layout revision 2: table entries";

int64_t Int(const std::string& cell) { return std::stoll(cell); }

TEST_CASE("contract: CONTENT.md index layout revision 2, generations", "[contract][content]") {
  auto scheme = content::BlockScheme::Make(5, 3);
  REQUIRE(scheme.ok());
  const auto rows = test::DocTableRows("CONTENT.md", kHeading, 0);
  REQUIRE(rows.size() >= 3);
  for (const auto& row : rows) {
    REQUIRE(row.size() == 5);
    INFO("now " << row[0] << " retention " << row[1]);
    contentdb::GroupLayout layout("ef:", *scheme, 14, Int(row[1]));
    const int64_t gen = layout.Generation(Int(row[0]));
    CHECK(gen == Int(row[2]));
    CHECK(layout.ExpireAtMs(gen) == Int(row[3]));
    CHECK(layout.OldestGeneration(Int(row[0])) == Int(row[4]));
  }
}

TEST_CASE("contract: CONTENT.md index layout revision 2, keys and scores", "[contract][content]") {
  auto scheme = content::BlockScheme::Make(5, 3);
  REQUIRE(scheme.ok());
  const auto rows = test::DocTableRows("CONTENT.md", kHeading, 1);
  REQUIRE(rows.size() >= 5);
  for (const auto& row : rows) {
    REQUIRE(row.size() == 6);
    INFO(row[0] << " table " << row[1]);
    const uint64_t fp = std::stoull(row[0].substr(1, row[0].size() - 2), nullptr, 16);
    contentdb::GroupLayout layout("ef:", *scheme, static_cast<int>(Int(row[3])),
                                  int64_t{60} * 86400 * 1000);
    const contentdb::GroupPlace place =
        layout.Place(static_cast<int>(Int(row[1])), fp, Int(row[2]));
    CHECK("`" + place.key + "`" == row[4]);
    CHECK(place.score == row[5]);
  }
  // The member: the fingerprint's 8 bytes, big-endian, then the item ID.
  const std::string member = contentdb::GroupLayout::Member(0x0123456789abcdefULL, "a");
  CHECK(member == std::string("\x01\x23\x45\x67\x89\xab\xcd\xef"
                              "a",
                              9));
  uint64_t fp = 0;
  std::string_view item;
  REQUIRE(contentdb::GroupLayout::ParseMember(member, &fp, &item));
  CHECK(fp == 0x0123456789abcdefULL);
  CHECK(item == "a");
  CHECK_FALSE(contentdb::GroupLayout::ParseMember(member.substr(0, 8), &fp, &item));
}

}  // namespace
}  // namespace ef
