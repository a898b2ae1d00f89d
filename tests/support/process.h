// A child process (fork + exec) with stdout+stderr captured to a file; killed
// (SIGKILL) on destruction if still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ef::test {

class Process {
 public:
  Process(std::vector<std::string> argv, std::string log_path);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Waits for exit; the exit code (128+signal if killed), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Sends sig and waits; SIGKILL after the timeout.
  int Stop(int sig, std::chrono::milliseconds timeout);
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Runs a command to completion (killed after 2 minutes); returns exit code and
// output: stdout then stderr, or stdout only when stdout_only.
struct RunResult {
  int code = -1;
  std::string out;
};
RunResult RunCommand(const std::vector<std::string>& argv, const std::string& stdin_text = "",
                     bool stdout_only = false);

// Like RunCommand, with extra environment entries for the child ("NAME=value";
// they replace inherited ones of the same name), stdout and stderr captured
// separately, and a time limit after which the child is killed (SIGKILL).
struct SplitRunResult {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  bool timed_out = false;
};
// `exposure-filter <args...>`: the binary under test (EF_BINARY), run as
// RunCommandWithEnv runs any command.
SplitRunResult Ef(std::vector<std::string> args, const std::vector<std::string>& env = {},
                  const std::string& stdin_text = "",
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Whether process `pid` runs the exposure-filter binary (EF_BINARY: it has
// exec'd; before that, the forked child has this test's handlers) and has a
// handler for `sig` (its SigCgt mask in /proc): a signal sent now is handled.
bool HandlesSignal(pid_t pid, int sig);

SplitRunResult RunCommandWithEnv(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env,
                                 const std::string& stdin_text = "",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace ef::test
