// Await a condition instead of sleeping: polls `cond` every `interval` until it
// holds or `timeout` passes. Returns whether it held.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace ef::test {

inline bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace ef::test
