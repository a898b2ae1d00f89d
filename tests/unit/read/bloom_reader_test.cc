// TestItems (read/bloom_reader.h): the one-hash, all-buckets-per-probe test gives
// exactly the per-bucket rule's answer (seen iff some stage of some bucket holds
// all the item's positions; seen_bucket = the newest such bucket), for v1 and v2
// values, missing keys, stages cut short, and more buckets than the fast path's mask.
#include "read/bloom_reader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "bloom/hash.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"

namespace ef {
namespace {

// The rule, bucket by bucket.
CheckResult Reference(const Layout& l, const std::vector<std::string>& values,
                      const std::vector<int64_t>& starts, const std::vector<std::string>& items) {
  CheckResult r;
  for (size_t b = 0; b < values.size(); ++b) {
    r.buckets_present += !values[b].empty();
    r.invalid_keys += !values[b].empty() && l.TableFor(values[b], starts[b]) == nullptr;
  }
  for (const auto& item : items) {
    const Hash128 h = HashItem(item, l.seed);
    int64_t bucket = -1;
    for (size_t b = values.size(); b-- > 0 && bucket < 0;) {
      const std::vector<Stage>* table = l.TableFor(values[b], starts[b]);
      if (!values[b].empty() && table != nullptr &&
          ValueContains(values[b], *table, l.RuleFor(starts[b]), h))
        bucket = starts[b];
    }
    r.seen.push_back(bucket >= 0);
    r.seen_bucket.push_back(bucket);
  }
  return r;
}

// Sets the item's positions in stage s of *value (grown as needed), by the rule of
// the bucket starting at `start` and the value's table (its class's, version 4).
void Put(const Layout& l, int64_t start, size_t s, const std::string& item, std::string* value) {
  const std::vector<Stage>* table = l.TableFor(*value, start);
  REQUIRE(table != nullptr);
  const Stage& st = (*table)[std::min(s, table->size() - 1)];
  const size_t need = (st.offset + st.m + 7) / 8;
  if (value->size() < need) value->resize(need, '\0');
  std::vector<uint32_t> pos(st.k);
  ComputeStagePositions(HashItem(item, l.seed), st, l.RuleFor(start), pos.data());
  for (uint32_t p : pos) (*value)[p / 8] = static_cast<char>((*value)[p / 8] | (0x80 >> (p % 8)));
}

}  // namespace

TEST_CASE(
    "TestItems equals the per-bucket rule (v1, v2, v3, a v3 rollover, missing keys, many buckets)",
    "[reader]") {
  std::mt19937_64 rng(42);
  for (uint32_t stages : {1u, 4u}) {
    for (size_t buckets : {1u, 31u, 32u, 33u, 64u, 65u, 200u}) {
      // 0: rule 2 everywhere (v1/v2); 1: rule 9 everywhere (v3 from 0); 2: a
      // rollover, v3_from at the middle bucket.
      for (int rules : {0, 1, 2})
        for (size_t n_items : {3u, 400u}) {  // few items: stages are probed bucket by bucket
          FilterConfig f;
          f.items_per_bucket = 20;
          f.stages = stages;
          f.window_seconds = 86400 * 7;
          f.layout_version = rules == 0 ? 2 : 3;
          auto l = LayoutFromConfig(f);
          REQUIRE(l.ok());
          if (rules == 2) l->v3_from = 1000 + static_cast<int64_t>(buckets / 2) * 3600;
          std::vector<std::string> values(buckets);
          std::vector<int64_t> starts(buckets);
          std::vector<std::string> items;
          for (size_t i = 0; i < 400; ++i) items.push_back("item-" + std::to_string(i));
          for (size_t b = 0; b < buckets; ++b) {
            starts[b] = 1000 + static_cast<int64_t>(b) * 3600;
            if (b + 1 < buckets && rng() % 4 == 0) continue;  // a missing key (never all)
            for (int n = 0; n < 30; ++n) {
              const size_t s = stages > 1 ? rng() % stages : 0;
              Put(*l, starts[b], s, items[rng() % items.size()], &values[b]);
            }
            // Random noise, and sometimes a value cut inside a later stage.
            for (int n = 0; n < 20 && !values[b].empty(); ++n)
              values[b][rng() % values[b].size()] |= static_cast<char>(1 << (rng() % 8));
            if (stages > 1 && rng() % 3 == 0) values[b].resize(values[b].size() * 2 / 3);
          }
          // Few items: those written in the most buckets (some must be seen).
          if (n_items < items.size()) {
            std::vector<std::pair<size_t, std::string>> hits;
            for (const auto& item : items) {
              size_t n = 0;
              for (size_t b = 0; b < buckets; ++b)
                n += !values[b].empty() &&
                     ValueContains(values[b], l->stage_table, l->RuleFor(starts[b]),
                                   HashItem(item, l->seed));
              hits.emplace_back(n, item);
            }
            std::sort(hits.rbegin(), hits.rend());
            items.clear();
            for (size_t i = 0; i < n_items; ++i) items.push_back(hits[i].second);
            items.push_back("never-written");
          }
          INFO("stages " << stages << ", buckets " << buckets << ", rules " << rules << ", items "
                         << items.size());
          const CheckResult got = TestItems(*l, values, starts, items);
          const CheckResult want = Reference(*l, values, starts, items);
          CHECK(got.seen == want.seen);
          CHECK(got.seen_bucket == want.seen_bucket);
          CHECK(got.buckets_present == want.buckets_present);
          size_t seen = 0;
          for (bool s : got.seen) seen += s;
          CHECK(seen > 0);  // the data puts items in: the comparison is not vacuous
          CHECK(got.seen_count == seen);
        }
    }
  }
}

TEST_CASE("TestItems equals the per-bucket rule with version-4 keys of several classes",
          "[reader][v4]") {
  std::mt19937_64 rng(7);
  // classes: how many distinct classes the version-4 keys take (more than the
  // masked path's table groups: bucket by bucket); invalid: some headers name no class.
  for (size_t classes : {1u, 3u, 12u})
    for (bool invalid : {false, true})
      for (size_t buckets : {8u, 32u, 64u, 65u})
        for (size_t n_items : {3u, 400u}) {
          FilterConfig f;
          f.items_per_bucket = 20;
          f.stages = 4;
          f.window_seconds = 86400 * 7;
          f.layout_version = 3;
          auto l = LayoutFromConfig(f);
          REQUIRE(l.ok());
          l->v4 = true;  // keys from the middle bucket on have a class
          l->v4_from = 1000 + static_cast<int64_t>(buckets / 2) * 3600;
          REQUIRE(l->Finish().ok());
          REQUIRE(l->class_tables.size() > 12);
          std::vector<std::string> values(buckets);
          std::vector<int64_t> starts(buckets);
          std::vector<std::string> items;
          for (size_t i = 0; i < 400; ++i) items.push_back("item-" + std::to_string(i));
          size_t bad = 0;
          for (size_t b = 0; b < buckets; ++b) {
            starts[b] = 1000 + static_cast<int64_t>(b) * 3600;
            if (b + 1 < buckets && rng() % 5 == 0) continue;  // a missing key (never all)
            if (l->HasClass(starts[b])) {
              const auto c = static_cast<uint32_t>(rng() % classes);
              values[b].assign(SizeClassBytes(c) - 16, '\0');
              values[b][0] = static_cast<char>(c + 1);
            }
            for (int n = 0; n < 30; ++n)
              Put(*l, starts[b], rng() % 4, items[rng() % items.size()], &values[b]);
            for (int n = 0; n < 20; ++n)  // noise, not in the header
              values[b][1 + rng() % (values[b].size() - 1)] |= static_cast<char>(1 << (rng() % 8));
            if (rng() % 3 == 0) values[b].resize(std::max<size_t>(2, values[b].size() * 2 / 3));
            if (invalid && l->HasClass(starts[b]) && rng() % 4 == 0) {
              values[b][0] = static_cast<char>(rng() % 2 ? 0 : l->class_tables.size() + 1);
              ++bad;
            }
          }
          if (n_items < items.size()) {
            items.resize(n_items);
            items.push_back("never-written");
          }
          INFO("classes " << classes << ", invalid " << invalid << ", buckets " << buckets
                          << ", items " << items.size());
          const CheckResult got = TestItems(*l, values, starts, items);
          const CheckResult want = Reference(*l, values, starts, items);
          CHECK(got.seen == want.seen);
          CHECK(got.seen_bucket == want.seen_bucket);
          CHECK(got.buckets_present == want.buckets_present);
          CHECK(got.invalid_keys == want.invalid_keys);
          CHECK(got.invalid_keys == bad);
          if (n_items == 400) CHECK(got.seen_count > 0);
        }
}

}  // namespace ef
