#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "app/commands.h"
#include "app/common.h"

namespace ef {

int RunCli(int argc, char** argv) {
  CLI::App app{
      "exposure-filter: per-user Bloom filters of seen items in Redis, fed from Kafka.\n"
      "Docs: README.md, docs/CONFIG.md, docs/FORMAT.md"};
  app.set_version_flag("--version", std::string("exposure-filter ") + EF_VERSION);
  app.require_subcommand(1, 1);
  const std::vector<std::pair<const char*, app::Action>> actions = {
      {"run", app::AddRunCommand(app)},           {"check", app::AddCheckCommand(app)},
      {"size", app::AddSizeCommand(app)},         {"config", app::AddConfigCommand(app)},
      {"dev-kafka", app::AddDevKafkaCommand(app)}, {"loadgen", app::AddLoadgenCommand(app)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const auto& [name, action] : actions) {
    if (app.got_subcommand(name)) {
      try {
        return action();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "exposure-filter %s: %s\n", name, e.what());
        return app::kExitFailure;
      }
    }
  }
  return app::kExitUsage;
}

}  // namespace ef
