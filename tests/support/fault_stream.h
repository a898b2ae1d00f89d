// Helpers of the fault suite (tests/robustness): a stream produced from a
// background thread while a fault happens, a monitor of the group's committed
// progress, and small readers of the daemon's log.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bloom/layout.h"
#include "support/stack.h"

namespace ef::test {

// The layout of a config written by Stack::WriteConfig without a filter section.
Layout DefaultTestLayout();

// "stopped: N messages, ..." from the daemon's last log line; -1 if absent.
int64_t MessagesProcessed(const std::string& log);

// Produces `per_tick` events every `interval` (ts = now, users "<tag>-u<n%97>",
// items "<tag>-i<n>") from a thread of its own until Stop(). Each tick waits for
// delivery; events of a tick whose delivery failed are kept apart (their fate is
// unknown) instead of aborting the test.
class Stream {
 public:
  Stream(Stack& stack, std::string tag, int per_tick, std::chrono::milliseconds interval);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void Stop();
  // Events confirmed delivered to Kafka.
  std::vector<TestEvent> events();
  size_t delivered();
  // Events whose delivery failed (not asserted on; reported).
  size_t failed();

 private:
  Stack& stack_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<TestEvent> events_;
  size_t failed_ = 0;
  std::thread thread_;
};

// Polls the group's committed offsets every 100 ms from a thread of its own and
// records the longest time the committed total did not grow while some
// partition had uncommitted messages (a poll that fails counts as no progress;
// each gap is an upper bound, measured from the start of the last poll that
// saw progress to the end of the poll that saw it again).
class CommitGapMonitor {
 public:
  explicit CommitGapMonitor(Stack& stack);
  ~CommitGapMonitor();
  CommitGapMonitor(const CommitGapMonitor&) = delete;
  CommitGapMonitor& operator=(const CommitGapMonitor&) = delete;
  void Stop();
  // The longest gap so far, in seconds (up to the last poll).
  double MaxGapSeconds();

 private:
  Stack& stack_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  double max_gap_s_ = 0;
  std::thread thread_;
};

}  // namespace ef::test
