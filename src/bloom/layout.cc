#include "bloom/layout.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

#include "bloom/keys.h"
#include "bloom/size_classes.h"
#include "bloom/sizing.h"
#include "common/duration.h"
#include "common/printable.h"
#include "config/fields.h"

namespace ef {

StageParams Layout::Params() const {
  StageParams p;
  p.m0 = m;
  p.k0 = k;
  p.growth = growth;
  p.k_step = k_step;
  p.stages = stages;
  p.fill_ppm = fill_ppm;
  return p;
}

Status Layout::Finish() {
  const StageParams p = Params();
  auto table = ComputeStages(p);
  if (!table.ok()) return table.status();
  stage_table = std::move(*table);
  max_value_bytes = ValueBytes(stage_table, stage_table.size());
  class_tables.clear();
  if (!v4) return Status::Ok();
  for (uint32_t c = 0; c < kSizeClassLimit; ++c) {
    auto t = ComputeClassStages(p, c);
    if (!t.ok()) break;
    class_tables.push_back(std::move(*t));
  }
  if (class_tables.empty())
    return InvalidArgument("stages: no size class fits (rule 11): class 0 " +
                           std::to_string(SizeClassBits(0)) + " bits");
  for (const std::vector<Stage>& t : class_tables)
    max_value_bytes = std::max(max_value_bytes, ValueBytes(t, t.size()));
  return Status::Ok();
}

Layout Layout::SingleStage() const {
  Layout l = *this;
  l.stages = 1;
  l.v3 = false;
  l.v3_from = 0;
  l.v4 = false;
  l.v4_from = 0;
  l.class_tables.clear();
  l.stage_table.resize(std::min<size_t>(1, l.stage_table.size()));
  l.max_value_bytes = l.stage_table.empty() ? 0 : ValueBytes(l.stage_table, 1);
  return l;
}

Layout Layout::WithoutV3() const {
  Layout l = WithoutV4();
  l.v3 = false;
  l.v3_from = 0;
  return l;
}

Layout Layout::WithoutV4() const {
  Layout l = *this;
  l.v4 = false;
  l.v4_from = 0;
  l.class_tables.clear();
  if (!l.stage_table.empty()) l.max_value_bytes = ValueBytes(l.stage_table, l.stage_table.size());
  return l;
}

bool Layout::RollingOver(int64_t now_seconds) const {
  if (!v3 || v3_from == 0) return false;
  // ReadBuckets (rule 6): the oldest live bucket.
  return BucketStart(now_seconds - window_seconds, bucket_seconds) < v3_from;
}

int64_t V3FromAfter(int64_t now_seconds, int64_t lead_seconds, int64_t bucket_seconds) {
  const int64_t t = now_seconds + lead_seconds;
  const int64_t start = BucketStart(t, bucket_seconds);
  return start == t ? start : start + bucket_seconds;
}

std::map<std::string, std::string> Layout::ToFields() const {
  std::map<std::string, std::string> f = {{"version", std::to_string(version())},
                                          {"m", std::to_string(m)},
                                          {"k", std::to_string(k)},
                                          {"seed", std::to_string(seed)},
                                          {"prefix", prefix},
                                          {"bucket_seconds", std::to_string(bucket_seconds)},
                                          {"window_seconds", std::to_string(window_seconds)}};
  if (version() >= 2) {
    f["growth"] = std::to_string(growth);
    f["k_step"] = std::to_string(k_step);
    f["stages"] = std::to_string(stages);
    f["fill_ppm"] = std::to_string(fill_ppm);
  }
  if (version() >= 3) f["v3_from"] = std::to_string(v3_from);
  if (version() == 4) f["v4_from"] = std::to_string(v4_from);
  return f;
}

namespace {

StatusOr<Sizing> SizingOf(const FilterConfig& f) {
  StatusOr<Sizing> sizing =
      ComputeSizing(f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds);
  if (sizing.ok()) return sizing;
  auto seconds = [](int64_t s) { return FormatDurationMs(s * 1000); };
  return sizing.status().Prefixed(
      "filter.items_per_bucket (" + std::to_string(f.items_per_bucket) + "), filter.fpr (" +
      config_internal::FormatValue(config_internal::FieldType::kDouble, f.fpr) +
      "), filter.window (" + seconds(f.window_seconds) + "), filter.bucket (" +
      seconds(f.bucket_seconds) + "): no usable Bloom filter size");
}

}  // namespace

Status CheckFilterSizing(const FilterConfig& filter) { return SizingOf(filter).status(); }

StatusOr<Layout> LayoutFromConfig(const FilterConfig& filter) {
  auto sizing = SizingOf(filter);
  if (!sizing.ok()) return sizing.status();
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
  l.v3 = filter.layout_version >= 3;
  l.v3_from = 0;
  l.v4 = filter.layout_version >= 4;
  l.v4_from = 0;
  l.founder_marks_from = 0;
  if (Status st = l.Finish(); !st.ok()) return st.Prefixed("filter");
  return l;
}

namespace {

constexpr uint64_t kU32Max = 0xffffffffu;
constexpr uint64_t kI64Max = 0x7fffffffffffffffu;

// Every field FORMAT.md rule 7 names, of any version: the others are ignored.
bool IsMetaField(const std::string& name) {
  static const char* const kNames[] = {
      "version", "m",      "k",      "seed",     "prefix",  "bucket_seconds", "window_seconds",
      "growth",  "k_step", "stages", "fill_ppm", "v3_from", "v4_from"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// Rule 7: the field holds a canonical decimal integer ("0", or 1-9 followed by
// digits: no sign, space or leading zero) in [lo, hi]. Errors name the field.
template <typename T>
Status ParseField(const std::map<std::string, std::string>& stored, const std::string& name,
                  uint64_t lo, uint64_t hi, T* out) {
  auto it = stored.find(name);
  if (it == stored.end()) return InvalidArgument("field " + name + ": missing");
  const std::string& s = it->second;
  bool canonical = !s.empty() && (s.size() == 1 || s[0] != '0');
  for (char c : s) canonical = canonical && c >= '0' && c <= '9';
  if (!canonical) {
    return InvalidArgument("field " + name + ": \"" + Printable(s, 40) +
                           "\" is not a canonical decimal integer");
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) {
    return InvalidArgument("field " + name + ": " + Printable(s, 40) + " is out of range " +
                           std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

// ParseField of a bucket start: 0 .. 2^63 - 1 and a multiple of bucket_seconds.
Status ParseBucketField(const std::map<std::string, std::string>& stored, const std::string& name,
                        int64_t bucket_seconds, int64_t* out) {
  EF_RETURN_IF_ERROR(ParseField(stored, name, 0, kI64Max, out));
  if (*out % bucket_seconds != 0) {
    return InvalidArgument("field " + name + ": " + std::to_string(*out) +
                           " is not a multiple of bucket_seconds " +
                           std::to_string(bucket_seconds));
  }
  return Status::Ok();
}

Status ParseFields(const std::map<std::string, std::string>& stored, Layout* l) {
  uint64_t version = 0;
  EF_RETURN_IF_ERROR(ParseField(stored, "version", 1, UINT64_MAX, &version));
  if (version > 4) {
    return InvalidArgument("field version: " + std::to_string(version) +
                           " is newer than this program knows (1 to 4): upgrade "
                           "exposure-filter");
  }
  EF_RETURN_IF_ERROR(ParseField(stored, "m", 1, kU32Max, &l->m));
  EF_RETURN_IF_ERROR(ParseField(stored, "k", 1, kU32Max, &l->k));
  EF_RETURN_IF_ERROR(ParseField(stored, "seed", 0, kU32Max, &l->seed));
  auto prefix = stored.find("prefix");
  if (prefix == stored.end()) return InvalidArgument("field prefix: missing");
  l->prefix = prefix->second;
  EF_RETURN_IF_ERROR(ParseField(stored, "bucket_seconds", 1, kI64Max, &l->bucket_seconds));
  EF_RETURN_IF_ERROR(ParseField(stored, "window_seconds", 1, kI64Max, &l->window_seconds));
  if (l->window_seconds % l->bucket_seconds != 0) {
    return InvalidArgument("field window_seconds: " + std::to_string(l->window_seconds) +
                           " is not a multiple of bucket_seconds " +
                           std::to_string(l->bucket_seconds));
  }
  l->stages = 1;  // version 1; the fields of later versions mean nothing to it
  if (version >= 2) {
    EF_RETURN_IF_ERROR(ParseField(stored, "growth", 1, 16, &l->growth));
    EF_RETURN_IF_ERROR(ParseField(stored, "k_step", 0, 64, &l->k_step));
    // Version 3 may have one stage (version 2 with one is version 1).
    EF_RETURN_IF_ERROR(ParseField(stored, "stages", version >= 3 ? 1 : 2, 32, &l->stages));
    EF_RETURN_IF_ERROR(ParseField(stored, "fill_ppm", 1, 999999, &l->fill_ppm));
  }
  if (version >= 3) {
    l->v3 = true;
    EF_RETURN_IF_ERROR(ParseBucketField(stored, "v3_from", l->bucket_seconds, &l->v3_from));
  }
  if (version == 4) {
    l->v4 = true;
    EF_RETURN_IF_ERROR(ParseBucketField(stored, "v4_from", l->bucket_seconds, &l->v4_from));
    if (l->v4_from < l->v3_from) {
      return InvalidArgument("field v4_from: " + std::to_string(l->v4_from) +
                             " is before v3_from " + std::to_string(l->v3_from));
    }
  }
  // Optional in every version (CONTENT.md rule 5, revision 2).
  l->founder_marks_from = -1;
  if (stored.count("founder_marks_from") != 0) {
    EF_RETURN_IF_ERROR(
        ParseBucketField(stored, "founder_marks_from", l->bucket_seconds, &l->founder_marks_from));
  }
  return l->Finish();  // rule 8: names the stage past the 2^32-bit limit
}

}  // namespace

StatusOr<Layout> LayoutFromFields(const std::map<std::string, std::string>& stored,
                                  const std::string& meta_key) {
  Layout l;
  if (Status st = ParseFields(stored, &l); !st.ok()) {
    return FailedPrecondition("layout stored at " + meta_key + ": " + st.message());
  }
  return l;
}

Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key) {
  std::string diffs;
  // The configured layout in the stored meta's version 2, 3 or 4: which rule a
  // bucket follows, and from when keys have a class, is the stored meta's to say.
  Layout shaped = layout;
  auto version = stored.find("version");
  const std::string stored_version = version == stored.end() ? "" : version->second;
  shaped.v3 = stored_version == "3" || stored_version == "4";
  shaped.v4 = stored_version == "4";
  auto fields = shaped.ToFields();
  for (const char* from_field : {"v3_from", "v4_from"}) {
    if (fields.count(from_field) == 0) continue;
    auto from = stored.find(from_field);
    fields[from_field] = from == stored.end() ? "(missing)" : from->second;
  }
  for (const auto& [field, value] : fields) {
    auto it = stored.find(field);
    std::string have = it == stored.end() ? "(missing)" : it->second;
    if (have != value) {
      if (!diffs.empty()) diffs += "; ";
      diffs += field + ": stored " + have + ", configured " + value;
    }
  }
  // Fields of a version this layout does not have (e.g. a v2 meta, v1 config);
  // fields rule 7 does not name are ignored.
  for (const auto& [field, value] : stored) {
    if (fields.count(field) == 0 && IsMetaField(field)) {
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
  std::map<std::string, std::string> fields = stored;
  fields.erase("founder_marks_from");  // any version's, not a layout difference
  return fields == layout.SingleStage().ToFields();
}

uint32_t ChooseClassFrom(const Layout& l, int64_t bucket_start, std::string_view previous,
                         std::string_view before) {
  std::optional<double> estimate;
  std::optional<uint32_t> previous_class;
  const std::string_view values[] = {previous, before};
  for (int back = 1; back <= 2; ++back) {
    const std::string_view v = values[back - 1];
    const int64_t start = bucket_start - back * l.bucket_seconds;
    const std::vector<Stage>* table = l.TableFor(v, start);
    if (v.empty() || table == nullptr) continue;
    const double e = EstimateItems(v, *table);
    estimate = estimate ? std::min(*estimate, e) : e;
    if (!previous_class && l.HasClass(start)) previous_class = static_cast<uint8_t>(v[0]) - 1u;
  }
  return ChooseClass(l.Params(), static_cast<uint32_t>(l.class_tables.size()), estimate,
                     previous_class);
}

}  // namespace ef
