#include "bloom/layout.h"

#include "bloom/sizing.h"

namespace ef {

std::map<std::string, std::string> Layout::ToFields() const {
  return {{"version", std::to_string(kVersion)},
          {"m", std::to_string(m)},
          {"k", std::to_string(k)},
          {"seed", std::to_string(seed)},
          {"prefix", prefix},
          {"bucket_seconds", std::to_string(bucket_seconds)},
          {"window_seconds", std::to_string(window_seconds)}};
}

StatusOr<Layout> LayoutFromConfig(const FilterConfig& filter) {
  auto sizing = ComputeSizing(filter.items_per_bucket, filter.fpr, filter.window_seconds,
                              filter.bucket_seconds);
  if (!sizing.ok()) return sizing.status().Prefixed("filter");
  Layout l;
  l.m = sizing->m;
  l.k = sizing->k;
  l.seed = filter.seed;
  l.prefix = filter.key_prefix;
  l.bucket_seconds = filter.bucket_seconds;
  l.window_seconds = filter.window_seconds;
  return l;
}

Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key) {
  std::string diffs;
  for (const auto& [field, value] : layout.ToFields()) {
    auto it = stored.find(field);
    std::string have = it == stored.end() ? "(missing)" : it->second;
    if (have != value) {
      if (!diffs.empty()) diffs += "; ";
      diffs += field + ": stored " + have + ", configured " + value;
    }
  }
  if (diffs.empty()) return Status::Ok();
  return FailedPrecondition("layout stored at " + meta_key + " disagrees with this config (" +
                            diffs +
                            "); refusing to run: use the stored filter.* settings, or another "
                            "filter.key_prefix for a new layout");
}

}  // namespace ef
