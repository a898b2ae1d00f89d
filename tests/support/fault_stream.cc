#include "support/fault_stream.h"

#include <stdexcept>

#include "common/clock.h"
#include "config/config.h"

namespace ef::test {

Layout DefaultTestLayout() {
  FilterConfig f;
  f.items_per_bucket = 200;
  f.fpr = 0.01;
  auto l = LayoutFromConfig(f);
  if (!l.ok()) throw std::runtime_error(l.status().message());
  return l.value();
}

int64_t MessagesProcessed(const std::string& log) {
  auto pos = log.rfind("stopped: ");
  if (pos == std::string::npos) return -1;
  return std::stoll(log.substr(pos + 9));
}

Stream::Stream(Stack& stack, std::string tag, int per_tick, std::chrono::milliseconds interval)
    : stack_(stack) {
  thread_ = std::thread([this, tag, per_tick, interval] {
    int n = 0;
    while (!stop_.load()) {
      std::vector<TestEvent> tick;
      const int64_t now = SystemClock().NowMs();
      for (int i = 0; i < per_tick; ++i, ++n) {
        tick.push_back(
            {tag + "-u" + std::to_string(n % 97), {tag + "-i" + std::to_string(n)}, now});
      }
      bool ok = true;
      try {
        stack_.Produce(tick);
      } catch (const std::exception&) {
        ok = false;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (ok) {
          events_.insert(events_.end(), tick.begin(), tick.end());
        } else {
          failed_ += tick.size();
        }
      }
      std::this_thread::sleep_for(interval);  // pacing the load, not synchronisation
    }
  });
}

Stream::~Stream() { Stop(); }

void Stream::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<TestEvent> Stream::events() {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

size_t Stream::delivered() {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t Stream::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

CommitGapMonitor::CommitGapMonitor(Stack& stack) : stack_(stack) {
  thread_ = std::thread([this] {
    using SteadyClock = std::chrono::steady_clock;
    int64_t last_committed = -1;
    // Start of the last poll that saw progress or nothing to commit: the gap is
    // measured from there to the end of each later poll (an upper bound).
    auto last_ok = SteadyClock::now();
    while (!stop_.load()) {
      const auto poll_start = SteadyClock::now();
      int64_t committed = -1;
      bool lagging = true;
      try {
        int64_t sum = 0, lag = 0;
        for (const auto& po : stack_.Offsets()) {
          sum += std::max<int64_t>(po.committed, 0);
          lag += po.high - std::max<int64_t>(po.committed, 0);
        }
        committed = sum;
        lagging = lag > 0;
      } catch (const std::exception&) {
        committed = -1;  // unknown: counts as no progress
      }
      const auto poll_end = SteadyClock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        max_gap_s_ =
            std::max(max_gap_s_, std::chrono::duration<double>(poll_end - last_ok).count());
      }
      if ((committed >= 0 && committed > last_committed) || (committed >= 0 && !lagging))
        last_ok = poll_start;
      if (committed >= 0) last_committed = std::max(last_committed, committed);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling period
    }
  });
}

CommitGapMonitor::~CommitGapMonitor() { Stop(); }

void CommitGapMonitor::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

double CommitGapMonitor::MaxGapSeconds() {
  std::lock_guard<std::mutex> lock(mu_);
  return max_gap_s_;
}

}  // namespace ef::test
