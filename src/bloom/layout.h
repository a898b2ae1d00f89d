// The bit layout a writer or reader uses (docs/FORMAT.md: contract v1 rules 1-7,
// v2 adds the stages of rule 8), derived from config. Stored in Redis at
// `<prefix>meta` and checked at start (redis/meta.h).
// Version 1 is the one-stage layout (stages == 1); version 2 a scalable filter of
// up to `stages` stages whose stage 0 is bit for bit the version-1 filter.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
  // Version 2 (ignored, and not stored, when stages == 1).
  uint32_t growth = 2;
  uint32_t k_step = 2;
  uint32_t stages = 1;
  uint32_t fill_ppm = 500000;
  // ComputeStages of the above: stage_table[0] = {m, k, 0, fill}. Filled in by
  // LayoutFromConfig / LayoutFromFields / Finish.
  std::vector<Stage> stage_table;

  int version() const { return stages > 1 ? 2 : 1; }
  // Recomputes stage_table; errors name the parameter.
  Status Finish();
  // The same layout with one stage (what a v1 meta describes).
  Layout SingleStage() const;

  // The meta hash fields: version, m, k, seed, prefix, bucket_seconds,
  // window_seconds; version 2 adds growth, k_step, stages, fill_ppm.
  std::map<std::string, std::string> ToFields() const;
};

// filter.* gives a usable Bloom filter (contract rule 5); the error names the
// four keys and their values. config/ cannot make this check (it sits below
// bloom/), so every command that loads a config makes it next
// (app/common.cc LoadOrReport, `size`); LayoutFromConfig returns the same error.
Status CheckFilterSizing(const FilterConfig& filter);

// Sizing from filter.* (errors name the keys).
StatusOr<Layout> LayoutFromConfig(const FilterConfig& filter);

// The layout a stored meta hash describes (version 1 or 2). kFailedPrecondition
// for a version this code does not know (naming it) or a missing/bad field.
StatusOr<Layout> LayoutFromFields(const std::map<std::string, std::string>& stored,
                                  const std::string& meta_key);

// Compares stored meta fields with `layout`; the error names every field that
// differs with both values, e.g. "m: stored 3345, configured 4000".
Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key);

// True iff `stored` is a version-1 meta whose fields equal `layout`'s stage 0
// (layout.SingleStage().ToFields()): data a version-2 layout extends.
bool IsUpgradableV1(const std::map<std::string, std::string>& stored, const Layout& layout);

}  // namespace ef
