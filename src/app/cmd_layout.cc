// exposure-filter layout show|upgrade: the layout stored at <prefix>meta, and the
// explicit upgrade of a version-1 deployment to version 2 (docs/FORMAT.md,
// README runbook). Safe while `run` runs: version-2 daemons that found the
// version-1 meta write stage 0 only and switch within 10 s of the upgrade.
#include <cstdio>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "redis/connection.h"
#include "redis/meta.h"
#include "redis/options.h"

namespace ef::app {
namespace {

void PrintFields(const char* title, const std::map<std::string, std::string>& fields) {
  std::printf("%s\n", title);
  for (const auto& [f, v] : fields) std::printf("  %-15s %s\n", f.c_str(), v.c_str());
}

int Layouts(const ConfigArgs& args, bool upgrade, bool dry_run) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitUsage;
  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitUsage);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitUsage);
  auto conn = RedisConnection::Connect(*redis);
  if (!conn.ok()) return Fail(conn.status());
  const std::string key = MetaKey(layout->prefix);
  std::map<std::string, std::string> stored;
  Status st = ReadMetaFields(**conn, layout->prefix, &stored);
  if (!st.ok()) return Fail(st);
  if (stored.empty()) {
    std::printf("no layout stored at %s (nothing written with this prefix yet)\n", key.c_str());
  } else {
    PrintFields(("stored at " + key + ":").c_str(), stored);
  }
  PrintFields("configured:", layout->ToFields());
  if (!upgrade) {
    if (stored.empty()) return kExitOk;
    if (CompareLayout(stored, *layout, key).ok()) {
      std::printf("the stored layout is the configured one\n");
    } else if (IsUpgradableV1(stored, *layout)) {
      std::printf(
          "the stored layout is the configured one's version 1 (stage 0 alone): "
          "`exposure-filter layout upgrade` turns it into version %d\n",
          layout->version());
    } else {
      std::printf("%s\n", CompareLayout(stored, *layout, key).message().c_str());
      return kExitFailure;
    }
    return kExitOk;
  }
  if (dry_run) {
    if (!stored.empty() && IsUpgradableV1(stored, *layout) && layout->version() == 2) {
      std::printf("dry run: would replace the version-1 meta with the configured version 2\n");
      return kExitOk;
    }
  }
  if (!dry_run) {
    bool changed = false;
    st = UpgradeMeta(**conn, *layout, &changed);
    if (!st.ok())
      return Fail(st, st.code() == StatusCode::kUnavailable ? kExitFailure : kExitUsage);
    std::printf(changed ? "upgraded %s to version %d: running writers switch within 10 s, "
                          "readers on their next meta check\n"
                        : "%s is version %d already: nothing to do\n",
                key.c_str(), layout->version());
    return kExitOk;
  }
  Status check = CompareLayout(stored, *layout, key);
  std::printf("dry run: %s\n", check.ok() ? "already the configured layout, nothing to do"
                                          : check.message().c_str());
  return check.ok() ? kExitOk : kExitUsage;
}

}  // namespace

Action AddLayoutCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("layout", "The bit layout stored in Redis (<prefix>meta)");
  cmd->require_subcommand(1);
  auto* show = cmd->add_subcommand("show", "Print the stored and the configured layout");
  auto* upgrade = cmd->add_subcommand(
      "upgrade",
      "Upgrade a version-1 layout to the configured version 2 (scalable filters for heavy "
      "users); safe while `run` runs");
  auto show_args = std::make_shared<ConfigArgs>();
  auto up_args = std::make_shared<ConfigArgs>();
  auto dry_run = std::make_shared<bool>(false);
  AddConfigOptions(show, show_args.get(), false);
  AddConfigOptions(upgrade, up_args.get(), false);
  upgrade->add_flag("--dry-run", *dry_run, "Say what would change, change nothing");
  return [=] {
    if (show->parsed()) return Layouts(*show_args, false, false);
    return Layouts(*up_args, true, *dry_run);
  };
}

}  // namespace ef::app
