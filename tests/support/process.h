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

// Runs a command to completion; returns exit code and output (stdout+stderr, or
// stdout only when stdout_only).
struct RunResult {
  int code = -1;
  std::string out;
};
RunResult RunCommand(const std::vector<std::string>& argv, const std::string& stdin_text = "",
                     bool stdout_only = false);

}  // namespace ef::test
