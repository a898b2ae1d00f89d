// The exposure-filter command line: one subcommand per invocation (CLI11).
#pragma once

namespace ef {

// Parses argv, runs the chosen subcommand, returns the process exit code.
int RunCli(int argc, char** argv);

}  // namespace ef
