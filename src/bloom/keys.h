// Contract v1, rule 4. Keys `<prefix>{<user_id>}:<bucket>`; bucket is the UTC start
// of the bucket holding the event time, YYYYMMDD when bucket_seconds is a whole
// number of days, YYYYMMDDHH when it is a whole number of hours (and not days).
// Buckets are aligned to the Unix epoch (1970-01-01T00:00Z), so 1d buckets start
// at 00:00 UTC. A key expires at bucket end + window (EXPIREAT, seconds).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ef {

// Every function below requires bucket_seconds > 0 (checked once at startup with
// CheckBucketSeconds) and is pure and thread-safe.
//
// OK iff bucket_seconds is a positive whole number of hours (whole days included);
// other spans could not be named uniquely by YYYYMMDD[HH].
Status CheckBucketSeconds(int64_t bucket_seconds);
// floor(ts / bucket) * bucket, in seconds; correct for negative ts too.
int64_t BucketStart(int64_t ts_seconds, int64_t bucket_seconds);
// "20251122" or "2025112213" (proleptic Gregorian, UTC). Years outside 0..9999
// are written in decimal without padding; they do not occur for real events.
std::string FormatBucket(int64_t bucket_start_seconds, int64_t bucket_seconds);
// Appends `<prefix>{<user>}:<bucket>` to *out (which is not cleared).
void AppendKey(std::string_view prefix, std::string_view user, int64_t bucket_start_seconds,
               int64_t bucket_seconds, std::string* out);
// The same with the bucket already formatted (FormatBucket), for callers that
// format each bucket once rather than once per key.
void AppendKeyWithBucketName(std::string_view prefix, std::string_view user,
                             std::string_view bucket_name, std::string* out);
std::string MakeKey(std::string_view prefix, std::string_view user, int64_t bucket_start_seconds,
                    int64_t bucket_seconds);
// bucket_start + bucket_seconds + window_seconds.
inline int64_t ExpireAt(int64_t bucket_start_seconds, int64_t bucket_seconds,
                        int64_t window_seconds) {
  return bucket_start_seconds + bucket_seconds + window_seconds;
}
// Start times of the buckets a query at `now` checks: the B = window/bucket + 1
// buckets from BucketStart(now - window) to BucketStart(now), oldest first.
// Requires window_seconds >= 0. The oldest one's key expires after `now`; the
// bucket before it expired at or before `now`.
std::vector<int64_t> LiveBuckets(int64_t now_seconds, int64_t window_seconds,
                                 int64_t bucket_seconds);
// The meta key: `<prefix>meta`.
inline std::string MetaKey(std::string_view prefix) { return std::string(prefix) + "meta"; }

}  // namespace ef
