// exposure-filter size: the sizing calculator.
#include <cstdio>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/size_report.h"
#include "bloom/sizing.h"
#include "common/duration.h"

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

int Size(const SizeArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitUsage;
  FilterConfig f = config->filter;
  if (a.items) f.items_per_bucket = a.items;
  if (a.fpr >= 0) f.fpr = a.fpr;
  if (!a.window.empty()) {
    auto ms = ParseDurationMs(a.window);
    if (!ms.ok()) return Fail(ms.status().Prefixed("--window"), kExitUsage);
    f.window_seconds = *ms / 1000;
  }
  if (!a.bucket.empty()) {
    auto ms = ParseDurationMs(a.bucket);
    if (!ms.ok()) return Fail(ms.status().Prefixed("--bucket"), kExitUsage);
    f.bucket_seconds = *ms / 1000;
  }
  auto s = ComputeSizing(f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds);
  if (!s.ok()) return Fail(s.status(), kExitUsage);
  if (a.json) {
    std::printf("%s\n", SizeReportJson(*s, f.items_per_bucket, f.fpr, f.window_seconds,
                                       f.bucket_seconds, a.users)
                            .dump(2)
                            .c_str());
  } else {
    std::fputs(FormatSizeReport(*s, f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds,
                                a.users)
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
  cmd->add_option("--users", a->users, "Number of users (default 1000000)")->check(CLI::PositiveNumber);
  cmd->add_option("-n,--items-per-bucket", a->items,
                  "Expected exposures per user per bucket (default: filter.items_per_bucket)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-p,--fpr", a->fpr, "Target false-positive rate over the window (default: filter.fpr)")
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
