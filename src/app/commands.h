// One function per subcommand: each adds its CLI11 subcommand and returns the
// action to run when it was chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ef::app {

using Action = std::function<int()>;

Action AddRunCommand(CLI::App& app);
Action AddCheckCommand(CLI::App& app);
Action AddSizeCommand(CLI::App& app);
Action AddConfigCommand(CLI::App& app);
Action AddDevKafkaCommand(CLI::App& app);
Action AddLoadgenCommand(CLI::App& app);
Action AddReplayCommand(CLI::App& app);
Action AddLagCommand(CLI::App& app);
Action AddBenchRedisCommand(CLI::App& app);
Action AddLayoutCommand(CLI::App& app);
Action AddServeCommand(CLI::App& app);
Action AddContentCommand(CLI::App& app);

}  // namespace ef::app
