#include "redis/bloom_reader.h"

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/stages.h"

namespace ef {

CheckResult TestItems(const Layout& layout, const std::vector<std::string>& bucket_values,
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
