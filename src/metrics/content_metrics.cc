#include "metrics/content_metrics.h"

namespace ef {

ContentMetrics::ContentMetrics(prometheus::Registry& r) {
  auto& items = prometheus::BuildCounter()
                    .Name("exposure_filter_content_items_total")
                    .Help("Items of the items topic assigned a cluster, by result")
                    .Register(r);
  items_new = &items.Add({{"result", "new"}});
  items_joined = &items.Add({{"result", "joined"}});
  items_known = &items.Add({{"result", "known"}});
  auto& rejects = prometheus::BuildCounter()
                      .Name("exposure_filter_content_rejected_total")
                      .Help("Messages of the items topic rejected as bad items, by reason")
                      .Register(r);
  // Index 0 (kNone) is not a rejection: it gets no series of its own.
  for (size_t i = 1; i < rejected_by_reason.size(); ++i)
    rejected_by_reason[i] =
        &rejects.Add({{"reason", ItemRejectReasonName(static_cast<ItemRejectReason>(i))}});
  rejected_by_reason[0] = rejected_by_reason[static_cast<size_t>(ItemRejectReason::kNotJson)];
  assign_retries = &prometheus::BuildCounter()
                        .Name("exposure_filter_content_assign_retries_total")
                        .Help("Batch assignments retried after a Redis failure")
                        .Register(r)
                        .Add({});
  auto& commits = prometheus::BuildCounter()
                      .Name("exposure_filter_content_commits_total")
                      .Help("Offset commits of the items topic's group, by result")
                      .Register(r);
  commits_ok = &commits.Add({{"result", "ok"}});
  commits_failed = &commits.Add({{"result", "failed"}});
  map_bad_values = &prometheus::BuildCounter()
                        .Name("exposure_filter_content_map_bad_values_total")
                        .Help(
                            "Content-map values read that were no map entry (another "
                            "program's value at <prefix>cm{item}): read as not indexed and "
                            "written over")
                        .Register(r)
                        .Add({});
  redis_up = &prometheus::BuildGauge()
                  .Name("exposure_filter_content_redis_up")
                  .Help("1 once Redis answered and while assignments succeed, 0 while they fail")
                  .Register(r)
                  .Add({});
}

}  // namespace ef
