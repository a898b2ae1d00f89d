// Shared by the subcommands: config loading with one-line errors, logging set-up,
// stop signals.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "common/status.h"
#include "config/config.h"

namespace ef::app {

// Exit codes: 0 ok, 1 runtime failure, 2 bad usage or config.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// Kafka or Redis refused us for good (authentication, authorization, unknown
// topic): a restart loop would not help; fix the credentials, ACLs or topic.
inline constexpr int kExitDenied = 3;

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
};
// Adds -c/--config and --set to a subcommand.
void AddConfigOptions(CLI::App* cmd, ConfigArgs* args, bool required);

// Loads the config; on error prints one line "exposure-filter: <error>" to stderr.
StatusOr<Config> LoadOrReport(const ConfigArgs& args);

// spdlog to stderr, with the given level name ("info", ...).
void SetUpLogging(const std::string& level);

// First SIGINT/SIGTERM sets the flag; a second one exits at once (code 130):
// anything not committed is simply consumed again.
const std::atomic<bool>& InstallStopSignals();
bool StopRequested();
// Sleeps up to ms, returning early when a stop was requested.
void SleepUnlessStopped(int64_t ms);

// Logs (warning) that Redis holds the version-1 meta of `configured`'s stage 0, so
// writes go to stage 0 alone until `exposure-filter layout upgrade`.
void WarnLayoutV1(const Layout& configured);

// Prints "exposure-filter: <message>" to stderr and returns `code`.
int Fail(const Status& status, int code = kExitFailure);

}  // namespace ef::app
