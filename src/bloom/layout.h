// The bit layout a writer or reader uses (contract v1, rules 1-7), derived from
// config. Stored in Redis at `<prefix>meta` and checked at start (redis/meta.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "config/config.h"

namespace ef {

struct Layout {
  static constexpr int kVersion = 1;
  uint32_t m = 0;
  uint32_t k = 0;
  uint32_t seed = 0;
  std::string prefix;
  int64_t bucket_seconds = 0;
  int64_t window_seconds = 0;

  // The meta hash fields: version, m, k, seed, prefix, bucket_seconds, window_seconds.
  std::map<std::string, std::string> ToFields() const;
};

// Sizing from filter.* (errors name the keys).
StatusOr<Layout> LayoutFromConfig(const FilterConfig& filter);

// Compares stored meta fields with `layout`; the error names every field that
// differs with both values, e.g. "m: stored 3345, configured 4000".
Status CompareLayout(const std::map<std::string, std::string>& stored, const Layout& layout,
                     const std::string& meta_key);

}  // namespace ef
