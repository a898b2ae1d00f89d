// The report of `exposure-filter size`: what a layout (Sizing, sizing.h) costs.
//
// Memory assumes every user has all B bucket keys, each a full string of
// ceil(m/8) bytes (Redis SETBIT allocates up to the highest offset set, and k
// random positions soon reach the end), so it is an upper bound for users who
// are not active in every bucket. Redis adds per-key overhead (dict entry,
// robj, SDS header, expire entry: ~50-90 bytes per key); the report estimates it
// as kRedisKeyOverheadBytes per key and shows the total with and without it.
// Pure and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bloom/sizing.h"

namespace ef {

inline constexpr uint64_t kRedisKeyOverheadBytes = 64;

// "0 B", "512 B", "1.5 KiB", "12.3 GiB" (binary units, one decimal above bytes;
// UINT64_MAX is "16.0 EiB").
std::string FormatBytesHuman(uint64_t bytes);

// Aligned multi-line text, ending in '\n': inputs, m, k, B, target and expected
// per-bucket and window FPR, bytes per user per bucket and per window, and total
// memory for `users` users without and "with Redis key overhead". Totals are
// computed in 128 bits, where no input can overflow them, and printed exactly
// (beyond 16 EiB too, in ZiB/YiB). The inputs are those `sizing` was computed
// from (ComputeSizing).
std::string FormatSizeReport(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                             int64_t window_seconds, int64_t bucket_seconds, uint64_t users);

// The same figures as one flat JSON object. Keys: contract_version,
// items_per_bucket, fpr (window target), window_seconds, bucket_seconds, window,
// bucket (durations as text), users, m, k, buckets, bucket_fpr_target,
// bucket_fpr_expected, window_fpr_expected, bytes_per_user_per_bucket,
// bytes_per_user_per_window, total_bytes, total_human,
// redis_key_overhead_bytes_per_key, total_bytes_with_key_overhead,
// total_with_key_overhead_human, total_bytes_exceeds_64_bits. JSON integers
// are read as 64-bit, so a total above 2^64 - 1 bytes is null (never a
// saturated or wrapped number); total_bytes_exceeds_64_bits is true when
// either total is null, and the *_human texts still give their size.
nlohmann::json SizeReportJson(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                              int64_t window_seconds, int64_t bucket_seconds, uint64_t users);

}  // namespace ef
