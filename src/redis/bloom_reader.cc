#include "redis/bloom_reader.h"

#include <algorithm>
#include <array>
#include <bit>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/stages.h"

namespace ef {

namespace {

// One bucket at a time (newest first), every stage of each: for more buckets
// than fit the bucket mask of TestItems.
CheckResult TestItemsPerBucket(const Layout& layout, const std::vector<std::string>& bucket_values,
                               const std::vector<int64_t>& bucket_starts,
                               const std::vector<std::string>& items) {
  CheckResult r;
  r.seen.assign(items.size(), false);
  r.seen_bucket.assign(items.size(), -1);
  for (const auto& v : bucket_values) r.buckets_present += v.empty() ? 0 : 1;
  for (size_t i = 0; i < items.size(); ++i) {
    const Hash128 h = HashItem(items[i], layout.seed);
    for (size_t b = bucket_values.size(); b-- > 0;) {  // newest first
      const std::string& v = bucket_values[b];
      if (v.empty()) continue;
      if (ValueContains(v, layout.stage_table, h)) {
        r.seen[i] = true;
        r.seen_bucket[i] = bucket_starts[b];
        break;
      }
    }
  }
  return r;
}

}  // namespace

// Each item is hashed once, and each of its positions computed once for all the
// buckets: a position is the same in every bucket (same m, k and offset per
// stage), so one probe tests the bit in every bucket still in the running (a mask
// of up to 64 buckets) and the item is out of a bucket at its first 0 bit. The
// result is the per-bucket rule's: seen iff all k_s positions of some stage s are
// set in some bucket; seen_bucket is the newest such bucket.
CheckResult TestItems(const Layout& layout, const std::vector<std::string>& bucket_values,
                      const std::vector<int64_t>& bucket_starts,
                      const std::vector<std::string>& items) {
  constexpr size_t kMaxMask = 64;
  const size_t nb = bucket_values.size();
  if (nb > kMaxMask) return TestItemsPerBucket(layout, bucket_values, bucket_starts, items);
  CheckResult r;
  r.seen.assign(items.size(), false);
  r.seen_bucket.assign(items.size(), -1);
  const std::vector<Stage>& stages = layout.stage_table;
  // has[s]: the buckets whose value holds stage s (StagesPresent).
  std::array<uint64_t, StageStats::kTrackedStages> has{};
  size_t stages_used = 0;
  std::array<const char*, kMaxMask> data{};
  std::array<size_t, kMaxMask> len{};
  for (size_t b = 0; b < nb; ++b) {
    const std::string& v = bucket_values[b];
    data[b] = v.data();
    len[b] = v.size();
    if (v.empty()) continue;
    ++r.buckets_present;
    const size_t present = std::min(StagesPresent(stages, v.size()), has.size());
    for (size_t s = 0; s < present; ++s) has[s] |= uint64_t{1} << b;
    stages_used = std::max(stages_used, present);
  }
  if (r.buckets_present == 0) return r;
  for (size_t i = 0; i < items.size(); ++i) {
    const Hash128 h = HashItem(items[i], layout.seed);
    int best = -1;  // newest bucket found so far
    for (size_t s = 0; s < stages_used; ++s) {
      uint64_t alive = has[s];
      // Only a newer bucket can change the answer.
      if (best >= 0) alive &= best == 63 ? 0 : ~((uint64_t{2} << best) - 1);
      const Stage& st = stages[s];
      uint64_t x = h.h1;
      for (uint32_t p = 0; p < st.k && alive != 0; ++p, x += h.h2) {
        const uint32_t pos = static_cast<uint32_t>(st.offset + x % st.m);
        // Branch-free per bucket (the bits are random: a branch would mispredict
        // about every other time). Bits past a value's end are 0; the value is
        // not empty, so its byte 0 is a safe stand-in to read.
        const size_t byte = pos >> 3;
        const unsigned shift = 7 - (pos & 7);
        uint64_t keep = 0;
        for (uint64_t a = alive; a != 0; a &= a - 1) {
          const int b = std::countr_zero(a);
          const bool inside = byte < len[b];
          const auto c = static_cast<unsigned char>(data[b][inside ? byte : 0]);
          keep |= static_cast<uint64_t>(((c >> shift) & 1u) & static_cast<unsigned>(inside)) << b;
        }
        alive &= keep;
      }
      if (alive != 0) best = 63 - std::countl_zero(alive);
    }
    if (best >= 0) {
      r.seen[i] = true;
      r.seen_bucket[i] = bucket_starts[best];
    }
  }
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
  return plan;
}

StatusOr<CheckResult> BloomReader::Check(std::string_view user,
                                         const std::vector<std::string>& items,
                                         int64_t now_seconds) {
  StatusOr<ReadPlan> plan = PlanRead(layout_, user, now_seconds);
  if (!plan.ok()) return plan.status();
  std::vector<std::string> args = {"MGET"};
  args.insert(args.end(), plan->keys.begin(), plan->keys.end());
  auto reply = conn_.Command(args);
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError)
    return Unavailable("redis " + conn_.address() + ": MGET: " + reply->str);
  if (reply->type != RedisReply::Type::kArray || reply->elements.size() != plan->keys.size())
    return Internal("redis " + conn_.address() + ": MGET: unexpected reply");
  std::vector<std::string> values;
  values.reserve(plan->keys.size());
  for (auto& e : reply->elements) values.push_back(std::move(e.str));
  return TestItems(layout_, values, plan->bucket_starts, items);
}

}  // namespace ef
