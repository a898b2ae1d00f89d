// The standard Prometheus process metrics, as the client guidelines name them
// (https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics),
// read from /proc at each call (a scrape), for the daemon's and serve's /metrics:
//   process_cpu_seconds_total      counter  user + system CPU time, seconds
//   process_resident_memory_bytes  gauge    resident set size, bytes
//   process_virtual_memory_bytes   gauge    virtual memory size, bytes
//   process_open_fds               gauge    open file descriptors (/proc/self/fd)
//   process_max_fds                gauge    the soft RLIMIT_NOFILE
//   process_start_time_seconds     gauge    start time, seconds since the Unix epoch
// (Debian 12's prometheus-cpp 1.0 ships no process collector.) Linux only: a
// value whose source cannot be read is left out, never reported as 0.
// Thread-safe (no state).
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace ef {

// Appends the families above to *out.
void AppendProcessFamilies(std::vector<prometheus::MetricFamily>* out);

}  // namespace ef
