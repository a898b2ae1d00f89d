// TestItems with clusters (read/bloom_reader.h; docs/CONTENT.md rule 5): the
// reader's decision seen / near_duplicate / served / unseen, on bucket values
// written by the writers' rule (bloom/cluster_token.h: item I, and C itself when
// C != I; revision 1: token(C) instead of C) with the layout's own position
// primitives.
#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/cluster_token.h"
#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/served.h"
#include "bloom/stages.h"
#include "read/bloom_reader.h"

namespace ef {
namespace {

// Sets the item's positions in every stage of *value by the rule of the bucket
// starting at `start` (what a writer's SETBIT does).
void Put(const Layout& l, int64_t start, std::string_view item, std::string* value) {
  for (const Stage& st : l.stage_table) {
    const size_t need = (st.offset + st.m + 7) / 8;
    if (value->size() < need) value->resize(need, '\0');
    std::vector<uint32_t> pos(st.k);
    ComputeStagePositions(HashItem(item, l.seed), st, l.RuleFor(start), pos.data());
    for (uint32_t p : pos) (*value)[p / 8] = static_cast<char>((*value)[p / 8] | (0x80 >> (p % 8)));
  }
}

// An exposure of `item` of cluster `cluster` by the writers' rule (revision 2).
void Expose(const Layout& l, int64_t start, std::string_view item, std::string_view cluster,
            std::string* value) {
  Put(l, start, item, value);
  if (WritesClusterMark(item, cluster)) Put(l, start, cluster, value);
}
// The same by a revision-1 writer: token(C) instead of C.
void ExposeRevision1(const Layout& l, int64_t start, std::string_view item,
                     std::string_view cluster, std::string* value) {
  Put(l, start, item, value);
  if (WritesClusterMark(item, cluster)) Put(l, start, ClusterToken(cluster), value);
}

Layout TestLayout(int version) {
  FilterConfig f;
  f.items_per_bucket = 1000;  // a false positive among a few items: about never
  f.window_seconds = 86400;
  f.layout_version = version;
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  return *l;
}

}  // namespace

TEST_CASE("TestItems with clusters tells seen, near_duplicate and unseen by rule 5", "[reader]") {
  for (int version : {2, 3}) {
    INFO("layout version " << version);
    const Layout l = TestLayout(version);
    const std::vector<int64_t> starts = {0, 3600, 7200};
    std::vector<std::string> values(3);
    // The user saw A2 of cluster A (A is its founder: A2's exposure set A too),
    // and B, the founder of cluster B (its own cluster: nothing more), in another bucket.
    Expose(l, 0, "A2", "A", &values[0]);
    Expose(l, 3600, "B", "B", &values[1]);
    const std::vector<std::string> items = {"A2", "A3", "A", "B2", "B", "C1", "C2", "D"};
    const std::vector<std::string> clusters = {"A", "A", "A", "B", "B", "C", "", "D"};
    const CheckResult r = TestItems(l, std::vector<std::string_view>(values.begin(), values.end()),
                                    starts, items, clusters, "");
    // A2 seen; A3 near (C != J and A set); A, the founder, seen (its ID was set
    // by A2's exposure: revision 2 does not tell it from a near duplicate); B2
    // near by B; B seen; C1, C2, D unseen.
    CHECK(r.seen == std::vector<bool>{true, false, true, false, true, false, false, false});
    CHECK(r.near_duplicate ==
          std::vector<bool>{false, true, false, true, false, false, false, false});
    CHECK(r.seen_count == 3);
    CHECK(r.near_duplicate_count == 2);
    CHECK(r.seen_bucket[0] == 0);
    CHECK(r.seen_bucket[2] == 0);
    CHECK(r.seen_bucket[4] == 3600);
    CHECK(r.seen_bucket[1] == -1);
    CHECK(r.buckets_present == 2);
    CHECK(r.served.empty());  // no ring

    // Without clusters: exactly TestItems (the near duplicates are unseen).
    const CheckResult plain = TestItems(l, values, starts, items);
    const CheckResult none = TestItems(
        l, std::vector<std::string_view>(values.begin(), values.end()), starts, items, {}, "");
    CHECK(none.seen == plain.seen);
    CHECK(none.seen_count == 3);
    CHECK(none.near_duplicate == std::vector<bool>(items.size(), false));
    CHECK(none.near_duplicate_count == 0);
    // Revision 2 writes no token.
    const std::vector<std::string> tokens_only = {ClusterToken("A")};
    CHECK(TestItems(l, values, starts, tokens_only).seen == std::vector<bool>{false});
  }
}

TEST_CASE(
    "TestItems with clusters reads revision-1 tokens while a bucket read starts before "
    "founder_marks_from (or the field is absent), and only then",
    "[reader]") {
  Layout l = TestLayout(3);
  REQUIRE(l.founder_marks_from == 0);  // a new deployment: no token anywhere
  const std::vector<int64_t> starts = {0, 3600, 7200};
  std::vector<std::string> values(3);
  // Bucket 0 by a revision-1 writer (A2 of A: token(A)); bucket 3600 by a
  // revision-2 one (B2 of B: B itself).
  ExposeRevision1(l, 0, "A2", "A", &values[0]);
  Expose(l, 3600, "B2", "B", &values[1]);
  const std::vector<std::string> items = {"A2", "A3", "A", "B3", "B"};
  const std::vector<std::string> clusters = {"A", "A", "A", "B", "B"};
  const std::vector<std::string_view> views(values.begin(), values.end());
  struct Case {
    int64_t founder_marks_from;
    bool tokens_read;
  };
  for (const Case& c : {Case{-1, true}, Case{3600, true}, Case{7200, true}, Case{0, false}}) {
    INFO("founder_marks_from " << c.founder_marks_from);
    l.founder_marks_from = c.founder_marks_from;
    CHECK(l.ReadsClusterTokens(starts.front()) == c.tokens_read);
    const CheckResult r = TestItems(l, views, starts, items, clusters, "");
    // A3 and A are near duplicates by token(A) only while tokens are read; B3
    // by B always; B (the founder, set by B2's exposure) is seen.
    CHECK(r.seen == std::vector<bool>{true, false, false, false, true});
    CHECK(r.near_duplicate == std::vector<bool>{false, c.tokens_read, c.tokens_read, true, false});
  }
  // The oldest bucket read at or after founder_marks_from: no token is read.
  l.founder_marks_from = 3600;
  CHECK_FALSE(l.ReadsClusterTokens(3600));
  CHECK(l.ReadsClusterTokens(0));
}

TEST_CASE("TestItems with clusters: the served ring holds items and clusters", "[reader]") {
  Layout l = TestLayout(3);
  const std::vector<int64_t> starts = {0};
  std::vector<std::string> values(1);
  Expose(l, 0, "X", "X", &values[0]);  // the user saw X
  // A page served P1 (cluster P, P1 != P: P marked too) and Q (its own cluster);
  // a revision-1 serve marked S1 with token(S).
  const std::vector<Hash128> marks = {HashItem("P1", l.seed), HashItem("P", l.seed),
                                      HashItem("Q", l.seed),  HashItem("X", l.seed),
                                      HashItem("S1", l.seed), HashItem(ClusterToken("S"), l.seed)};
  std::string fps;
  AppendServedFingerprints(marks.data(), marks.size(), 3, &fps);
  const std::string ring = ApplyServed("", 100, 3, fps);
  const std::vector<std::string> items = {"P1", "P2", "P", "Q2", "R", "X", "S2"};
  const std::vector<std::string> clusters = {"P", "P", "P", "Q", "R", "X", "S"};
  const std::vector<std::string_view> views(values.begin(), values.end());
  for (int64_t founder_marks_from : {int64_t{0}, int64_t{-1}}) {
    INFO("founder_marks_from " << founder_marks_from);
    l.founder_marks_from = founder_marks_from;
    const bool tokens = founder_marks_from < 0;
    const CheckResult r = TestItems(l, views, starts, items, clusters, ring);
    // P1 served itself, P2 by P, P (the founder) itself, Q2 by Q (its cluster,
    // served); X seen wins; S2 by token(S) only while tokens are read.
    CHECK(r.served == std::vector<bool>{true, true, true, true, false, false, tokens});
    CHECK(r.served_count == 4u + (tokens ? 1u : 0u));
    CHECK(r.seen == std::vector<bool>{false, false, false, false, false, true, false});
    CHECK(r.near_duplicate == std::vector<bool>(7, false));
  }
}

TEST_CASE("TestItems with clusters agrees with per-item tests on many random candidates",
          "[reader]") {
  // Many items (stages bit-sliced) and a mix with and without clusters, written
  // by writers of both revisions: each answer is the rule applied with TestItems
  // on the single probes, with tokens read or not.
  Layout l = TestLayout(3);
  const std::vector<int64_t> starts = {0, 3600};
  std::vector<std::string> values(2);
  std::vector<std::string> items, clusters;
  for (int i = 0; i < 600; ++i) {
    const std::string cluster = "c" + std::to_string(i % 97);
    const std::string item = "i" + std::to_string(i);
    if (i % 10 == 0) ExposeRevision1(l, 0, item, cluster, &values[0]);
    if (i % 10 == 5) Expose(l, 3600, item, cluster, &values[1]);
    if (i % 11 == 0) Expose(l, 0, cluster, cluster, &values[0]);
    items.push_back(item);
    clusters.push_back(i % 3 == 0 ? "" : cluster);
  }
  const std::vector<std::string_view> views(values.begin(), values.end());
  for (int64_t founder_marks_from : {int64_t{0}, int64_t{3600}}) {
    INFO("founder_marks_from " << founder_marks_from);
    l.founder_marks_from = founder_marks_from;
    const bool tokens = l.ReadsClusterTokens(starts.front());
    const CheckResult r = TestItems(l, views, starts, items, clusters, "");
    size_t near = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      auto set = [&](const std::string& probe) {
        for (size_t b = 0; b < values.size(); ++b)
          if (ValueContains(values[b], l.stage_table, l.RuleFor(starts[b]),
                            HashItem(probe, l.seed)))
            return true;
        return false;
      };
      const bool seen = set(items[i]);
      const bool want_near = !seen && !clusters[i].empty() &&
                             ((tokens && set(ClusterToken(clusters[i]))) ||
                              (clusters[i] != items[i] && set(clusters[i])));
      INFO("item " << items[i] << " cluster " << clusters[i]);
      CHECK(r.seen[i] == seen);
      CHECK(r.near_duplicate[i] == want_near);
      near += want_near;
    }
    CHECK(near > 50);  // the data makes near duplicates: the comparison is not vacuous
    CHECK(r.near_duplicate_count == near);
  }
}

}  // namespace ef
