// The Prometheus metrics of `exposure-filter content` (the items-topic consumer,
// docs/CONTENT.md "Items topic"); names start with exposure_filter_content_.
// Thread-safe as prometheus-cpp metrics are.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>

#include "event/item_decoder.h"

namespace ef {

struct ContentMetrics {
  explicit ContentMetrics(prometheus::Registry& registry);

  // exposure_filter_content_items_total{result}: items assigned a cluster:
  // "new" (its own cluster), "joined" (an existing cluster), "known" (already in
  // the map: redelivery or a repeat).
  prometheus::Counter* items_new;
  prometheus::Counter* items_joined;
  prometheus::Counter* items_known;
  // exposure_filter_content_rejected_total{reason}: messages rejected as bad items.
  std::array<prometheus::Counter*, static_cast<size_t>(ItemRejectReason::kCount_)>
      rejected_by_reason;
  prometheus::Counter* assign_retries;  // exposure_filter_content_assign_retries_total
  prometheus::Counter* commits_ok;      // exposure_filter_content_commits_total{result="ok"}
  prometheus::Counter* commits_failed;  // exposure_filter_content_commits_total{result="failed"}
  prometheus::Gauge* redis_up;          // exposure_filter_content_redis_up
  // exposure_filter_content_map_bad_values_total: map values that were no map
  // entry, read as "not indexed" and written over (contentdb/index.h).
  prometheus::Counter* map_bad_values;
};

}  // namespace ef
