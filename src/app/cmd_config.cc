// exposure-filter config check: validate and print the effective config.
#include <cstdio>

#include "app/commands.h"
#include "app/common.h"
#include "config/loader.h"

namespace ef::app {

Action AddConfigCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Configuration tools");
  cmd->require_subcommand(1);
  auto* check = cmd->add_subcommand(
      "check", "Validate a config file (plus --set and environment) and print the effective "
               "config with secrets masked");
  auto args = std::make_shared<ConfigArgs>();
  AddConfigOptions(check, args.get(), false);
  return [args] {
    auto config = LoadOrReport(*args);
    if (!config.ok()) return kExitUsage;
    std::fputs(DumpConfig(*config).c_str(), stdout);
    std::fprintf(stderr, "exposure-filter: config %s is valid\n",
                 args->path.empty() ? "(defaults)" : args->path.c_str());
    return kExitOk;
  };
}

}  // namespace ef::app
