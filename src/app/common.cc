#include "app/common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "config/loader.h"

namespace ef::app {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) {
  if (g_stop.exchange(true)) {
    const char msg[] =
        "exposure-filter: second signal, exiting now (uncommitted work is re-read)\n";
    [[maybe_unused]] ssize_t n = write(2, msg, sizeof msg - 1);
    _exit(130);
  }
}

}  // namespace

void AddConfigOptions(CLI::App* cmd, ConfigArgs* args, bool required) {
  auto* opt = cmd->add_option("-c,--config", args->path, "YAML config file (see docs/CONFIG.md)");
  if (required) opt->required();
  cmd->add_option("--set", args->overrides,
                  "Override a config key, e.g. --set filter.fpr=0.001 (repeatable)")
      ->type_name("KEY=VALUE");
}

StatusOr<Config> LoadOrReport(const ConfigArgs& args) {
  auto config = LoadConfig(args.path, args.overrides);
  if (!config.ok())
    std::fprintf(stderr, "exposure-filter: %s\n", config.status().message().c_str());
  return config;
}

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("exposure-filter");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

const std::atomic<bool>& InstallStopSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

bool StopRequested() { return g_stop.load(); }

void SleepUnlessStopped(int64_t ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!g_stop.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(ms, 50)));
}

void WarnLayoutV1(const Layout& configured) {
  spdlog::warn(
      "the layout stored at {}meta is version 1 (one stage): filters of users past "
      "filter.items_per_bucket do not grow and their false-positive rate climbs; run "
      "`exposure-filter layout upgrade -c <config>` (safe while `run` runs: writers switch to "
      "version {} within 10 s)",
      configured.prefix, configured.version());
}

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "exposure-filter: %s\n", status.message().c_str());
  return code;
}

}  // namespace ef::app
