#include "lag/exporter.h"

#include <limits>

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

LagExporter::LagExporter(prometheus::Registry& r)
    : committed_(Gauge(r, "exposure_filter_partition_committed_offset",
                       "The group's committed offset (-1: none), read from Kafka")),
      high_(Gauge(r, "exposure_filter_partition_high_watermark", "Partition high watermark")),
      lag_messages_(Gauge(r, "exposure_filter_partition_lag_messages",
                          "High watermark minus max(committed offset, low watermark)")),
      lag_seconds_(Gauge(r, "exposure_filter_partition_lag_seconds",
                         "Now minus the Kafka timestamp of the first uncommitted message; 0 "
                         "when caught up, NaN when it could not be read")),
      status_(Gauge(r, "exposure_filter_partition_status",
                    "1 for the partition's current status (OK, WARN, STALL, STOP, ERR)")),
      without_commits_(Gauge(r, "exposure_filter_lag_group_without_commits",
                             "1 when the group has no committed offset on the topic")),
      last_refresh_(Gauge(r, "exposure_filter_lag_last_refresh_timestamp_seconds",
                          "Wall time of the group's last successful read")),
      errors_(prometheus::BuildCounter()
                  .Name("exposure_filter_lag_refresh_errors_total")
                  .Help("Failed reads of a group's offsets or of the group list")
                  .Register(r)
                  .Add({})) {}

LagExporter::Series& LagExporter::Get(GroupSeries& g, const std::string& group,
                                      const TopicPartition& tp) {
  auto it = g.partitions.find(tp);
  if (it != g.partitions.end()) return it->second;
  const prometheus::Labels labels = {
      {"group", group}, {"topic", tp.topic}, {"partition", std::to_string(tp.partition)}};
  Series s{&committed_.Add(labels),
           &high_.Add(labels),
           &lag_messages_.Add(labels),
           &lag_seconds_.Add(labels),
           {}};
  for (PartitionStatus st : kAllStatuses) {
    auto l = labels;
    l["status"] = PartitionStatusName(st);
    s.status.push_back(&status_.Add(l));
  }
  return g.partitions.emplace(tp, std::move(s)).first->second;
}

void LagExporter::Remove(Series& s) {
  committed_.Remove(s.committed);
  high_.Remove(s.high);
  lag_messages_.Remove(s.lag_messages);
  lag_seconds_.Remove(s.lag_seconds);
  for (auto* g : s.status) status_.Remove(g);
}

void LagExporter::Publish(const ExportedGroup& in) {
  GroupSeries& g = groups_[in.group];
  std::set<TopicPartition> seen;
  for (const auto& p : in.partitions) {
    Series& s = Get(g, in.group, p.tp);
    s.committed->Set(static_cast<double>(p.committed));
    s.high->Set(static_cast<double>(p.high));
    s.lag_messages->Set(static_cast<double>(p.lag_messages));
    s.lag_seconds->Set(p.lag_seconds ? *p.lag_seconds : std::numeric_limits<double>::quiet_NaN());
    for (size_t i = 0; i < s.status.size(); ++i)
      s.status[i]->Set(kAllStatuses[i] == p.status ? 1 : 0);
    seen.insert(p.tp);
  }
  for (auto it = g.partitions.begin(); it != g.partitions.end();) {
    if (seen.count(it->first)) {
      ++it;
    } else {
      Remove(it->second);
      it = g.partitions.erase(it);
    }
  }
  for (const auto& [topic, has] : in.topic_has_commits) {
    auto& gauge = g.without_commits[topic];
    if (!gauge) gauge = &without_commits_.Add({{"group", in.group}, {"topic", topic}});
    gauge->Set(has ? 0 : 1);
  }
  if (!g.last_refresh) g.last_refresh = &last_refresh_.Add({{"group", in.group}});
  g.last_refresh->Set(static_cast<double>(in.at_ms) / 1000);
}

void LagExporter::Forget(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  for (auto& [tp, s] : it->second.partitions) Remove(s);
  for (auto& [topic, gauge] : it->second.without_commits) without_commits_.Remove(gauge);
  if (it->second.last_refresh) last_refresh_.Remove(it->second.last_refresh);
  groups_.erase(it);
}

std::set<std::string> LagExporter::groups() const {
  std::set<std::string> out;
  for (const auto& [name, g] : groups_) out.insert(name);
  return out;
}

}  // namespace ef
