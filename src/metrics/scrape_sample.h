// One unlabelled sample computed at scrape time (values read from elsewhere:
// /proc, a client's counters), appended to a Collect()ed family list. Used by
// the process metrics and by serve's /metrics.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace ef {

// Appends family `name` with one sample of `value` (a counter's or a gauge's,
// by `type`).
void AppendSample(std::vector<prometheus::MetricFamily>* out, const char* name, const char* help,
                  prometheus::MetricType type, double value);

}  // namespace ef
