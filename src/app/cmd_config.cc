// exposure-filter config check: validate and print the effective config.
#include <cstdio>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/layout.h"
#include "config/loader.h"
#include "kafka/consumer_handle.h"
#include "redis/options.h"

namespace ef::app {

Action AddConfigCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Configuration tools");
  cmd->require_subcommand(1);
  auto* check = cmd->add_subcommand(
      "check",
      "Validate a config file (plus --set and environment) and print the effective "
      "config with secrets masked");
  auto args = std::make_shared<ConfigArgs>();
  AddConfigOptions(check, args.get(), false);
  return [args] {
    auto config = LoadOrReport(*args);
    if (!config.ok()) return kExitConfig;
    // What run, replay and serve check when they start, besides the file itself:
    // the layout the filter settings make, the Redis options, and librdkafka's
    // own checks of kafka.properties (a consumer handle made and destroyed).
    if (auto layout = LayoutFromConfig(config->filter); !layout.ok())
      return Fail(layout.status(), kExitConfig);
    if (auto redis = RedisOptionsFromConfig(config->redis); !redis.ok())
      return Fail(redis.status(), kExitConfig);
    if (Status kafka = kafka::CheckConsumerConfig(config->kafka); !kafka.ok())
      return Fail(kafka, kExitConfig);
    std::fputs(DumpConfig(*config).c_str(), stdout);
    std::fprintf(stderr, "exposure-filter: config %s is valid\n",
                 args->path.empty() ? "(defaults)" : args->path.c_str());
    return kExitOk;
  };
}

}  // namespace ef::app
