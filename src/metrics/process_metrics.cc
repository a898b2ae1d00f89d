#include "metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/scrape_sample.h"

namespace ef {
namespace {

namespace pm = prometheus;

// The fields of /proc/self/stat after the command name, from field 3 (state)
// on: fields[i] is field i + 3 of proc(5). Empty if unreadable.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  // The command name is in parentheses and may hold spaces and ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// proc(5) field number n (1-based) of /proc/self/stat as a number.
bool StatField(const std::vector<std::string>& fields, size_t n, double* out) {
  if (n < 3 || n - 3 >= fields.size()) return false;
  char* end = nullptr;
  *out = std::strtod(fields[n - 3].c_str(), &end);
  return end && *end == '\0';
}

// The boot time in seconds since the epoch (/proc/stat "btime"), or -1.
double BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return -1;
}

// Entries of /proc/self/fd, not counting the one used to list them; -1 if unreadable.
double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  const std::string own = std::to_string(dirfd(dir));
  double n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.' || own == e->d_name) continue;
    ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace

void AppendProcessFamilies(std::vector<pm::MetricFamily>* out) {
  const std::vector<std::string> stat = StatFields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  // proc(5): 14 utime, 15 stime, 22 starttime (clock ticks), 23 vsize (bytes),
  // 24 rss (pages).
  if (ticks > 0 && StatField(stat, 14, &utime) && StatField(stat, 15, &stime))
    AppendSample(out, "process_cpu_seconds_total",
                 "Total user and system CPU time spent in seconds.", pm::MetricType::Counter,
                 (utime + stime) / ticks);
  if (page > 0 && StatField(stat, 24, &rss))
    AppendSample(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
                 pm::MetricType::Gauge, rss * page);
  if (StatField(stat, 23, &vsize))
    AppendSample(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                 pm::MetricType::Gauge, vsize);
  if (const double fds = OpenFds(); fds >= 0)
    AppendSample(out, "process_open_fds", "Number of open file descriptors.", pm::MetricType::Gauge,
                 fds);
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    AppendSample(out, "process_max_fds", "Maximum number of open file descriptors.",
                 pm::MetricType::Gauge, static_cast<double>(lim.rlim_cur));
  if (const double boot = BootTime(); ticks > 0 && boot >= 0 && StatField(stat, 22, &start))
    AppendSample(out, "process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", pm::MetricType::Gauge,
                 boot + start / ticks);
}

}  // namespace ef
