#include "app/cli.h"

#include <CLI/CLI.hpp>

namespace ef {

int RunCli(int argc, char** argv) {
  CLI::App app{"exposure-filter: per-user Bloom filters of seen items in Redis, fed from Kafka"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}

}  // namespace ef
