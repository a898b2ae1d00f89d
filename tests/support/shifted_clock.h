// Test processes run on a wall clock shifted ahead (the LD_PRELOAD library
// tests/support/clock_shift, EF_CLOCK_SHIFT_LIB): a daemon, its redis-server and
// the commands around them reach a bucket's end in seconds. Buckets end on whole
// UTC hours, so the shift puts "now" `budget_ms` before the end of an hour.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "support/redis_server.h"

namespace ef::test {

struct ShiftedClock {
  explicit ShiftedClock(const char* library, int64_t budget_ms) {
    const int64_t real_start = SystemClock().NowMs();
    hour_end_s = (real_start + budget_ms) / 3600000 * 3600 + 3600;
    shift_ms = hour_end_s * 1000 - budget_ms - real_start;
    env = {std::string("LD_PRELOAD=") + library,
           "EF_TEST_CLOCK_SHIFT_MS=" + std::to_string(shift_ms)};
    // An EF_SANITIZE child: ASan accepts a library preloaded before its runtime.
    const char* asan = std::getenv("ASAN_OPTIONS");
    asan_env = "ASAN_OPTIONS=" + std::string(asan ? asan : "") + (asan && *asan ? ":" : "") +
               "verify_asan_link_order=0";
  }

  // The shifted wall clock, as the children see it.
  int64_t NowMs() const { return SystemClock().NowMs() + shift_ms; }

  // argv run through env(1) with the shift (and the ASan option) set.
  std::vector<std::string> Wrap(const std::vector<std::string>& argv) const {
    std::vector<std::string> out{"env"};
    out.insert(out.end(), env.begin(), env.end());
    out.push_back(asan_env);
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  int64_t hour_end_s = 0;  // the end of the hour "now" is budget_ms before
  int64_t shift_ms = 0;
  std::vector<std::string> env;  // "NAME=value" entries of the shift
  std::string asan_env;
};

// A redis-server (extra command-line arguments `args`) whose environment holds
// `env` ("NAME=value") while it starts; the test process's own is restored.
inline std::unique_ptr<RedisServer> StartRedisWithEnv(const std::vector<std::string>& env,
                                                      std::vector<std::string> args = {}) {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& e : env) {
    const std::string name = e.substr(0, e.find('='));
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name.c_str(), e.substr(e.find('=') + 1).c_str(), 1);
  }
  auto server = std::make_unique<RedisServer>(std::move(args));
  for (const auto& [name, old] : saved) {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  return server;
}

}  // namespace ef::test
