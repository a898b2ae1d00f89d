// ContentMetrics: the names and labels docs/GUIDE.md and docs/CONTENT.md list.
#include "metrics/content_metrics.h"

#include <prometheus/registry.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

namespace ef {
namespace {

TEST_CASE("content metrics: the documented names, results and reasons", "[metrics]") {
  prometheus::Registry registry;
  ContentMetrics m(registry);
  m.items_joined->Increment(2);
  m.rejected_by_reason[static_cast<size_t>(ItemRejectReason::kBadSimhash)]->Increment();
  std::map<std::string, std::set<std::string>> labels;  // family -> "label=value"
  std::map<std::string, double> values;                 // "family{label=value}" -> value
  for (const auto& family : registry.Collect()) {
    labels[family.name];
    for (const auto& metric : family.metric) {
      std::string key = family.name;
      for (const auto& l : metric.label) {
        labels[family.name].insert(l.name + "=" + l.value);
        key += "{" + l.name + "=" + l.value + "}";
      }
      values[key] = metric.counter.value + metric.gauge.value;
    }
  }
  CHECK(labels["exposure_filter_content_items_total"] ==
        std::set<std::string>{"result=new", "result=joined", "result=known"});
  CHECK(labels["exposure_filter_content_commits_total"] ==
        std::set<std::string>{"result=ok", "result=failed"});
  CHECK(labels.count("exposure_filter_content_assign_retries_total") == 1);
  CHECK(labels.count("exposure_filter_content_redis_up") == 1);
  std::set<std::string> reasons;
  for (size_t i = 1; i < static_cast<size_t>(ItemRejectReason::kCount_); ++i)
    reasons.insert(std::string("reason=") + ItemRejectReasonName(static_cast<ItemRejectReason>(i)));
  CHECK(labels["exposure_filter_content_rejected_total"] == reasons);
  CHECK(values["exposure_filter_content_items_total{result=joined}"] == 2);
  CHECK(values["exposure_filter_content_rejected_total{reason=bad_simhash}"] == 1);
  CHECK(values["exposure_filter_content_rejected_total{reason=not_json}"] == 0);
}

}  // namespace
}  // namespace ef
