#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "app/commands.h"
#include "app/common.h"
#include "metrics/build_info.h"

namespace ef {

int RunCli(int argc, char** argv) {
  CLI::App app{
      "exposure-filter: per-user Bloom filters of seen items in Redis, fed from Kafka.\n"
      "Docs: README.md, docs/CONFIG.md, docs/FORMAT.md"};
  app.set_version_flag("--version", BuildDescription());
  // At most one; "none" is reported after parsing so that an unknown word is
  // named as such rather than as a missing subcommand.
  app.require_subcommand(0, 1);
  const std::vector<std::pair<const char*, app::Action>> actions = {
      {"run", app::AddRunCommand(app)},
      {"check", app::AddCheckCommand(app)},
      {"size", app::AddSizeCommand(app)},
      {"config", app::AddConfigCommand(app)},
      {"dev-kafka", app::AddDevKafkaCommand(app)},
      {"loadgen", app::AddLoadgenCommand(app)},
      {"lag", app::AddLagCommand(app)},
      {"replay", app::AddReplayCommand(app)},
      {"bench-redis", app::AddBenchRedisCommand(app)},
      {"layout", app::AddLayoutCommand(app)},
      {"serve", app::AddServeCommand(app)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); any usage error exits 2.
    return app.exit(e) == 0 ? app::kExitOk : app::kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::fprintf(stderr,
                 "exposure-filter: a subcommand is required (run, check, serve, lag, replay, size, "
                 "layout, config, dev-kafka, loadgen, bench-redis); see --help\n");
    return app::kExitUsage;
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
