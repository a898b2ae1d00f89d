// docs/CONTENT.md rule 5 (filtering by cluster): the C++ writer rule
// (WritesClusterMark; revision 1's ClusterToken) and reader (TestItems with
// clusters) against the tables of "Rule 5: cluster marks and a query" and "Rule
// 5, revision 1: cluster tokens and a query", read out of CONTENT.md so that the
// document is what is tested (tests/interop/content_ref.py
// cluster-vectors checks the same rows with the document's Python reference).
#include <catch2/catch.hpp>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "bloom/cluster_token.h"
#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/stages.h"
#include "read/bloom_reader.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

const char* kRevision2 = "### Rule 5: cluster marks and a query";
const char* kRevision1 = "### Rule 5, revision 1: cluster tokens and a query";

// `"story-1"` -> story-1; the dash (no cluster known) -> "" (TestItems' unknown).
std::string Quoted(const std::string& cell) {
  if (cell == "\u2014") return "";
  REQUIRE(cell.size() >= 4);
  REQUIRE(cell.rfind("`\"", 0) == 0);
  REQUIRE(cell.substr(cell.size() - 2) == "\"`");
  return cell.substr(2, cell.size() - 4);
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::vector<uint32_t> Positions(const std::string& item, const Layout& l) {
  std::vector<uint32_t> out(l.stage_table[0].k);
  ComputeStagePositions(HashItem(item, l.seed), l.stage_table[0], l.RuleFor(0), out.data());
  return out;
}

std::string Join(const std::vector<uint32_t>& ps) {
  std::string out;
  for (uint32_t p : ps) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

Layout Default() {
  StatusOr<Layout> l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  REQUIRE(l->m == 3345);
  REQUIRE(l->k == 12);
  REQUIRE(l->seed == 0);
  REQUIRE(l->RuleFor(0) == PositionRule::kRemix);
  return *l;
}

}  // namespace

TEST_CASE("contract clusters: rule 5 tokens and their positions match the CONTENT.md table",
          "[contract][clusters]") {
  const Layout l = Default();
  const auto rows = test::DocTableRows("CONTENT.md", kRevision1, 0);
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) {
    REQUIRE(r.size() == 3);
    const std::string token = ClusterToken(Quoted(r[0]));
    INFO("cluster " << r[0]);
    CHECK("`" + Hex(token) + "`" == r[1]);
    CHECK(Join(Positions(token, l)) == r[2]);
  }
}

// Writes the heading's table `writes` into one key as writers of `revision` do
// (2: the cluster ID itself; 1: its token), then reads table `reads` with one
// TestItems call as serve makes it, with `layout`'s founder_marks_from.
void CheckWritesAndReads(const char* heading, size_t writes_table, size_t reads_table, int revision,
                         const Layout& l) {
  std::string value;
  auto set = [&](const std::string& item) {
    for (uint32_t p : Positions(item, l)) {
      if (value.size() <= p / 8) value.resize(p / 8 + 1, '\0');
      value[p / 8] = static_cast<char>(value[p / 8] | (0x80 >> (p % 8)));
    }
  };
  const auto writes = test::DocTableRows("CONTENT.md", heading, writes_table);
  REQUIRE(writes.size() == 3);
  for (const auto& w : writes) {
    REQUIRE(w.size() == 3);
    const std::string item = Quoted(w[0]), cluster = Quoted(w[1]);
    std::string sets = w[0];
    set(item);
    if (WritesClusterMark(item, cluster)) {
      sets += revision == 2 ? ", " + w[1] : ", token(" + w[1] + ")";
      set(revision == 2 ? cluster : ClusterToken(cluster));
    }
    INFO("exposure " << w[0] << " cluster " << w[1]);
    CHECK(sets == w[2]);
  }
  const auto reads = test::DocTableRows("CONTENT.md", heading, reads_table);
  REQUIRE(reads.size() == 11);
  std::vector<std::string> items, clusters;
  for (const auto& r : reads) {
    REQUIRE(r.size() == 3);
    items.push_back(Quoted(r[0]));
    clusters.push_back(Quoted(r[1]));
  }
  const CheckResult res =
      TestItems(l, std::vector<std::string_view>{value}, {0}, items, clusters, {});
  REQUIRE(res.seen.size() == reads.size());
  REQUIRE(res.near_duplicate.size() == reads.size());
  size_t seen = 0, near = 0;
  for (size_t i = 0; i < reads.size(); ++i) {
    INFO("candidate " << reads[i][0] << " cluster " << reads[i][1]);
    const std::string got = res.seen[i]             ? "seen"
                            : res.near_duplicate[i] ? "near_duplicate"
                                                    : "unseen";
    CHECK(got == reads[i][2]);
    seen += got == "seen";
    near += got == "near_duplicate";
  }
  CHECK(res.seen_count == seen);
  CHECK(res.near_duplicate_count == near);
}

TEST_CASE("contract clusters: rule 5 writes and reads of the CONTENT.md tables",
          "[contract][clusters]") {
  Layout l = Default();
  SECTION("revision 2: marks, read from founder_marks_from on") {
    l.founder_marks_from = 0;  // bucket 0 is not before it: no token read
    CheckWritesAndReads(kRevision2, 0, 1, 2, l);
  }
  SECTION("revision 1: tokens, read by a meta without founder_marks_from") {
    l.founder_marks_from = -1;
    CheckWritesAndReads(kRevision1, 1, 2, 1, l);
  }
  SECTION("revision 1: tokens, read in a bucket before founder_marks_from") {
    l.founder_marks_from = 3600;
    CheckWritesAndReads(kRevision1, 1, 2, 1, l);
  }
}

}  // namespace ef
