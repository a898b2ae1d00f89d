#include "read/bloom_reader.h"

#include <algorithm>
#include <array>
#include <bit>

#include "bloom/bit_slice.h"
#include "bloom/cluster_token.h"
#include "bloom/fast_mod.h"
#include "bloom/hash.h"
#include "bloom/hash_batch.h"
#include "bloom/keys.h"
#include "bloom/probe_rounds.h"
#include "bloom/served.h"
#include "bloom/stages.h"
#include "redis/cluster.h"

namespace ef {

namespace {

// The result of n items before any test: none seen, no bucket.
CheckResult NoneSeen(size_t n) {
  CheckResult r;
  r.seen.assign(n, false);
  r.seen_bucket.assign(n, -1);
  return r;
}

// One bucket at a time (newest first), every stage of each: for more buckets
// than fit the bucket mask of TestItems.
CheckResult TestItemsPerBucket(const Layout& layout,
                               const std::vector<std::string_view>& bucket_values,
                               const std::vector<int64_t>& bucket_starts, ItemList items,
                               const ServedSet* served) {
  CheckResult r = NoneSeen(items.size());
  if (served) r.served.assign(items.size(), false);
  // Each value's stage table (rule 11: a version-4 key's class), nullptr for a
  // value that names no class (not tested: invalid_keys).
  std::vector<const std::vector<Stage>*> tables(bucket_values.size());
  for (size_t b = 0; b < bucket_values.size(); ++b) {
    if (bucket_values[b].empty()) continue;
    ++r.buckets_present;
    tables[b] = layout.TableFor(bucket_values[b], bucket_starts[b]);
    r.invalid_keys += tables[b] == nullptr ? 1 : 0;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const Hash128 h = HashItem(items[i], layout.seed);
    if (served && served->Contains(h)) {
      r.served[i] = true;
      ++r.served_count;
    }
    for (size_t b = bucket_values.size(); b-- > 0;) {  // newest first
      const std::string_view v = bucket_values[b];
      if (v.empty() || tables[b] == nullptr) continue;
      if (ValueContains(v, *tables[b], layout.RuleFor(bucket_starts[b]), h)) {
        r.seen[i] = true;
        ++r.seen_count;
        r.seen_bucket[i] = bucket_starts[b];
        break;
      }
    }
    if (r.seen[i] && served && r.served[i]) {  // seen wins: served means "not seen, but served"
      r.served[i] = false;
      --r.served_count;
    }
  }
  return r;
}

}  // namespace

namespace {

// A stage is bit-sliced (bloom/bit_slice.h) when its bytes are at most this
// many per item: slicing costs a fraction of a step per byte and bucket, probing
// bucket by bucket about two steps per item and bucket (an unseen item leaves
// half of the buckets still in the running at each probe). Measured with
// ef_microbench BM_TestItems_* (docs/PERFORMANCE.md "Read side").
constexpr size_t kSliceBytesPerItem = 8;

// The newest bucket of a mask of buckets (not 0).
template <typename W>
inline int8_t Newest(W alive) {
  return static_cast<int8_t>(8 * sizeof(W) - 1 - std::countl_zero(alive));
}

// The buckets whose values follow one stage table (rule 8's, or under version
// 4 one class's: rule 11): has[s] = those that hold stage s (StagesPresent).
// (Not zeroed until MaskBuckets starts a group: a read zeroes only the groups it
// uses.)
template <typename W>
struct TableGroup {
  const std::vector<Stage>* table;
  std::array<W, StageStats::kTrackedStages> has;
  size_t stages_used;  // stages held by some bucket of the group
};

// TestItemsMasked takes up to this many distinct stage tables in one read (the
// meta's, and the classes of a user's version-4 keys, which mostly repeat from
// day to day); a read with more goes bucket by bucket (TestItemsPerBucket).
constexpr size_t kMaxTableGroups = 8;

// What TestItemsMasked knows of its buckets (up to 8 * sizeof(W)) before any item.
template <typename W>
struct BucketMasks {
  static constexpr int kWidth = 8 * sizeof(W);
  std::array<TableGroup<W>, kMaxTableGroups> groups;  // [0, group_count) in use
  size_t group_count = 0;
  bool too_many_tables = false;  // more than kMaxTableGroups: not usable
  // remix: the buckets that follow rule 9 (version 3, from v3_from on), the others rule 2.
  W remix = 0;
  size_t present = 0;  // buckets with a value
  size_t invalid = 0;  // ... of which name no class (rule 11): in no group
  std::array<const char*, kWidth> data{};
  std::array<size_t, kWidth> len{};
};

template <typename W>
BucketMasks<W> MaskBuckets(const Layout& layout, const std::vector<std::string_view>& bucket_values,
                           const std::vector<int64_t>& bucket_starts) {
  BucketMasks<W> m;
  for (size_t b = 0; b < bucket_values.size(); ++b) {
    const std::string_view v = bucket_values[b];
    m.data[b] = v.data();
    m.len[b] = v.size();
    if (layout.RuleFor(bucket_starts[b]) == PositionRule::kRemix) m.remix |= W{1} << b;
    if (v.empty()) continue;
    ++m.present;
    const std::vector<Stage>* table = layout.TableFor(v, bucket_starts[b]);
    if (table == nullptr) {
      ++m.invalid;
      continue;
    }
    size_t g = 0;
    while (g < m.group_count && m.groups[g].table != table) ++g;
    if (g == kMaxTableGroups) {
      m.too_many_tables = true;
      return m;
    }
    if (g == m.group_count) m.groups[m.group_count++] = TableGroup<W>{table, {}, 0};
    TableGroup<W>& group = m.groups[g];
    const size_t present = std::min(StagesPresent(*table, v.size()), group.has.size());
    for (size_t s = 0; s < present; ++s) group.has[s] |= W{1} << b;
    group.stages_used = std::max(group.stages_used, present);
  }
  return m;
}

// Where each group's stages' slices start in *scratch (SIZE_MAX: too large to
// slice for this many items), the stages sliced into it (grown as needed, never
// shrunk).
using SliceOffsets = std::array<std::array<size_t, StageStats::kTrackedStages>, kMaxTableGroups>;

template <typename W>
SliceOffsets SliceStages(const std::vector<std::string_view>& bucket_values,
                         const BucketMasks<W>& m, size_t items, std::vector<W>* scratch,
                         BitSlicer* slicer) {
  SliceOffsets slice_at;  // only the entries of the groups' stages are read
  size_t words = 0;
  for (size_t g = 0; g < m.group_count; ++g) {
    const std::vector<Stage>& stages = *m.groups[g].table;
    for (size_t s = 0; s < m.groups[g].stages_used; ++s) {
      const size_t bytes = (stages[s].m + 7) / 8;
      slice_at[g][s] = bytes <= kSliceBytesPerItem * items ? words : SIZE_MAX;
      if (slice_at[g][s] != SIZE_MAX) words += BitSlicer::Words(bytes);
    }
  }
  if (scratch->size() < words) scratch->resize(words);
  for (size_t g = 0; g < m.group_count; ++g) {
    const std::vector<Stage>& stages = *m.groups[g].table;
    for (size_t s = 0; s < m.groups[g].stages_used; ++s) {
      if (slice_at[g][s] == SIZE_MAX) continue;
      slicer->template SliceRange<W>(bucket_values.data(), m.groups[g].has[s], stages[s].offset / 8,
                                     (stages[s].m + 7) / 8, scratch->data() + slice_at[g][s]);
    }
  }
  return slice_at;
}

// A stage too large to slice: item by item, the bit in each bucket of has_rule
// still in the running (newer than best[i]); best[i] becomes the newest bucket
// holding every position.
template <typename W>
void ProbeUnsliced(const Stage& st, PositionRule rule, const FastMod& mod, W has_rule,
                   const BucketMasks<W>& m, const std::vector<Hash128>& hashes,
                   std::vector<int8_t>& best) {
  for (size_t i = 0; i < hashes.size(); ++i) {
    W alive = has_rule & ProbeRounds::NewerThan<W>(best[i]);
    uint64_t x = hashes[i].h1;
    for (uint32_t p = 0; p < st.k && alive != 0; ++p, x += hashes[i].h2) {
      const uint64_t pos =
          st.offset + (rule == PositionRule::kRemix ? ReduceV3(RemixV3(x), st.m) : mod.Mod(x));
      // Branch-free per bucket (the bits are random: a branch would mispredict
      // about every other time). Bits past a value's end are 0; the value is
      // not empty, so its byte 0 is a safe stand-in to read.
      const size_t byte = pos >> 3;
      const unsigned shift = 7 - (pos & 7);
      W keep = 0;
      for (W a = alive; a != 0; a &= a - 1) {
        const int b = std::countr_zero(a);
        const bool inside = byte < m.len[b];
        const auto c = static_cast<unsigned char>(m.data[b][inside ? byte : 0]);
        keep |= static_cast<W>(((c >> shift) & 1u) & static_cast<unsigned>(inside)) << b;
      }
      alive &= keep;
    }
    if (alive != 0) best[i] = Newest(alive);
  }
}

// The result from best[] (the newest bucket each item was found in, -1: none),
// and the served ring for the items not seen.
inline void TakeBest(const std::vector<int8_t>& best, const std::vector<int64_t>& bucket_starts,
                     const std::vector<Hash128>& hashes, const ServedSet* served, CheckResult* r) {
  for (size_t i = 0; i < best.size(); ++i) {
    if (best[i] < 0) continue;
    r->seen[i] = true;
    ++r->seen_count;
    r->seen_bucket[i] = bucket_starts[best[i]];
  }
  if (!served) return;
  r->served.assign(best.size(), false);
  for (size_t i = 0; i < best.size(); ++i) {
    if (best[i] >= 0 || !served->Contains(hashes[i])) continue;
    r->served[i] = true;
    ++r->served_count;
  }
}

// TestItems for up to 8 * sizeof(W) buckets. Each item is hashed once, and each
// of its positions computed once for all the buckets of a stage table: a
// position is the same in every bucket of the table (same m, k and offset per
// stage; version-4 keys of one class share their class's table), so one probe
// tests the bit in every such bucket still in the running (a mask of buckets),
// and the item is out of a bucket at its first 0 bit. A probe reads one word
// of the bit-sliced stage (BitSlicer), or, for a stage too large to slice for
// few items, the bit in each bucket still in the running.
//
// A sliced stage is probed in rounds: round p probes position p of every item
// still in the running in that stage (a work list, compacted as items drop out),
// so a round's loads are independent of each other and no branch waits on one.
// Item by item, an unseen item's exit from the stage (after 4 to 8 probes, at
// random) was a mispredicted branch that waited for its load. Measured
// (docs/PERFORMANCE.md "Read side"): ef_microbench BM_TestItems -12% light, -26%
// heavy and top; `serve` -14% CPU per request, the library -20% per candidate.
// The rounds themselves are ProbeRounds (bloom/probe_rounds.h): eight items per
// step with AVX-512 where the CPU has it (2026-11-25: BM_TestItems -14/-22/-25%,
// the library -8% CPU per candidate; `serve` within its noise, 0-2%).
template <typename W>
CheckResult TestItemsMasked(const Layout& layout,
                            const std::vector<std::string_view>& bucket_values,
                            const std::vector<int64_t>& bucket_starts, ItemList items,
                            const ServedSet* served) {
  const BucketMasks<W> m = MaskBuckets<W>(layout, bucket_values, bucket_starts);
  if (m.too_many_tables)
    return TestItemsPerBucket(layout, bucket_values, bucket_starts, items, served);
  CheckResult r = NoneSeen(items.size());
  r.buckets_present = m.present;
  r.invalid_keys = m.invalid;
  if (r.buckets_present == 0 && !served) return r;

  // The stages to slice, into one scratch area per thread.
  thread_local std::vector<W> scratch;
  thread_local BitSlicer slicer;
  const SliceOffsets slice_at = SliceStages<W>(bucket_values, m, items.size(), &scratch, &slicer);

  // Every item hashed once, up front, eight at a time (bloom/hash_batch.h).
  thread_local std::vector<Hash128> hashes;
  hashes.resize(items.size());
  DefaultItemHasher().HashAll(
      items.size(), [&](size_t i) { return items[i]; }, layout.seed, hashes.data());
  // best[i]: the newest bucket item i was found in so far (-1: none). Only a
  // newer bucket can change the answer, so a stage tests those alone.
  thread_local std::vector<int8_t> best;
  best.assign(items.size(), -1);

  // The work list of a sliced stage (bloom/probe_rounds.h): the items with a
  // bucket still in the running, in item order.
  thread_local ProbeList<W> list;
  list.Resize(items.size());
  static const ProbeRounds rounds;

  // Each stage of each table once per position rule its buckets follow (one
  // table and one rule for all but during a rollover, or with version-4 keys of
  // several classes). The passes may run in either order: each tests only
  // buckets newer than the item's best so far, so best ends as the newest.
  for (size_t g = 0; g < m.group_count; ++g) {
    const TableGroup<W>& group = m.groups[g];
    for (size_t pass = 0; pass < 2 * group.stages_used; ++pass) {
      const size_t s = pass / 2;
      const PositionRule rule = pass % 2 ? PositionRule::kRemix : PositionRule::kModulo;
      const W has_rule =
          group.has[s] & (rule == PositionRule::kRemix ? m.remix : static_cast<W>(~m.remix));
      if (has_rule == 0) continue;
      const Stage& st = (*group.table)[s];
      const FastMod mod(st.m);  // x % m without a division (exact)
      if (slice_at[g][s] == SIZE_MAX) {
        ProbeUnsliced<W>(st, rule, mod, has_rule, m, hashes, best);
        continue;
      }
      size_t n = rounds.Fill(hashes.data(), best.data(), items.size(), has_rule, &list);
      n = rounds.Run(scratch.data() + slice_at[g][s], mod, rule, st.k, n, &list);
      for (size_t j = 0; j < n; ++j) best[list.item[j]] = Newest(list.alive[j]);
    }
  }
  TakeBest(best, bucket_starts, hashes, served, &r);
  return r;
}

}  // namespace

// The result is the per-bucket rule's: seen iff all k_s positions of some stage
// s are set in some bucket; seen_bucket is the newest such bucket.
CheckResult TestItems(const Layout& layout, const std::vector<std::string_view>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items,
                      std::string_view served_value) {
  const size_t nb = bucket_values.size();
  // The ring, if the user has one (most reads: none, and no cost but a check).
  thread_local ServedSet ring;
  const ServedSet* served = !served_value.empty() && ring.Parse(served_value) ? &ring : nullptr;
  if (nb <= 32)
    return TestItemsMasked<uint32_t>(layout, bucket_values, bucket_starts, items, served);
  if (nb <= 64)
    return TestItemsMasked<uint64_t>(layout, bucket_values, bucket_starts, items, served);
  return TestItemsPerBucket(layout, bucket_values, bucket_starts, items, served);
}

CheckResult TestItems(const Layout& layout, const std::vector<std::string>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items,
                      std::string_view served_value) {
  const std::vector<std::string_view> views(bucket_values.begin(), bucket_values.end());
  return TestItems(layout, views, bucket_starts, items, served_value);
}

CheckResult TestItems(const Layout& layout, const std::vector<std::string_view>& bucket_values,
                      const std::vector<int64_t>& bucket_starts, ItemList items, ItemList clusters,
                      std::string_view served_value) {
  const size_t n = items.size();
  // Revision-1 tokens are tested only while a bucket read may hold them.
  const bool tokens_read =
      layout.ReadsClusterTokens(bucket_starts.empty() ? 0 : bucket_starts.front());
  // count[i]: item J's extra probes, for its cluster C: token(C) while tokens are
  // read, and C when C != J. Most items are their own cluster: one comparison.
  thread_local std::vector<uint8_t> count_storage;
  count_storage.assign(n, 0);
  uint8_t* const count = count_storage.data();
  size_t token_bytes = 0;
  size_t extras = 0;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const std::string_view c = clusters[i];
    if (c.empty()) continue;
    const uint8_t extra = static_cast<uint8_t>((tokens_read ? 1 : 0) + (c == items[i] ? 0 : 1));
    count[i] = extra;
    extras += extra;
    if (tokens_read) token_bytes += c.size() + 1;
  }
  if (extras == 0) {
    CheckResult r = TestItems(layout, bucket_values, bucket_starts, items, served_value);
    r.near_duplicate.assign(n, false);
    return r;
  }
  // The probes: the items, then the extra probes in item order.
  thread_local std::string tokens;
  thread_local std::vector<std::string_view> probes;
  tokens.clear();
  tokens.reserve(token_bytes);  // no reallocation below: the views stay valid
  probes.clear();
  probes.reserve(n + extras);
  for (size_t i = 0; i < n; ++i) probes.push_back(items[i]);
  for (size_t i = 0; i < n; ++i) {
    if (count[i] == 0) continue;
    const std::string_view c = clusters[i];
    if (tokens_read) {
      const size_t at = tokens.size();
      AppendClusterToken(c, &tokens);
      probes.emplace_back(tokens.data() + at, c.size() + 1);
    }
    if (count[i] > (tokens_read ? 1 : 0)) probes.push_back(c);
  }
  // One pass for all, then each item's extra probes folded into its answer, in
  // place: seen, else near_duplicate (an extra probe seen), else served (the
  // ring holds it or an extra probe).
  CheckResult r = TestItems(layout, bucket_values, bucket_starts,
                            std::span<const std::string_view>(probes), served_value);
  const bool ring = !r.served.empty();
  r.near_duplicate.assign(n, false);
  r.seen_count = 0;
  r.served_count = 0;
  size_t next = n;  // item i's extra probes: [next, next + count[i])
  for (size_t i = 0; i < n; ++i) {
    const size_t end = next + count[i];
    if (r.seen[i]) {
      ++r.seen_count;
      next = end;
      continue;
    }
    bool near = false;
    bool served = ring && r.served[i];
    for (; next < end; ++next) {
      near = near || r.seen[next];
      served = served || (ring && r.served[next]);
    }
    if (near) {
      r.near_duplicate[i] = true;
      ++r.near_duplicate_count;
      served = false;
    }
    if (ring) r.served[i] = served;
    r.served_count += served ? 1 : 0;
  }
  r.seen.resize(n);
  r.seen_bucket.resize(n);
  if (ring) r.served.resize(n);
  return r;
}

StatusOr<ReadPlan> PlanRead(const Layout& layout, std::string_view user, int64_t now_seconds) {
  Status st = CheckUserId(user);
  if (!st.ok()) return st;
  ReadPlan plan;
  plan.bucket_starts = ReadBuckets(now_seconds, layout.window_seconds, layout.bucket_seconds);
  plan.keys.reserve(plan.bucket_starts.size());
  for (int64_t s : plan.bucket_starts) {
    plan.keys.push_back(MakeKey(layout.prefix, user, s, layout.bucket_seconds));
  }
  plan.served_key = ServedKey(layout.prefix, user);
  return plan;
}

StatusOr<CheckResult> BloomReader::Check(std::string_view user,
                                         const std::vector<std::string>& items,
                                         int64_t now_seconds) {
  StatusOr<ReadPlan> plan = PlanRead(layout_, user, now_seconds);
  if (!plan.ok()) return plan.status();
  std::vector<std::string> args = {"MGET"};
  args.insert(args.end(), plan->keys.begin(), plan->keys.end());
  args.push_back(plan->served_key);
  const std::string where = router_ ? "redis cluster" : "redis " + conn_->address();
  auto reply =
      router_ ? router_->Command(plan->keys.front(), std::move(args)) : conn_->Command(args);
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) return Unavailable(where + ": MGET: " + reply->str);
  if (reply->type != RedisReply::Type::kArray || reply->elements.size() != plan->keys.size() + 1)
    return Internal(where + ": MGET: unexpected reply");
  std::vector<std::string> values;
  values.reserve(plan->keys.size());
  for (size_t i = 0; i < plan->keys.size(); ++i)
    values.push_back(std::move(reply->elements[i].str));
  return TestItems(layout_, values, plan->bucket_starts, items, reply->elements.back().str);
}

}  // namespace ef
