// The exit codes of every exposure-filter command: the one table (documented in
// docs/CLI.md#exit-codes; the systemd units' RestartPreventExitStatus= is
// kNoRestartCodes, both checked by tests).
#pragma once

#include <array>

#include "common/status.h"

namespace ef::app {

// Done: the command did what it was asked (also `run`/`serve` stopped by a signal).
inline constexpr int kExitOk = 0;
// A runtime failure not covered below (e.g. Kafka lost the final commit, a write
// failed for good mid-run). A restart may help.
inline constexpr int kExitFailure = 1;
// Bad command line: unknown command or option, a missing or malformed option
// value, a missing argument. Fix the command.
inline constexpr int kExitUsage = 2;
// Refused for good by Redis or Kafka: authentication, authorization (ACL,
// NOPERM), unknown topic. Fix the credentials, ACLs or topic.
inline constexpr int kExitDenied = 3;
// The configuration (file, --set, environment) is invalid, or what it names
// cannot be used (e.g. metrics.listen already in use). Fix the config.
inline constexpr int kExitConfig = 4;
// The layout stored in Redis (<prefix>meta) disagrees with the configured one:
// fix filter.* / filter.key_prefix, or `layout upgrade` (docs/FORMAT.md).
inline constexpr int kExitLayout = 5;
// Redis or Kafka did not answer within the timeout when the command started.
// A restart (later) may help.
inline constexpr int kExitUnreachable = 6;
// The command worked and the data it examined is not OK: `lag --check` found a
// partition WARN, STALL, STOP or ERR.
inline constexpr int kExitData = 7;
// Stopped by SIGINT/SIGTERM before it finished (replay, `lag --check --watch`);
// 128 + SIGINT as a shell reports it.
inline constexpr int kExitInterrupted = 130;

// The codes a restart cannot cure: a person must act. The systemd units list
// exactly these in RestartPreventExitStatus= (tests/integration/stack_files_test.cc).
inline constexpr std::array<int, 4> kNoRestartCodes = {kExitUsage, kExitDenied, kExitConfig,
                                                       kExitLayout};

// The table as data (docs/CLI.md#exit-codes shows it; tests/unit/app/exit_codes_test.cc
// compares the two): code, name, whether systemd restarts the unit on it.
struct ExitCodeRow {
  int code;
  const char* name;
  bool restart;
};
inline constexpr std::array<ExitCodeRow, 9> kExitCodeTable = {{
    {kExitOk, "ok", false},
    {kExitFailure, "failure", true},
    {kExitUsage, "usage", false},
    {kExitDenied, "denied", false},
    {kExitConfig, "config", false},
    {kExitLayout, "layout", false},
    {kExitUnreachable, "unreachable", true},
    {kExitData, "data", true},
    {kExitInterrupted, "interrupted", true},
}};

// The exit code for an error met while starting against Redis or Kafka:
// kPermissionDenied -> kExitDenied, kUnavailable -> kExitUnreachable,
// kFailedPrecondition (a stored layout that disagrees) -> kExitLayout,
// kInvalidArgument -> kExitConfig, anything else -> kExitFailure.
inline int ExitCodeForStart(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kPermissionDenied:
      return kExitDenied;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    case StatusCode::kFailedPrecondition:
      return kExitLayout;
    case StatusCode::kInvalidArgument:
      return kExitConfig;
    default:
      return kExitFailure;
  }
}

// The exit code for the error that ended a run of the pipeline (`run`,
// `replay`): refused credentials or ACL (kPermissionDenied) -> kExitDenied, the
// stored layout changed under it (kFailedPrecondition) -> kExitLayout: a restart
// cannot help; anything else (e.g. the final commit lost) -> kExitFailure.
inline int ExitCodeForPipeline(const Status& status) {
  const StatusCode c = status.code();
  return c == StatusCode::kOk || c == StatusCode::kPermissionDenied ||
                 c == StatusCode::kFailedPrecondition
             ? ExitCodeForStart(status)
             : kExitFailure;
}

}  // namespace ef::app
