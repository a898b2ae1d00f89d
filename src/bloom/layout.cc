#include "bloom/layout.h"

#include <charconv>

#include "bloom/sizing.h"

namespace ef {

Status Layout::Finish() {
  StageParams p;
  p.m0 = m;
  p.k0 = k;
  p.growth = growth;
  p.k_step = k_step;
  p.stages = stages;
  p.fill_ppm = fill_ppm;
  auto table = ComputeStages(p);
  if (!table.ok()) return table.status();
  stage_table = std::move(*table);
  return Status::Ok();
}

Layout Layout::SingleStage() const {
  Layout l = *this;
  l.stages = 1;
  l.stage_table.resize(std::min<size_t>(1, l.stage_table.size()));
  return l;
}

std::map<std::string, std::string> Layout::ToFields() const {
  std::map<std::string, std::string> f = {{"version", std::to_string(version())},
                                          {"m", std::to_string(m)},
                                          {"k", std::to_string(k)},
                                          {"seed", std::to_string(seed)},
                                          {"prefix", prefix},
                                          {"bucket_seconds", std::to_string(bucket_seconds)},
                                          {"window_seconds", std::to_string(window_seconds)}};
  if (version() == 2) {
    f["growth"] = std::to_string(growth);
    f["k_step"] = std::to_string(k_step);
    f["stages"] = std::to_string(stages);
    f["fill_ppm"] = std::to_string(fill_ppm);
  }
  return f;
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
  l.growth = filter.growth;
  l.k_step = filter.k_step;
  l.stages = filter.stages;
  l.fill_ppm = DesignFillPpm(l.m, l.k, filter.items_per_bucket);
  if (Status st = l.Finish(); !st.ok()) return st.Prefixed("filter");
  return l;
}

namespace {

template <typename T>
bool ParseField(const std::map<std::string, std::string>& stored, const std::string& name, T* out) {
  auto it = stored.find(name);
  if (it == stored.end()) return false;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

StatusOr<Layout> LayoutFromFields(const std::map<std::string, std::string>& stored,
                                  const std::string& meta_key) {
  auto bad = [&](const std::string& what) {
    return FailedPrecondition("layout stored at " + meta_key + ": " + what);
  };
  int version = 0;
  if (!ParseField(stored, "version", &version)) return bad("no valid version field");
  if (version != 1 && version != 2) {
    return bad("version " + std::to_string(version) +
               " is newer than this program knows (1 and 2): upgrade exposure-filter");
  }
  Layout l;
  if (!ParseField(stored, "m", &l.m) || !ParseField(stored, "k", &l.k) ||
      !ParseField(stored, "seed", &l.seed) ||
      !ParseField(stored, "bucket_seconds", &l.bucket_seconds) ||
      !ParseField(stored, "window_seconds", &l.window_seconds) || !stored.count("prefix"))
    return bad("a field of version 1 is missing or not a number");
  l.prefix = stored.at("prefix");
  if (version == 2) {
    if (!ParseField(stored, "growth", &l.growth) || !ParseField(stored, "k_step", &l.k_step) ||
        !ParseField(stored, "stages", &l.stages) || !ParseField(stored, "fill_ppm", &l.fill_ppm))
      return bad("a field of version 2 (growth, k_step, stages, fill_ppm) is missing or bad");
    if (l.stages < 2) return bad("version 2 with stages < 2");
  } else {
    l.stages = 1;
  }
  if (Status st = l.Finish(); !st.ok()) return bad(st.message());
  return l;
}

Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key) {
  std::string diffs;
  auto fields = layout.ToFields();
  for (const auto& [field, value] : fields) {
    auto it = stored.find(field);
    std::string have = it == stored.end() ? "(missing)" : it->second;
    if (have != value) {
      if (!diffs.empty()) diffs += "; ";
      diffs += field + ": stored " + have + ", configured " + value;
    }
  }
  // Fields of a version this layout does not have (e.g. a v2 meta, v1 config).
  for (const auto& [field, value] : stored) {
    if (fields.count(field) == 0) {
      if (!diffs.empty()) diffs += "; ";
      diffs += field + ": stored " + value + ", configured (none)";
    }
  }
  if (diffs.empty()) return Status::Ok();
  return FailedPrecondition("layout stored at " + meta_key + " disagrees with this config (" +
                            diffs +
                            "); refusing to run: use the stored filter.* settings, or another "
                            "filter.key_prefix for a new layout");
}

bool IsUpgradableV1(const std::map<std::string, std::string>& stored, const Layout& layout) {
  return stored == layout.SingleStage().ToFields();
}

}  // namespace ef
