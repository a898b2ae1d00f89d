#include "client/pool.h"

namespace ef::client {

bool ConnectionPool::Acquire(Clock::time_point deadline, Conn* conn) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return free_slots_ > 0; })) return false;
  --free_slots_;
  if (!idle_.empty()) {
    *conn = std::move(idle_.back());
    idle_.pop_back();
  } else {
    conn->reset();
  }
  return true;
}

void ConnectionPool::Release(Conn conn) {
  {
    std::lock_guard lock(mu_);
    if (conn) idle_.push_back(std::move(conn));
    ++free_slots_;
  }
  cv_.notify_one();
}

}  // namespace ef::client
