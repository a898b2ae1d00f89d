#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ef::test {

Process::Process(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror("exec");
    _exit(127);
  }
}

Process::~Process() {
  if (Running()) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

bool Process::Running() {
  if (exit_code_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

void Process::Signal(int sig) {
  if (Running()) kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code_;
}

int Process::Stop(int sig, std::chrono::milliseconds timeout) {
  Signal(sig);
  auto code = Wait(timeout);
  if (code) return *code;
  Signal(SIGKILL);
  return Wait(std::chrono::seconds(10)).value_or(-1);
}

std::string Process::Output() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

RunResult RunCommand(const std::vector<std::string>& argv, const std::string& stdin_text,
                     bool stdout_only) {
  SplitRunResult split = RunCommandWithEnv(argv, {}, stdin_text, std::chrono::minutes(2));
  return {split.code, stdout_only ? split.out : split.out + split.err};
}

SplitRunResult RunCommandWithEnv(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& stdin_text,
                                 std::chrono::milliseconds timeout) {
  // The child's environment: ours, minus the names `env` sets, plus `env`.
  std::vector<std::string> entries;
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& o : env) replaced = replaced || name_of(o) == name_of(entry);
    if (!replaced) entries.push_back(entry);
  }
  entries.insert(entries.end(), env.begin(), env.end());
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args;
  for (auto& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) || pipe(out_pipe) || pipe(err_pipe)) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::thread writer([&] {
    // A child that exits without reading its input must not kill the test
    // with SIGPIPE: blocked here, write() fails with EPIPE instead.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    size_t off = 0;
    while (off < stdin_text.size()) {
      ssize_t n = write(in_pipe[1], stdin_text.data() + off, stdin_text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(in_pipe[1]);
  });
  SplitRunResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !r.timed_out) {
      r.timed_out = true;
      kill(pid, SIGKILL);  // the pipes close when it dies
    }
    int ready =
        poll(fds, 2, r.timed_out ? 1000 : static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  writer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

SplitRunResult Ef(std::vector<std::string> args, const std::vector<std::string>& env,
                  const std::string& stdin_text, std::chrono::milliseconds timeout) {
  args.insert(args.begin(), EF_BINARY);
  return RunCommandWithEnv(args, env, stdin_text, timeout);
}

bool HandlesSignal(pid_t pid, int sig) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  if (ec || exe != std::filesystem::canonical(EF_BINARY)) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  }
  return false;
}

}  // namespace ef::test
