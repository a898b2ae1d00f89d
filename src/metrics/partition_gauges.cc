#include "metrics/partition_gauges.h"

namespace ef {
namespace {

prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

constexpr PartitionStatus kAllStatuses[] = {PartitionStatus::kOk, PartitionStatus::kWarn,
                                            PartitionStatus::kStall, PartitionStatus::kStop,
                                            PartitionStatus::kErr};

}  // namespace

PartitionGauges::PartitionGauges(prometheus::Registry& r, const PartitionGaugeHelp& help)
    : committed_(Gauge(r, "exposure_filter_partition_committed_offset", help.committed)),
      high_(Gauge(r, "exposure_filter_partition_high_watermark", "Partition high watermark")),
      lag_messages_(Gauge(r, "exposure_filter_partition_lag_messages", help.lag_messages)),
      lag_seconds_(Gauge(r, "exposure_filter_partition_lag_seconds", help.lag_seconds)),
      status_(Gauge(r, "exposure_filter_partition_status",
                    "1 for the partition's current status (OK, WARN, STALL, STOP, ERR)")) {}

prometheus::Labels PartitionGauges::Labels(const std::string& group, const TopicPartition& tp) {
  return {{"group", group}, {"topic", tp.topic}, {"partition", std::to_string(tp.partition)}};
}

PartitionGauges::Series PartitionGauges::Add(const std::string& group, const TopicPartition& tp) {
  const prometheus::Labels labels = Labels(group, tp);
  Series s;
  s.committed = &committed_.Add(labels);
  s.high = &high_.Add(labels);
  s.lag_messages = &lag_messages_.Add(labels);
  s.lag_seconds = &lag_seconds_.Add(labels);
  for (PartitionStatus st : kAllStatuses) {
    auto l = labels;
    l["status"] = PartitionStatusName(st);
    s.status.push_back(&status_.Add(l));
  }
  return s;
}

void PartitionGauges::Remove(const Series& s) {
  committed_.Remove(s.committed);
  high_.Remove(s.high);
  lag_messages_.Remove(s.lag_messages);
  lag_seconds_.Remove(s.lag_seconds);
  for (auto* g : s.status) status_.Remove(g);
}

void PartitionGauges::SetStatus(const Series& s, PartitionStatus st) {
  for (size_t i = 0; i < s.status.size(); ++i) s.status[i]->Set(kAllStatuses[i] == st ? 1 : 0);
}

}  // namespace ef
