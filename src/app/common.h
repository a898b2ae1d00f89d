// Shared by the subcommands: config loading with one-line errors, logging set-up,
// stop signals.
#pragma once

#include <prometheus/counter.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "app/logging.h"
#include "bloom/layout.h"
#include "common/status.h"
#include "config/config.h"
#include "exposure_filter/client.h"
#include "loadgen/generator.h"
#include "pipeline/clusters.h"
#include "pipeline/ingest.h"
#include "redis/options.h"

namespace ef::app {

// filter.near_duplicates (docs/CONTENT.md rule 5): the content index as the
// ingest pipeline's ClusterSource, set on `ingest` (its cache bounded by
// content.cache_items and content.cache_bytes) and
// logged; null (and nothing set) when the option is off. The source must outlive
// the ingest's run. kUnavailable when `redis.cluster: auto` finds no seed answering.
// Bad content-map values read (contentdb/index.h) add to `bad_values`.
StatusOr<std::unique_ptr<ClusterSource>> EnableNearDuplicates(const Config& config,
                                                              const RedisOptions& redis,
                                                              Ingest& ingest,
                                                              prometheus::Counter* bad_values);

// ContentIndexOptions::on_bad_value for the daemon's commands: counts each bad
// content-map value on `counter` (exposure_filter_content_map_bad_values_total)
// and warns, naming the key, at most every 10 s (with the count meanwhile).
std::function<void(const std::string&)> CountBadMapValues(prometheus::Counter* counter);

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
};
// Adds -c/--config and --set to a subcommand. --set takes one KEY=VALUE per
// occurrence (repeatable), so arguments after it stay positional.
void AddConfigOptions(CLI::App* cmd, ConfigArgs* args, bool required);

// Loads the config; on error prints one line "exposure-filter: <error>" to stderr
// (the caller exits kExitConfig).
StatusOr<Config> LoadOrReport(const ConfigArgs& args);

// A repeatable option (a vector) takes one value per occurrence: `--opt a b`
// leaves b to the positional arguments. Returns opt.
CLI::Option* OneValueEach(CLI::Option* opt);

// Validator of a whole number option in [min, max], checked on the text (CLI11
// alone saturates 99999999999999999999 to 2^64-1): "--users: must be a whole
// number from 1 to 18446744073709551615, got 0".
CLI::Validator WholeNumber(uint64_t min, uint64_t max);

// Validator of a real number option >= 0 ("--rate: must be a number >= 0, got -1").
CLI::Validator NonNegativeReal();

// The options of loadgen's generator that `loadgen` and `bench-redis` share:
// --users, --items, --zipf, --list-size, --list-fraction, --spread (into
// *spread, a duration the command parses; its current value is the default),
// --seed.
void AddGeneratorOptions(CLI::App* cmd, GeneratorOptions* gen, std::string* spread);

// A duration option (common/duration.h, e.g. 500ms, 3s, 2m; a plain number in
// seconds, fractions allowed): the milliseconds, or a kInvalidArgument naming
// `option` and the text. Must be > 0 unless allow_zero.
StatusOr<int64_t> DurationOption(const std::string& text, const char* option,
                                 bool allow_zero = false);

// What SIGHUP does to a command: stop as SIGTERM does (a closed terminal), or
// ask for a reload (run, serve, content: app/reload.h re-reads log.*).
enum class Hangup { kStop, kReload };

// First SIGINT/SIGTERM (and SIGHUP with Hangup::kStop) sets the flag; a second
// one exits at once (code 130): anything not committed is simply consumed again.
const std::atomic<bool>& InstallStopSignals(Hangup hangup = Hangup::kStop);
bool StopRequested();
// True once per SIGHUP received since the last call (Hangup::kReload).
bool TakeHangup();
// Sleeps up to ms, returning early when a stop was requested.
void SleepUnlessStopped(int64_t ms);

// Logs (warning) that Redis holds an earlier version of `configured`'s layout
// (`stored`: version 1, its stage 0 alone; or version 2, without rule 9), naming
// both versions, what writes keep doing until `exposure-filter layout upgrade`,
// and that command (whose --to defaults to filter.layout_version).
void WarnStoredLayout(const Layout& stored, const Layout& configured);

// The exit code for a failed exposure_filter::Client::Create or call (an
// exposure_filter::ErrorCode): invalid argument -> kExitConfig, unavailable ->
// kExitUnreachable, layout mismatch -> kExitLayout, permission denied ->
// kExitDenied, internal -> kExitFailure.
int ExitCodeForClientError(exposure_filter::ErrorCode code);

// Prints "exposure-filter: <message>" to stderr and returns `code`.
int Fail(const Status& status, int code = kExitFailure);

}  // namespace ef::app
