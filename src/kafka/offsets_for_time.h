// Turns a wall-clock time into per-partition offsets, for `replay --since/--until`.
//
// First asks the broker (ListOffsets by timestamp, rd_kafka_offsets_for_times).
// A broker answer inside [low, high) is trusted. Any other answer (-1 = "end",
// an offset >= the high watermark, a per-partition error, or the whole request
// failing) is "unknown": librdkafka's mock cluster answers -1 for every
// timestamp, and real brokers can lack time indexes on old segments. An unknown
// answer is resolved by reading message timestamps (ReadMessageTimestamps):
//   1. the last message (high - 1): if its timestamp is below the threshold the
//      answer is the high watermark (one probe, the common "after all" case);
//   2. else a binary search over [low, high - 1] for a boundary offset.
// Each search step probes all unresolved partitions in one round, so a call
// costs ~log2(max partition size) rounds of one short-lived consumer each.
//
// Semantics with out-of-order timestamps (producers set CreateTime, so clock
// skew and retries reorder them). A binary search on a non-monotonic sequence
// only finds a *local* boundary b: ts(b-1) < X <= ts(b) (or b == low / high).
// A replay must never miss an exposure, while re-writing a few extra ones is
// harmless (the Bloom filter bits are idempotent). So we search for a threshold
// widened by `max_skew_ms`, the largest amount by which a message may be older
// than a message before it in the same partition (the "skew bound"):
//
//   OffsetsForTime(T): returns a local boundary b for X = T - max_skew_ms.
//     If the partition honours the skew bound, no message before b has a
//     timestamp >= T: for i < b-1, ts(i) <= ts(b-1) + max_skew < T. Extra
//     messages replayed are those in [b, first ts >= T), whose timestamps are
//     >= T - 2 * max_skew_ms. With non-decreasing timestamps and max_skew_ms = 0
//     b is exactly the first offset with ts >= T. A message that violates the
//     skew bound (e.g. a stamp far in the future early in the partition) can be
//     skipped; nothing cheaper than a full scan can find it.
//   EndOffsetsForTime(U) (exclusive end for --until): a local boundary e for
//     X = U + 1 + max_skew_ms. Under the skew bound every message at or after e
//     has ts > U (ts(j) >= ts(e) - max_skew > U), so nothing with ts <= U is cut.
//
// A probe that yields no timestamp (-1: no message within timeout_ms, or a
// message without a timestamp) counts as ">= X": the search moves towards low,
// i.e. it replays more rather than less. The broker is asked for X as well.
//
// Both return one offset per entry of `partitions`, in order; the high
// watermark (snapshot at the start of the call) when nothing qualifies; for an
// empty partition its high watermark without any probe.
// Errors: kInvalidArgument for a bad kafka.properties entry or a partition
// named twice; kUnavailable when watermarks or timestamps cannot be read
// within timeout_ms (applied per request / per probe round); kInternal for
// fatal client errors.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "kafka/source.h"

namespace ef {

struct TimeSeekOptions {
  // The skew bound (see above). 5 minutes covers producer clock drift and
  // retry delays seen in practice; 0 gives exact answers on ordered partitions.
  int64_t max_skew_ms = 5 * 60 * 1000;
  // false: skip ListOffsets and always read message timestamps (tests).
  bool ask_broker = true;
};

// What a call did, per entry of `partitions` (for tests and logs).
struct TimeSeekStats {
  std::vector<bool> broker_answered;  // the broker's answer was used
  std::vector<int> probes;            // message timestamps read for the entry
  int rounds = 0;                     // ReadMessageTimestamps calls made
};

StatusOr<std::vector<int64_t>> OffsetsForTime(const KafkaConfig& config,
                                              const std::vector<TopicPartition>& partitions,
                                              int64_t ts_ms, int timeout_ms,
                                              const TimeSeekOptions& options = {},
                                              TimeSeekStats* stats = nullptr);

StatusOr<std::vector<int64_t>> EndOffsetsForTime(const KafkaConfig& config,
                                                 const std::vector<TopicPartition>& partitions,
                                                 int64_t until_ms, int timeout_ms,
                                                 const TimeSeekOptions& options = {},
                                                 TimeSeekStats* stats = nullptr);

}  // namespace ef
