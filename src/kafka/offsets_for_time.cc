#include "kafka/offsets_for_time.h"

#include <algorithm>
#include <limits>
#include <string>

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"
#include "kafka/message_time.h"

namespace ef {
namespace {

std::string Name(const TopicPartition& tp) { return tp.topic + "/" + std::to_string(tp.partition); }

struct Watermarks {
  int64_t low = 0;
  int64_t high = 0;
};

// Watermarks of every partition and, when `ask_broker`, the broker's answer
// to "first offset with timestamp >= x" (-1 where it has none or failed).
Status QueryBroker(const KafkaConfig& config, const std::vector<TopicPartition>& partitions,
                   int64_t x, bool ask_broker, int timeout_ms, std::vector<Watermarks>* marks,
                   std::vector<int64_t>* broker) {
  auto handle = kafka::NewConsumerHandle(config);
  if (!handle.ok()) return handle.status();
  kafka::HandlePtr rk = std::move(handle.value());

  marks->assign(partitions.size(), {});
  broker->assign(partitions.size(), -1);
  for (size_t i = 0; i < partitions.size(); ++i) {
    const auto& tp = partitions[i];
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
        rk.get(), tp.topic.c_str(), tp.partition, &(*marks)[i].low, &(*marks)[i].high, timeout_ms);
    if (e) return kafka::FromKafkaError(e, "kafka: watermarks of " + Name(tp));
  }
  if (!ask_broker) return Status::Ok();

  kafka::PartitionListPtr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  // A negative timestamp would mean "latest"/"earliest" to ListOffsets.
  const int64_t query = std::max<int64_t>(x, 0);
  for (const auto& tp : partitions)
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition)->offset = query;
  // A failed request is not an error: the message timestamps answer instead.
  if (rd_kafka_offsets_for_times(rk.get(), list.get(), timeout_ms)) return Status::Ok();
  for (int j = 0; j < list->cnt; ++j) {
    const auto& el = list->elems[j];
    if (el.err) continue;
    for (size_t i = 0; i < partitions.size(); ++i) {
      if (partitions[i].partition == el.partition && partitions[i].topic == el.topic)
        (*broker)[i] = el.offset;
    }
  }
  return Status::Ok();
}

// The first offset (a local boundary, see the header) whose message timestamp
// is >= x, per partition.
StatusOr<std::vector<int64_t>> Seek(const KafkaConfig& config,
                                    const std::vector<TopicPartition>& partitions, int64_t x,
                                    int timeout_ms, const TimeSeekOptions& options,
                                    TimeSeekStats* stats) {
  const size_t n = partitions.size();
  TimeSeekStats local;
  if (stats == nullptr) stats = &local;
  *stats = TimeSeekStats{};
  stats->broker_answered.assign(n, false);
  stats->probes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (partitions[i] == partitions[j])
        return InvalidArgument("kafka: partition " + Name(partitions[i]) + " named twice");
    }
  }
  if (n == 0) return std::vector<int64_t>{};

  std::vector<Watermarks> marks;
  std::vector<int64_t> broker;
  EF_RETURN_IF_ERROR(
      QueryBroker(config, partitions, x, options.ask_broker, timeout_ms, &marks, &broker));

  // Per partition: the answer lies in [lo, hi]. Invariant: lo == low or
  // ts(lo - 1) < x; hi == high or ts(hi) >= x. `last` = high - 1 not probed yet.
  struct Search {
    int64_t lo = 0, hi = 0;
    bool last = false;
  };
  std::vector<Search> s(n);
  std::vector<int64_t> out(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Watermarks& m = marks[i];
    s[i] = {m.low, m.high, m.high > m.low};
    if (broker[i] >= m.low && broker[i] < m.high) {
      stats->broker_answered[i] = true;
      s[i] = {broker[i], broker[i], false};
    }
  }

  for (;;) {
    std::vector<PartitionOffset> at;
    std::vector<size_t> who;
    for (size_t i = 0; i < n; ++i) {
      if (s[i].last) {
        at.push_back({partitions[i], marks[i].high - 1, ""});
      } else if (s[i].lo < s[i].hi) {
        at.push_back({partitions[i], s[i].lo + (s[i].hi - s[i].lo) / 2, ""});
      } else {
        continue;
      }
      who.push_back(i);
    }
    if (at.empty()) break;
    auto ts = ReadMessageTimestamps(config, at, timeout_ms);
    if (!ts.ok()) return ts.status().Prefixed("kafka: seeking by time");
    ++stats->rounds;
    for (size_t k = 0; k < at.size(); ++k) {
      const size_t i = who[k];
      ++stats->probes[i];
      // ts of the first message at or after the offset; -1 (none / no
      // timestamp) counts as >= x: replaying more is the safe mistake.
      const int64_t t = ts.value()[k];
      const bool at_or_after = t < 0 || t >= x;
      if (s[i].last) {
        s[i].last = false;
        if (at_or_after) {
          s[i].hi = marks[i].high - 1;  // high - 1 is known to qualify
        } else {
          s[i].lo = marks[i].high;  // nothing qualifies (as far as the skew bound goes)
        }
      } else if (at_or_after) {
        s[i].hi = at[k].offset;
      } else {
        s[i].lo = at[k].offset + 1;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) out[i] = s[i].lo;
  return out;
}

}  // namespace

StatusOr<std::vector<int64_t>> OffsetsForTime(const KafkaConfig& config,
                                              const std::vector<TopicPartition>& partitions,
                                              int64_t ts_ms, int timeout_ms,
                                              const TimeSeekOptions& options,
                                              TimeSeekStats* stats) {
  const int64_t skew = std::max<int64_t>(options.max_skew_ms, 0);
  const int64_t x = ts_ms > std::numeric_limits<int64_t>::min() + skew
                        ? ts_ms - skew
                        : std::numeric_limits<int64_t>::min();
  return Seek(config, partitions, x, timeout_ms, options, stats);
}

StatusOr<std::vector<int64_t>> EndOffsetsForTime(const KafkaConfig& config,
                                                 const std::vector<TopicPartition>& partitions,
                                                 int64_t until_ms, int timeout_ms,
                                                 const TimeSeekOptions& options,
                                                 TimeSeekStats* stats) {
  const int64_t skew = std::max<int64_t>(options.max_skew_ms, 0);
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t x = until_ms < max - 1 - skew ? until_ms + 1 + skew : max;
  return Seek(config, partitions, x, timeout_ms, options, stats);
}

}  // namespace ef
