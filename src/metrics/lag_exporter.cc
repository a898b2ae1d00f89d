#include "metrics/lag_exporter.h"

#include <limits>

namespace ef {
namespace {

prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

LagExporter::LagExporter(prometheus::Registry& r)
    : gauges_(r, {"The group's committed offset (-1: none), read from Kafka",
                  "High watermark minus max(committed offset, low watermark)",
                  "Now minus the Kafka timestamp of the first uncommitted message; 0 when caught "
                  "up, NaN when it could not be read"}),
      without_commits_(Gauge(r, "exposure_filter_lag_group_without_commits",
                             "1 when the group has no committed offset on the topic")),
      last_refresh_(Gauge(r, "exposure_filter_lag_last_refresh_timestamp_seconds",
                          "Wall time of the group's last successful read")),
      errors_(prometheus::BuildCounter()
                  .Name("exposure_filter_lag_refresh_errors_total")
                  .Help("Failed reads of a group's offsets or of the group list")
                  .Register(r)
                  .Add({})) {}

void LagExporter::Publish(const ExportedGroup& in) {
  GroupSeries& g = groups_[in.group];
  std::set<TopicPartition> seen;
  for (const auto& p : in.partitions) {
    auto it = g.partitions.find(p.tp);
    if (it == g.partitions.end())
      it = g.partitions.emplace(p.tp, gauges_.Add(in.group, p.tp)).first;
    const PartitionGauges::Series& s = it->second;
    s.committed->Set(static_cast<double>(p.committed));
    s.high->Set(static_cast<double>(p.high));
    s.lag_messages->Set(static_cast<double>(p.lag_messages));
    s.lag_seconds->Set(p.lag_seconds ? *p.lag_seconds : std::numeric_limits<double>::quiet_NaN());
    PartitionGauges::SetStatus(s, p.status);
    seen.insert(p.tp);
  }
  for (auto it = g.partitions.begin(); it != g.partitions.end();) {
    if (seen.count(it->first)) {
      ++it;
    } else {
      gauges_.Remove(it->second);
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
  for (auto& [tp, s] : it->second.partitions) gauges_.Remove(s);
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
