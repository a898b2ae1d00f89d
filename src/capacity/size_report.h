// The report of `exposure-filter size`: what a layout (Sizing, bloom/sizing.h, and its
// stages, bloom/stages.h) costs.
//
// Memory assumes every user has all B bucket keys, each a full string (v1:
// ceil(m/8) bytes; Redis SETBIT allocates up to the highest offset set, and k
// random positions soon reach the end), so it is an upper bound for users who
// are not active in every bucket. Redis adds per-key overhead (dict entry,
// robj, SDS header, expire entry: ~50-90 bytes per key); the report estimates it
// as kRedisKeyOverheadBytes per key and shows the total with and without it.
//
// Beside the 1x figures, the report shows users at kActivityTableMultiples x
// items_per_bucket (stages used, bytes per key, expected FPR per key and per
// window: the ideal stage model of capacity/activity.h; past the stage limit, the
// share of the user's items not written), and the cluster memory
// for an activity distribution (Activity). Pure and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bloom/sizing.h"
#include "bloom/stages.h"
#include "capacity/activity.h"
#include "capacity/activity_v4.h"
#include "common/status.h"
#include "config/config.h"

namespace ef {

inline constexpr uint64_t kRedisKeyOverheadBytes = 64;
inline constexpr double kActivityTableMultiples[] = {1, 4, 16, 64};

struct SizeReportInput {
  Sizing sizing;  // ComputeSizing of the four inputs below
  int64_t items_per_bucket = 0;
  double fpr = 0;
  int64_t window_seconds = 0;
  int64_t bucket_seconds = 0;
  uint64_t users = 0;
  // The layout's stage table (Layout::stage_table; stages[0] = {m, k, 0, fill}).
  // growth and k_step are only shown.
  std::vector<Stage> stages;
  // The contract version (Layout::version()): 3 under filter.layout_version 3
  // with any number of stages; under 2, v1 for one stage and v2 for more.
  int version = 1;
  uint32_t growth = 0;
  uint32_t k_step = 0;
  // Layout version 4's classes for the same filter.* (version 3 inputs only;
  // empty otherwise): the report's v4 figures (capacity/activity_v4.h).
  ClassTables classes;
  Activity activity;            // default: everybody at 1x
  bool activity_given = false;  // the text shows the activity section only if given
};

// The input for filter.* (sizing and layout as LayoutFromConfig computes them),
// everybody at 1x; errors name the key ("filter: ...").
StatusOr<SizeReportInput> SizeReportInputFromConfig(const FilterConfig& filter, uint64_t users);

// The one-stage (contract v1) input for `sizing` (from ComputeSizing: m, k >=
// 1), everybody at 1x. If sizing has no valid m or k, stages stays empty and
// the reports leave out the stage figures.
SizeReportInput SingleStageInput(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                                 int64_t window_seconds, int64_t bucket_seconds, uint64_t users);

// "0 B", "512 B", "1.5 KiB", "12.3 GiB" (binary units, one decimal above bytes;
// UINT64_MAX is "16.0 EiB").
std::string FormatBytesHuman(uint64_t bytes);

// Aligned multi-line text, ending in '\n': a header naming the contract version,
// inputs, m, k, B, the stage limit, target and expected per-bucket and window
// FPR, bytes per user per bucket and per window, total memory for `users` users
// without and "with Redis key overhead" (everybody at 1x), the activity table,
// and (if activity_given) the distribution's users past stage 0, at the stage
// limit and its totals; for version-3 inputs, the same under layout v4 if each
// user's activity persists (class and bytes per key, and the totals). Totals are computed in 128
// bits, where no input can overflow them, and printed exactly (beyond 16 EiB too, in ZiB/YiB).
std::string FormatSizeReport(const SizeReportInput& in);

// The same figures as one JSON object. Keys: contract_version (1, 2 or 3),
// items_per_bucket, fpr (window target), window_seconds, bucket_seconds, window,
// bucket (durations as text), users, m, k, buckets, bucket_fpr_target,
// bucket_fpr_expected, window_fpr_expected, bytes_per_user_per_bucket,
// bytes_per_user_per_window, total_bytes, total_human,
// redis_key_overhead_bytes_per_key, total_bytes_with_key_overhead,
// total_with_key_overhead_human, total_bytes_exceeds_64_bits (the 1x figures,
// unchanged from v1); and
//   stage_limit, growth, k_step (null for one stage), stage_table: [{stage, m, k,
//     offset_bits, fill_bits, cumulative_capacity_items (items in stages
//     0..s when s is full; null if unbounded)}],
//   activity_table: [{multiple, items_per_bucket, stages, at_limit,
//     items_not_written, share_not_written (per key: the items past the stage
//     limit that a writer does not write, and their share of the user's items;
//     0 with one stage), bytes_per_key, bucket_fpr, window_fpr}] for
//     kActivityTableMultiples,
//   activity: {spec, kind ("classes" | "zipf"), zipf_s (zipf only), classes:
//     [{multiple, percent, users, stages, at_limit, share_not_written,
//     bytes_per_key}] (classes
//     only), users_by_stages: [users using 1, 2, ... stages], users_past_stage0,
//     share_past_stage0, users_at_limit, share_at_limit, total_bytes,
//     total_human, total_bytes_with_key_overhead, total_with_key_overhead_human,
//     total_bytes_exceeds_64_bits} (also without --activity: everybody at 1x);
//   v4_persistent (version-3 inputs: layout v4 if activity persists from day to
//     day, capacity/activity_v4.h): {activity_table: [{multiple, class,
//     class_bytes, stages, bytes_per_key, bucket_fpr, window_fpr}], activity:
//     {users_past_stage0, users_at_limit, total_bytes, total_human,
//     total_bytes_with_key_overhead, total_with_key_overhead_human}}.
// JSON integers are read as 64-bit, so a total above 2^64 - 1 bytes is null
// (never a saturated or wrapped number); *_exceeds_64_bits is true when either
// total of its object is null, and the *_human texts still give their size.
nlohmann::json SizeReportJson(const SizeReportInput& in);

// The contract v1 report (SingleStageInput), as before layout v2.
std::string FormatSizeReport(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                             int64_t window_seconds, int64_t bucket_seconds, uint64_t users);
nlohmann::json SizeReportJson(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                              int64_t window_seconds, int64_t bucket_seconds, uint64_t users);

}  // namespace ef
