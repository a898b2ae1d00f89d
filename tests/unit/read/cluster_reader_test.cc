// TestItems with clusters (read/bloom_reader.h; docs/CONTENT.md rule 5): the
// reader's decision seen / near_duplicate / served / unseen, on bucket values
// written by the writers' rule (bloom/cluster_token.h: item I, and token(C) when
// C != I) with the layout's own position primitives.
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

// An exposure of `item` of cluster `cluster` by the writers' rule.
void Expose(const Layout& l, int64_t start, std::string_view item, std::string_view cluster,
            std::string* value) {
  Put(l, start, item, value);
  if (WritesClusterToken(item, cluster)) Put(l, start, ClusterToken(cluster), value);
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
    // The user saw A2 of cluster A (A is its first item: A2's exposure set token(A)),
    // and B, the first item of cluster B (its own cluster: no token), in another bucket.
    Expose(l, 0, "A2", "A", &values[0]);
    Expose(l, 3600, "B", "B", &values[1]);
    const std::vector<std::string> items = {"A2", "A3", "A", "B2", "B", "C1", "C2", "D"};
    const std::vector<std::string> clusters = {"A", "A", "A", "B", "B", "C", "", "D"};
    const CheckResult r = TestItems(l, std::vector<std::string_view>(values.begin(), values.end()),
                                    starts, items, clusters, "");
    // A2 seen; A3 (token(A) set) and A (its own cluster, token(A) set) near; B2
    // near by B itself (C != J and C set); B seen; C1, C2, D unseen.
    CHECK(r.seen == std::vector<bool>{true, false, false, false, true, false, false, false});
    CHECK(r.near_duplicate ==
          std::vector<bool>{false, true, true, true, false, false, false, false});
    CHECK(r.seen_count == 2);
    CHECK(r.near_duplicate_count == 3);
    CHECK(r.seen_bucket[0] == 0);
    CHECK(r.seen_bucket[4] == 3600);
    CHECK(r.seen_bucket[1] == -1);
    CHECK(r.buckets_present == 2);
    CHECK(r.served.empty());  // no ring

    // Without clusters: exactly TestItems (the near duplicates are unseen).
    const CheckResult plain = TestItems(l, values, starts, items);
    const CheckResult none = TestItems(
        l, std::vector<std::string_view>(values.begin(), values.end()), starts, items, {}, "");
    CHECK(none.seen == plain.seen);
    CHECK(none.seen_count == 2);
    CHECK(none.near_duplicate == std::vector<bool>(items.size(), false));
    CHECK(none.near_duplicate_count == 0);
    // A cluster that is no item's: an item seen only as a token does not make it seen.
    const std::vector<std::string> tokens_only = {ClusterToken("A")};
    CHECK(TestItems(l, values, starts, tokens_only).seen == std::vector<bool>{true});
    CHECK(TestItems(l, values, starts, std::vector<std::string>{"A"}).seen ==
          std::vector<bool>{false});
  }
}

TEST_CASE("TestItems with clusters: the served ring holds items and cluster tokens", "[reader]") {
  const Layout l = TestLayout(3);
  const std::vector<int64_t> starts = {0};
  std::vector<std::string> values(1);
  Expose(l, 0, "X", "X", &values[0]);  // the user saw X
  // A page served P1 (cluster P, P1 != P: token(P) marked too) and Q (its own cluster).
  const std::vector<Hash128> marks = {HashItem("P1", l.seed), HashItem(ClusterToken("P"), l.seed),
                                      HashItem("Q", l.seed), HashItem("X", l.seed)};
  std::string fps;
  AppendServedFingerprints(marks.data(), marks.size(), 3, &fps);
  const std::string ring = ApplyServed("", 100, 3, fps);
  const std::vector<std::string> items = {"P1", "P2", "Q2", "R", "X"};
  const std::vector<std::string> clusters = {"P", "P", "Q", "R", "X"};
  const CheckResult r = TestItems(l, std::vector<std::string_view>(values.begin(), values.end()),
                                  starts, items, clusters, ring);
  // P1 served itself, P2 by token(P), Q2 by Q (its cluster, served); X seen wins.
  CHECK(r.served == std::vector<bool>{true, true, true, false, false});
  CHECK(r.served_count == 3);
  CHECK(r.seen == std::vector<bool>{false, false, false, false, true});
  CHECK(r.near_duplicate == std::vector<bool>(5, false));
}

TEST_CASE("TestItems with clusters agrees with per-item tests on many random candidates",
          "[reader]") {
  // Many items (stages bit-sliced) and a mix with and without clusters: each
  // answer is the rule applied with TestItems on the single probes.
  const Layout l = TestLayout(3);
  const std::vector<int64_t> starts = {0, 3600};
  std::vector<std::string> values(2);
  std::vector<std::string> items, clusters;
  for (int i = 0; i < 600; ++i) {
    const std::string cluster = "c" + std::to_string(i % 97);
    const std::string item = "i" + std::to_string(i);
    if (i % 5 == 0) Expose(l, (i % 2) * 3600, item, cluster, &values[i % 2]);
    if (i % 11 == 0) Expose(l, 0, cluster, cluster, &values[0]);
    items.push_back(item);
    clusters.push_back(i % 3 == 0 ? "" : cluster);
  }
  const std::vector<std::string_view> views(values.begin(), values.end());
  const CheckResult r = TestItems(l, views, starts, items, clusters, "");
  size_t near = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    auto set = [&](const std::string& probe) {
      for (size_t b = 0; b < values.size(); ++b)
        if (ValueContains(values[b], l.stage_table, l.RuleFor(starts[b]), HashItem(probe, l.seed)))
          return true;
      return false;
    };
    const bool seen = set(items[i]);
    const bool want_near =
        !seen && !clusters[i].empty() &&
        (set(ClusterToken(clusters[i])) || (clusters[i] != items[i] && set(clusters[i])));
    INFO("item " << items[i] << " cluster " << clusters[i]);
    CHECK(r.seen[i] == seen);
    CHECK(r.near_duplicate[i] == want_near);
    near += want_near;
  }
  CHECK(near > 50);  // the data makes near duplicates: the comparison is not vacuous
  CHECK(r.near_duplicate_count == near);
}

}  // namespace ef
