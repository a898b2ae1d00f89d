// The bit layout a writer or reader uses (docs/FORMAT.md: contract v1 rules 1-7,
// v2 adds the stages of rule 8), derived from config. Stored in Redis at
// `<prefix>meta` and checked at start (redis/meta.h).
// Version 1 is the one-stage layout (stages == 1); version 2 a scalable filter of
// up to `stages` stages whose stage 0 is bit for bit the version-1 filter;
// version 3 the same stages, with rule 9's positions in every bucket that starts
// at or after v3_from (rule 2's before it: the rollover of an upgraded v2);
// version 4 adds rule 11's size classes to the keys of buckets from v4_from on:
// each such key's stage table is its class's (ClassTable), named by its first byte.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/positions.h"
#include "bloom/stages.h"
#include "common/status.h"
#include "config/config.h"

namespace ef {

struct Layout {
  uint32_t m = 0;  // stage 0 (the v1 filter)
  uint32_t k = 0;
  uint32_t seed = 0;
  std::string prefix;
  int64_t bucket_seconds = 0;
  int64_t window_seconds = 0;
  // Version 2 (ignored, and not stored, when stages == 1 and not v3).
  uint32_t growth = 2;
  uint32_t k_step = 2;
  uint32_t stages = 1;
  uint32_t fill_ppm = 500000;
  // Version 3: the buckets starting at or after v3_from (a multiple of
  // bucket_seconds; 0 = every bucket) follow rule 9, the earlier ones rule 2.
  bool v3 = false;
  int64_t v3_from = 0;
  // Version 4 (implies v3, v3_from <= v4_from): the buckets starting at or after
  // v4_from (a multiple of bucket_seconds) hold keys with a size class (rule 11).
  bool v4 = false;
  int64_t v4_from = 0;
  // ComputeStages of the above: stage_table[0] = {m, k, 0, fill}. Filled in by
  // LayoutFromConfig / LayoutFromFields / Finish.
  std::vector<Stage> stage_table;
  // Version 4: class_tables[c] = ComputeClassStages(stage params, c) for the
  // classes 0 .. C-1 of rule 11 (empty below version 4). Filled in by Finish.
  std::vector<std::vector<Stage>> class_tables;
  // The longest value any table allows (its last stage's last byte): a longer
  // value was written under another layout. Filled in by Finish.
  uint64_t max_value_bytes = 0;
  // docs/FORMAT.md rule 7's optional field `founder_marks_from` (any version;
  // docs/CONTENT.md rule 5, revision 2): the start of the first bucket whose
  // writers all mark a cluster C by C's own item ID, never by the revision-1
  // token 0xFF+C; a multiple of bucket_seconds. -1: the field is absent, so any
  // bucket may hold tokens. Not in ToFields (no layout comparison looks at it):
  // redis/meta.cc stores and keeps it. LayoutFromConfig sets 0 (a new deployment).
  int64_t founder_marks_from = -1;

  // True iff a read whose oldest bucket starts at oldest_bucket_start must also
  // test revision-1 cluster tokens (some bucket read may hold them).
  bool ReadsClusterTokens(int64_t oldest_bucket_start) const {
    return founder_marks_from < 0 || oldest_bucket_start < founder_marks_from;
  }
  int version() const { return v4 ? 4 : v3 ? 3 : stages > 1 ? 2 : 1; }
  // True iff the key of the bucket that starts at bucket_start has a size class.
  bool HasClass(int64_t bucket_start) const { return v4 && bucket_start >= v4_from; }
  // The stage table of a key's value: stage_table, or from v4_from on the table of
  // the class its header names; nullptr for such a value whose header names no
  // class (rule 11: not valid, not to be tested). An empty value (missing key) is
  // an empty filter: stage_table.
  const std::vector<Stage>* TableFor(std::string_view value, int64_t bucket_start) const {
    if (!HasClass(bucket_start) || value.empty()) return &stage_table;
    const auto header = static_cast<unsigned char>(value[0]);
    if (header == 0 || header > class_tables.size()) return nullptr;
    return &class_tables[header - 1];
  }
  // The stage parameters of stage_table (rule 8), from which the class tables come.
  StageParams Params() const;
  // The position rule of the key of the bucket that starts at bucket_start.
  PositionRule RuleFor(int64_t bucket_start) const {
    return v3 && bucket_start >= v3_from ? PositionRule::kRemix : PositionRule::kModulo;
  }
  // True iff some live bucket at `now_seconds` (rule 6: the window's buckets and
  // the next one) follows rule 2: a version-3 rollover not complete yet.
  bool RollingOver(int64_t now_seconds) const;
  // Recomputes stage_table; errors name the parameter.
  Status Finish();
  // The version-1 layout of stage 0 (what a v1 meta describes): one stage, not v3.
  Layout SingleStage() const;
  // The same stages and rule-2 positions everywhere (version 2, or 1 for one stage).
  Layout WithoutV3() const;
  // The same without size classes: version 3 with the same v3_from (or the layout
  // itself below version 4).
  Layout WithoutV4() const;

  // The meta hash fields: version, m, k, seed, prefix, bucket_seconds,
  // window_seconds; version 2 adds growth, k_step, stages, fill_ppm; version 3
  // those and v3_from; version 4 those and v4_from.
  std::map<std::string, std::string> ToFields() const;
};

// Rule 11's class rule (ChooseClass) for the key of the bucket that starts at
// bucket_start (a writer's: the C++ one runs as the creation script,
// write/class_create.h), from the user's previous bucket's value `previous` and
// the one before it, `before` (empty: missing): the estimate of each that is not
// empty and has a table, and the class named by the newer that names one.
uint32_t ChooseClassFrom(const Layout& l, int64_t bucket_start, std::string_view previous,
                         std::string_view before);

// filter.* gives a usable Bloom filter (contract rule 5); the error names the
// four keys and their values. config/ cannot make this check (it sits below
// bloom/), so every command that loads a config makes it next
// (app/common.cc LoadOrReport, `size`); LayoutFromConfig returns the same error.
Status CheckFilterSizing(const FilterConfig& filter);

// Sizing from filter.* (errors name the keys). filter.layout_version 3 gives a
// version-3 layout with v3_from 0 (what a fresh deployment stores).
StatusOr<Layout> LayoutFromConfig(const FilterConfig& filter);

// The layout a stored meta hash describes (version 1, 2 or 3). kFailedPrecondition
// for a version this code does not know (naming it) or a missing/bad field.
StatusOr<Layout> LayoutFromFields(const std::map<std::string, std::string>& stored,
                                  const std::string& meta_key);

// Compares stored meta fields with `layout`; the error names every field that
// differs with both values, e.g. "m: stored 3345, configured 4000". The version
// 2/3 difference alone is no difference (the rule of each bucket is the stored
// meta's: `layout` is taken as stored v2, or v3 with the stored v3_from).
Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key);

// True iff `stored` is a version-1 meta whose fields equal `layout`'s stage 0
// (layout.SingleStage().ToFields(); founder_marks_from aside): data a version-2
// layout extends.
bool IsUpgradableV1(const std::map<std::string, std::string>& stored, const Layout& layout);

// The first bucket start at or after now_seconds + lead_seconds: the v3_from of
// `layout upgrade --to 3`.
int64_t V3FromAfter(int64_t now_seconds, int64_t lead_seconds, int64_t bucket_seconds);

}  // namespace ef
