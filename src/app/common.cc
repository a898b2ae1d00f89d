#include "app/common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "bloom/layout.h"
#include "common/duration.h"
#include "config/loader.h"
#include "content/block_index.h"
#include "contentdb/index.h"

namespace ef::app {

std::function<void(const std::string&)> CountBadMapValues(prometheus::Counter* counter) {
  struct State {
    std::chrono::steady_clock::time_point last{};
    uint64_t since = 0;
  };
  auto state = std::make_shared<State>();
  return [counter, state](const std::string& key) {
    if (counter) counter->Increment();
    ++state->since;
    const auto now = std::chrono::steady_clock::now();
    if (state->last != std::chrono::steady_clock::time_point{} &&
        now - state->last < std::chrono::seconds(10))
      return;
    spdlog::warn(
        "content map: {} holds no map entry (docs/CONTENT.md rule 4): its item counts as not "
        "indexed ({} such value(s) since the last warning; "
        "exposure_filter_content_map_bad_values_total)",
        key, state->since);
    state->last = now;
    state->since = 0;
  };
}

StatusOr<std::unique_ptr<ClusterSource>> EnableNearDuplicates(const Config& config,
                                                              const RedisOptions& redis,
                                                              Ingest& ingest,
                                                              prometheus::Counter* bad_values) {
  if (!config.filter.near_duplicates) return std::unique_ptr<ClusterSource>();
  auto runner = contentdb::ConnectRunner(redis);
  if (!runner.ok()) return runner.status().Prefixed("content map (filter.near_duplicates)");
  contentdb::ContentIndexOptions options = contentdb::ContentIndexOptionsFrom(config);
  options.on_bad_value = CountBadMapValues(bad_values);
  auto index = contentdb::ContentIndex::Make(std::move(options), std::move(*runner));
  if (!index.ok()) return index.status();
  std::unique_ptr<ClusterSource> source = std::make_unique<ContentIndexClusters>(std::move(*index));
  ingest.SetClusters(
      source.get(), contentdb::ClusterCacheLimits{static_cast<size_t>(config.content.cache_items),
                                                  static_cast<size_t>(config.content.cache_bytes)});
  spdlog::info(
      "near-duplicates: exposures also set their content cluster (cache up to {} items and {} "
      "bytes)",
      config.content.cache_items, config.content.cache_bytes);
  return source;
}
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_hangup{false};

void OnHangup(int) { g_hangup.store(true); }

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
  OneValueEach(cmd->add_option("--set", args->overrides,
                               "Override a config key, e.g. --set filter.fpr=0.001 (repeatable, "
                               "one KEY=VALUE each)")
                   ->type_name("KEY=VALUE"));
}

CLI::Option* OneValueEach(CLI::Option* opt) {
  return opt->expected(1)->allow_extra_args(false)->multi_option_policy(
      CLI::MultiOptionPolicy::TakeAll);
}

CLI::Validator WholeNumber(uint64_t min, uint64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        uint64_t n = 0;
        const char* end = v.data() + v.size();
        const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        const auto [ptr, ec] = std::from_chars(v.data(), end, n);
        if (!digits || ec != std::errc() || ptr != end || n < min || n > max) {
          return "must be a whole number from " + std::to_string(min) + " to " +
                 std::to_string(max) + ", got " + v;
        }
        return "";
      },
      range);
}

CLI::Validator NonNegativeReal() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(x >= 0) || x > 1e300)
          return "must be a number >= 0, got " + v;
        return "";
      },
      ">= 0");
}

void AddGeneratorOptions(CLI::App* cmd, GeneratorOptions* gen, std::string* spread) {
  cmd->add_option("--users", gen->users, "Distinct users (Zipf)")
      ->capture_default_str()
      ->check(WholeNumber(1, UINT64_MAX));
  cmd->add_option("--items", gen->items, "Distinct items (Zipf)")
      ->capture_default_str()
      ->check(WholeNumber(1, UINT64_MAX));
  cmd->add_option("--zipf", gen->zipf_s, "Zipf exponent")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 5.0));
  cmd->add_option("--list-size", gen->list_size, "Items per list-form event")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--list-fraction", gen->list_fraction, "Share of events in list form (0..1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spread", *spread, "Spread event times over the last DURATION, e.g. 3d")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--seed", gen->seed, "Random seed")
      ->capture_default_str()
      ->check(WholeNumber(0, UINT64_MAX));
}

StatusOr<int64_t> DurationOption(const std::string& text, const char* option, bool allow_zero) {
  auto ms = ParseDurationOptionMs(text);
  if (!ms.ok()) return ms.status().Prefixed(option);
  if (*ms == 0 && !allow_zero)
    return InvalidArgument(std::string(option) + ": must be positive, got " + text);
  return ms;
}

StatusOr<Config> LoadOrReport(const ConfigArgs& args) {
  auto config = LoadConfig(args.path, args.overrides);
  if (config.ok()) {
    if (Status st = CheckFilterSizing(config->filter); !st.ok()) config = st;
  }
  if (config.ok()) {
    // content.index_blocks' table count (the config room knows no index arithmetic).
    if (Status st = content::BlockScheme::Check(static_cast<int>(config->content.index_blocks),
                                                static_cast<int>(config->content.max_distance));
        !st.ok())
      config = st;
  }
  if (!config.ok()) {
    std::fprintf(stderr, "exposure-filter: %s\n", config.status().message().c_str());
    return config;
  }
  // The config's logging from here on (a command may change the level after),
  // so that the warnings below are written in the configured format.
  SetUpLogging(config->log.level, config->log.format);
  for (const std::string& warning : ConfigWarnings(*config, environ)) spdlog::warn("{}", warning);
  return config;
}

const std::atomic<bool>& InstallStopSignals(Hangup hangup) {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction hup = sa;
  if (hangup == Hangup::kReload) hup.sa_handler = OnHangup;
  sigaction(SIGHUP, &hup, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

bool StopRequested() { return g_stop.load(); }

bool TakeHangup() { return g_hangup.exchange(false); }

void SleepUnlessStopped(int64_t ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!g_stop.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(ms, 50)));
}

void WarnStoredLayout(const Layout& stored, const Layout& configured) {
  spdlog::warn(
      "the layout stored at {}meta is version {}, the configured one is version {} "
      "(filter.layout_version): {}; run `exposure-filter layout upgrade -c <config>` (--to {} "
      "by default; safe while `run` runs: writers switch within 10 s)",
      configured.prefix, stored.version(), configured.version(),
      stored.version() == 1
          ? "filters of users past filter.items_per_bucket do not grow and their false-positive "
            "rate climbs"
          : "buckets keep rule 2's positions, not rule 9's",
      configured.version());
}

int ExitCodeForClientError(exposure_filter::ErrorCode code) {
  using exposure_filter::ErrorCode;
  switch (code) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kInvalidArgument:
      return kExitConfig;
    case ErrorCode::kUnavailable:
      return kExitUnreachable;
    case ErrorCode::kLayoutMismatch:
      return kExitLayout;
    case ErrorCode::kPermissionDenied:
      return kExitDenied;
    default:
      return kExitFailure;
  }
}

int Fail(const Status& status, int code) {
  if (LogFormat() == "json") {  // one JSON line like every other, whatever the level
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::fprintf(stderr, "%s\n", JsonLogLine(now.count(), "error", status.message()).c_str());
  } else {
    std::fprintf(stderr, "exposure-filter: %s\n", status.message().c_str());
  }
  return code;
}

}  // namespace ef::app
