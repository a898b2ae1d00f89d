// Contract v1 revision 2, rules 4 and 6 (docs/FORMAT.md). Keys
// `<prefix>{<user_id>}:<bucket>`; bucket is the UTC start of the bucket holding the
// write time min(event time, writer's clock), YYYYMMDD when bucket_seconds is a
// whole number of days, YYYYMMDDHH when it is a whole number of hours (and not
// days). Buckets are aligned to the Unix epoch (1970-01-01T00:00Z), so 1d buckets
// start at 00:00 UTC. A key expires at bucket end + window (EXPIREAT, seconds).
// A user ID must not start with '}' (it would empty the Redis Cluster hash tag).
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
// Start times of the live buckets at `now`: the B = window/bucket + 1 buckets from
// BucketStart(now - window) to BucketStart(now), oldest first. Requires
// window_seconds >= 0. The oldest one's key expires after `now`; the bucket before
// it expired at or before `now`. A writer whose clock reads `now` writes only
// into the newest of them (rule 4: the write time is never later than now).
std::vector<int64_t> LiveBuckets(int64_t now_seconds, int64_t window_seconds,
                                 int64_t bucket_seconds);
// Start times of the buckets a reader at `now` reads (rule 6, revision 2): the
// live buckets and the one after them, B + 1 in all, oldest first. The extra one
// holds data only when a writer's clock is ahead of the reader's (it then holds
// what that writer wrote since its clock passed the boundary; or, from a revision
// 1 writer, events stamped ahead of its clock), so reading it tolerates clock skew
// of up to one bucket between writers and readers.
std::vector<int64_t> ReadBuckets(int64_t now_seconds, int64_t window_seconds,
                                 int64_t bucket_seconds);

// Rule 4, revision 2: a user ID is valid iff it is non-empty and its first byte is
// not '}'. Then the key's Redis Cluster hash tag (the bytes between its first '{',
// the one after the prefix, and the first '}' after that) is non-empty and made
// of the user ID alone, so all of a user's keys are in one slot. A '}' later in the
// ID ends the tag early ("a}b" has the tag "a"): still one slot per user.
inline bool IsValidUserId(std::string_view user) { return !user.empty() && user.front() != '}'; }
// OK iff IsValidUserId(user); else an error that names the user ID and the rule.
Status CheckUserId(std::string_view user);

// The Redis Cluster slot of a key, per the cluster specification: CRC16 (XMODEM)
// of the key's hash tag if it has a non-empty one, else of the whole key, mod
// 16384. Pure; for tests, tools and checks (the daemon does not route by slot).
uint16_t KeySlot(std::string_view key);

// The meta key: `<prefix>meta`.
inline std::string MetaKey(std::string_view prefix) { return std::string(prefix) + "meta"; }

}  // namespace ef
