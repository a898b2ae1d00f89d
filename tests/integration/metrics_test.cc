// The daemon's HTTP endpoints and per-partition status on real parts.
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include "bloom/layout.h"
#include "common/clock.h"
#include "read/bloom_reader.h"
#include "support/scrape.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

using Http = HttpReply;
Http Get(int port, const std::string& path) { return HttpGet(port, path); }

// Sum of a metric's samples whose line contains every fragment.
double Metric(const std::string& text, const std::string& name,
              const std::vector<std::string>& fragments = {}) {
  double sum = 0;
  size_t pos = 0;
  while ((pos = text.find(name, pos)) != std::string::npos) {
    size_t eol = text.find('\n', pos);
    const bool line_start = pos == 0 || text[pos - 1] == '\n';  // not a # HELP/# TYPE line
    std::string line = text.substr(pos, eol - pos);
    pos = eol;
    if (!line_start) continue;
    if (line.size() <= name.size() || (line[name.size()] != '{' && line[name.size()] != ' '))
      continue;
    bool all = true;
    for (const auto& f : fragments) all &= line.find(f) != std::string::npos;
    if (all) sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// The value of a /proc/<pid>/status field in kB ("VmRSS"), or -1.
double StatusKb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1));
  return -1;
}

// utime + stime of `pid` in seconds, from /proc/<pid>/stat (fields 14 and 15,
// counted after the ')' that ends the command name); -1 if unreadable.
double ProcCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));  // from field 3 (state) on
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// GET /metrics bracketed by the kernel's CPU time of `pid` just before and just
// after: *cpu_before <= the scrape's process_cpu_seconds_total <= *cpu_after.
Http ScrapeWithCpu(int port, pid_t pid, double* cpu_before, double* cpu_after) {
  *cpu_before = ProcCpuSeconds(pid);
  Http h = Get(port, "/metrics");
  *cpu_after = ProcCpuSeconds(pid);
  return h;
}

// The process_* families of one scrape of `pid`'s /metrics, checked for
// plausibility against what the kernel says of that process and the test's clocks.
void CheckProcessMetrics(const std::string& what, pid_t pid, const std::string& body,
                         double started_after_s) {
  INFO(what << " /metrics:\n" << body);
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"})
    CHECK_THAT(body, Catch::Contains(std::string("\n") + name + " "));
  CHECK_THAT(body, Catch::Contains("# TYPE process_cpu_seconds_total counter"));
  CHECK_THAT(body, Catch::Contains("# TYPE process_resident_memory_bytes gauge"));
  const double now_s = static_cast<double>(SystemClock().NowMs()) / 1000;
  const double start = Metric(body, "process_start_time_seconds");
  CHECK(start >= started_after_s - 1);  // clock ticks: 10 ms resolution, btime whole seconds
  CHECK(start <= now_s + 1);
  const double cpu = Metric(body, "process_cpu_seconds_total");
  CHECK(cpu >= 0);  // clock ticks: an idle serve may not have used one yet
  CHECK(cpu <= (now_s - started_after_s + 1) * std::thread::hardware_concurrency());
  // The child's limit is the one it inherited from this test.
  rlimit lim{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &lim) == 0);
  CHECK(Metric(body, "process_max_fds") == static_cast<double>(lim.rlim_cur));
  const double fds = Metric(body, "process_open_fds");
  CHECK(fds >= 4);  // stdin, stdout, stderr and the listening socket at least
  CHECK(fds <= Metric(body, "process_max_fds"));
  const double rss = Metric(body, "process_resident_memory_bytes");
  const double vm_rss = StatusKb(pid, "VmRSS") * 1024;
  CHECK(rss > 1 << 20);
  CHECK(rss > vm_rss / 2);
  CHECK(rss < vm_rss * 2);
  const double vsize = Metric(body, "process_virtual_memory_bytes");
  CHECK(vsize >= rss);
  CHECK(vsize == Approx(StatusKb(pid, "VmSize") * 1024).epsilon(0.5));
}

}  // namespace

TEST_CASE("metrics: valid Prometheus text, /healthz, and /readyz follows Redis going away and back",
          "[integration][metrics]") {
  Stack stack;
  const int port = FreePort();
  const int64_t now = SystemClock().NowMs();
  auto before = MakeEvents("m1", 20, 10, 0, now, 11);  // event time = now
  stack.Produce(before);
  auto daemon = stack.StartDaemon(
      stack.WriteConfig("ef.yaml", "metrics:\n  listen: \"127.0.0.1:" + std::to_string(port) +
                                       "\"\n  refresh_interval: 100ms\n  status_window: 3\n"));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));

  // Valid exposition format, checked by Prometheus' own parser and linter.
  Http metrics = Get(port, "/metrics");
  REQUIRE(metrics.status == 200);
  auto promtool = RunCommand({"promtool", "check", "metrics"}, metrics.body);
  INFO(promtool.out);
  CHECK(promtool.code == 0);
  CHECK(Metric(metrics.body, "exposure_filter_events_total", {"written"}) ==
        static_cast<double>(before.size()));
  CHECK(Get(port, "/healthz").status == 200);
  CHECK(WaitFor([&] { return Get(port, "/readyz").status == 200; }, 10s));
  CHECK(Get(port, "/nope").status == 404);

  // Redis goes away while events keep coming: STALL and 503 within a few intervals.
  stack.redis().Stop();
  auto during = MakeEvents("m2", 20, 10, 0, SystemClock().NowMs(), 12);
  stack.Produce(during);
  std::string text;
  const bool stalled = WaitFor(
      [&] {
        text = Get(port, "/metrics").body;
        return Metric(text, "exposure_filter_partition_status", {"STALL"}) >= 1;
      },
      30s);
  if (!stalled)
    std::fprintf(stderr, "--- metrics ---\n%s\n--- daemon ---\n%s\n", text.c_str(),
                 daemon->Output().c_str());
  REQUIRE(stalled);
  CHECK(Metric(text, "exposure_filter_redis_up") == 0);
  // Paused partitions still report fresh watermarks: lag counts every unwritten event.
  CHECK(WaitFor(
      [&] {
        return Metric(Get(port, "/metrics").body, "exposure_filter_partition_lag_messages") ==
               static_cast<double>(during.size());
      },
      10s));
  Http ready = Get(port, "/readyz");
  CHECK(ready.status == 503);
  CHECK(ready.body.find("STALL") != std::string::npos);

  // Redis is back: everything written, partitions OK, ready again.
  stack.redis().Start();
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(WaitFor([&] { return Get(port, "/readyz").status == 200; }, 30s));
  text = Get(port, "/metrics").body;
  CHECK(Metric(text, "exposure_filter_partition_status", {"status=\"OK\""}) ==
        Metric(text, "exposure_filter_partition_status"));
  CHECK(Metric(text, "exposure_filter_partition_lag_messages") == 0);
  CHECK(Metric(text, "exposure_filter_redis_up") == 1);
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  FilterConfig f;
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  auto conn = stack.redis().Connect();
  CHECK(MissingItems(*conn, *layout, before).empty());
  CHECK(MissingItems(*conn, *layout, during).empty());
}

// Issue 9, defect 6: with Kafka unreachable the daemon used to answer /readyz
// 200 for the whole run, with no partition at all.
TEST_CASE("metrics: /readyz is 503 while no partition is assigned (Kafka unreachable)",
          "[integration][metrics][readiness]") {
  Stack stack;
  const int port = FreePort();
  auto daemon = stack.StartDaemon(stack.WriteConfig(
      "ef.yaml", "kafka:\n  bootstrap_servers: \"127.0.0.1:1\"\nmetrics:\n  listen: \"127.0.0.1:" +
                     std::to_string(port) +
                     "\"\n  refresh_interval: 100ms\n  unassigned_grace: 2s\n"));
  Http ready;
  const bool not_ready = WaitFor(
      [&] {
        ready = Get(port, "/readyz");
        return ready.status == 503 && ready.body.find("no partition assigned") != std::string::npos;
      },
      30s);
  INFO("last /readyz: " << ready.status << " " << ready.body << "\ndaemon:\n" << daemon->Output());
  CHECK(not_ready);
  CHECK(Get(port, "/healthz").status == 200);  // alive, just not useful

  // Issue 26, item 8: a second daemon on the same metrics.listen started (httplib
  // set SO_REUSEPORT) and scrapes alternated between the two. It exits 4 (config) with
  // a one-line error naming the address.
  auto second = stack.StartDaemon(stack.dir().File("ef.yaml"), "second.log");
  INFO("second daemon:\n" << second->Output());
  CHECK(second->Wait(30s) == std::optional<int>(4));
  CHECK_THAT(second->Output(), Catch::Contains("metrics.listen 127.0.0.1:" + std::to_string(port) +
                                               ": address already in use"));
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

// Issue 27: the standard process_* metrics on the daemon's and serve's /metrics
// (there were none).
TEST_CASE("metrics: process_* metrics of the daemon and serve are plausible and valid",
          "[integration][metrics][process]") {
  Stack stack;
  const int port = FreePort();
  const double started_after_s = static_cast<double>(SystemClock().NowMs()) / 1000;
  stack.Produce(MakeEvents("p1", 5, 2, 0, SystemClock().NowMs(), 7));
  auto daemon = stack.StartDaemon(stack.WriteConfig(
      "ef.yaml", "metrics:\n  listen: \"127.0.0.1:" + std::to_string(port) + "\"\n"));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  // The kernel's account, not "> 0": a process that used less than a clock tick
  // (10 ms) may read 0, which a loaded machine made happen (issue 33).
  double cpu_before = 0, cpu_after = 0;
  Http metrics = ScrapeWithCpu(port, daemon->pid(), &cpu_before, &cpu_after);
  REQUIRE(metrics.status == 200);
  CheckProcessMetrics("daemon", daemon->pid(), metrics.body, started_after_s);
  REQUIRE(cpu_before >= 0);
  CHECK(Metric(metrics.body, "process_cpu_seconds_total") >= cpu_before);
  CHECK(Metric(metrics.body, "process_cpu_seconds_total") <= cpu_after);
  auto promtool = RunCommand({"promtool", "check", "metrics"}, metrics.body);
  INFO(promtool.out);
  CHECK(promtool.code == 0);

  const int serve_port = FreePort();
  auto serve = StartServe(stack, stack.dir().File("ef.yaml"), serve_port,
                          {"metrics.listen=127.0.0.1:" + std::to_string(FreePort())});
  Http served = ScrapeWithCpu(serve_port, serve->pid(), &cpu_before, &cpu_after);
  REQUIRE(served.status == 200);
  CheckProcessMetrics("serve", serve->pid(), served.body, started_after_s);
  REQUIRE(cpu_before >= 0);
  CHECK(Metric(served.body, "process_cpu_seconds_total") >= cpu_before);
  CHECK(Metric(served.body, "process_cpu_seconds_total") <= cpu_after);
  promtool = RunCommand({"promtool", "check", "metrics"}, served.body);
  INFO(promtool.out);
  CHECK(promtool.code == 0);
  CHECK(serve->Stop(SIGTERM, 30s) == 0);
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test
