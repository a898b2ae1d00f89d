// exposure-filter size: the sizing calculator.
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/layout.h"
#include "capacity/activity.h"
#include "capacity/size_report.h"
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
  std::optional<std::string> activity;  // not given: everybody at 1x
  bool json = false;
};

// The options are config keys: each goes through the loader's own parser and
// rule, then Validate, so `size` accepts exactly the layouts `run` accepts.
int Size(const SizeArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitConfig;
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
  if (Status st = CheckFilterSizing(config->filter); !st.ok()) return Fail(st, kExitUsage);
  const FilterConfig& f = config->filter;
  auto report = SizeReportInputFromConfig(f, a.users);
  if (!report.ok()) return Fail(report.status(), kExitUsage);
  SizeReportInput& in = *report;
  if (a.activity) {
    auto activity = ParseActivity(*a.activity);
    if (!activity.ok()) return Fail(activity.status().Prefixed("--activity"), kExitUsage);
    in.activity = *activity;
    in.activity_given = true;
  }
  if (a.json) {
    std::printf("%s\n", SizeReportJson(in).dump(2).c_str());
  } else {
    std::fputs(FormatSizeReport(in).c_str(), stdout);
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
      ->check(WholeNumber(1, UINT64_MAX));
  cmd->add_option("-n,--items-per-bucket", a->items,
                  "Expected exposures per user per bucket (default: filter.items_per_bucket)")
      ->check(WholeNumber(1, INT64_MAX));
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
  cmd->add_option("--activity", a->activity,
                  "Activity distribution for the memory estimate: zipf:S or MULTIPLE:PERCENT,... "
                  "(see below; default: every user at 1x)");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->footer(
      "Layout: the configured bit-layout contract: v3 (filter.layout_version 3, the default), a\n"
      "scalable filter of up to filter.stages stages (filter.growth, filter.k_step) with rule 9's\n"
      "positions; under filter.layout_version 2, v2 (rule 2's positions), or v1 when\n"
      "filter.stages is 1.\n"
      "Shows m, k, B, FPR and memory with every user at 1x items_per_bucket; for users at 1x, 4x,\n"
      "16x and 64x: stages used, bytes per bucket key, expected FPR per key and over the window,\n"
      "and past the stage limit the share of the user's items not written (they may read as\n"
      "unseen; the key keeps its FPR);\n"
      "with --activity: users past stage 0 and at the stage limit, and the memory of --users\n"
      "users. Memory assumes every user active in every bucket (an upper bound). FPRs are the\n"
      "ideal model (under layout version 2, measured rates run higher with small m: rule 2's\n"
      "floor, docs/FORMAT.md).\n"
      "--activity zipf:S      user of rank r of U at ((U+1)/(2r))^S x items_per_bucket: activity\n"
      "                       ~ r^-S as loadgen's Zipf users, the median user at 1x; 0 < S <= 5\n"
      "--activity M:P,...     P percent of the users at M x items_per_bucket, e.g.\n"
      "                       0.5:60,1:25,4:10,16:4,64:1 (shares sum to 100)\n");
  return [a] { return Size(*a); };
}

}  // namespace ef::app
