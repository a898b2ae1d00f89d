// exposure-filter size: the sizing calculator.
#include <fmt/format.h>

#include <cstdio>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/size_report.h"
#include "bloom/sizing.h"
#include "config/loader.h"

namespace ef::app {
namespace {

struct SizeArgs {
  ConfigArgs config;
  uint64_t users = 1000000;
  int64_t items = 0;
  double fpr = -1;  // -1: not given
  std::string window;
  std::string bucket;
  bool json = false;
};

// The options are config keys: each goes through the loader's own parser and
// rule, then Validate, so `size` accepts exactly the layouts `run` accepts.
int Size(const SizeArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitUsage;
  struct Option {
    const char* name;
    const char* key;
    std::string text;  // "" = not given
  };
  const Option options[] = {
      {"-n", "filter.items_per_bucket", a.items ? std::to_string(a.items) : ""},
      {"--fpr", "filter.fpr", a.fpr >= 0 ? fmt::format("{}", a.fpr) : ""},  // shortest exact
      {"--window", "filter.window", a.window},
      {"--bucket", "filter.bucket", a.bucket},
  };
  for (const Option& o : options) {
    if (o.text.empty()) continue;
    Status st = ApplyConfigOverride(o.key, o.text, &*config);
    if (!st.ok()) return Fail(st.Prefixed(o.name), kExitUsage);
  }
  if (Status st = Validate(*config); !st.ok()) return Fail(st, kExitUsage);
  const FilterConfig& f = config->filter;
  auto s = ComputeSizing(f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds);
  if (!s.ok()) return Fail(s.status(), kExitUsage);
  if (a.json) {
    std::printf("%s\n", SizeReportJson(*s, f.items_per_bucket, f.fpr, f.window_seconds,
                                       f.bucket_seconds, a.users)
                            .dump(2)
                            .c_str());
  } else {
    std::fputs(
        FormatSizeReport(*s, f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds, a.users)
            .c_str(),
        stdout);
  }
  return kExitOk;
}

}  // namespace

Action AddSizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "size", "Sizing calculator: users, exposures per bucket, window, FPR -> m, k, memory");
  auto a = std::make_shared<SizeArgs>();
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("--users", a->users, "Number of users (default 1000000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-n,--items-per-bucket", a->items,
                  "Expected exposures per user per bucket (default: filter.items_per_bucket)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-p,--fpr", a->fpr,
                  "Target false-positive rate over the window (default: filter.fpr)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            double x = -1;
            try {
              x = std::stod(v);
            } catch (const std::exception&) {
            }
            return x > 0 && x < 1 ? "" : "must be in (0, 1), got " + v;
          },
          "in (0, 1)"));
  cmd->add_option("--window", a->window, "Window, e.g. 30d (default: filter.window)");
  cmd->add_option("--bucket", a->bucket, "Bucket span, e.g. 1d or 6h (default: filter.bucket)");
  cmd->add_flag("--json", a->json, "Print JSON");
  return [a] { return Size(*a); };
}

}  // namespace ef::app
