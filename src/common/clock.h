// The clock at the edge: the pipeline asks it for wall time, tests give a fake.
#pragma once

#include <chrono>
#include <cstdint>

namespace ef {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;  // wall clock, epoch milliseconds
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Monotonic milliseconds (for timeouts and intervals, never for event times).
inline int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ef
