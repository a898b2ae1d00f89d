// Pool<T>: at most `size` Redis handles (a RedisConnection, or a ClusterRouter
// with its own per-master connections) shared by the threads of one
// exposure_filter::Client. A caller takes a slot (Acquire), uses the handle
// alone, and gives the slot back (Release). Handles are made lazily by the
// caller: Acquire may hand out an empty slot. A broken handle is released as
// nullptr, so the slot's next user makes a new one. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "redis/connection.h"

namespace ef::client {

template <typename T>
class Pool {
 public:
  using Clock = std::chrono::steady_clock;
  using Handle = std::unique_ptr<T>;
  using Conn = Handle;

  explicit Pool(size_t size) : free_slots_(size) {}

  // Waits until a slot is free or `deadline` passes. True: the caller holds a slot
  // and *handle is an idle handle, or nullptr (make one). False: timed out.
  bool Acquire(Clock::time_point deadline, Handle* handle) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return free_slots_ > 0; })) return false;
    --free_slots_;
    if (!idle_.empty()) {
      *handle = std::move(idle_.back());
      idle_.pop_back();
    } else {
      handle->reset();
    }
    return true;
  }
  // Gives the slot back with its handle (nullptr: dropped, e.g. broken).
  void Release(Handle handle) {
    {
      std::lock_guard lock(mu_);
      if (handle) idle_.push_back(std::move(handle));
      ++free_slots_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t free_slots_;
  std::vector<Handle> idle_;  // most recently used last
};

using ConnectionPool = Pool<RedisConnection>;

// Holds a slot for one call; releases it (with or without the handle) on exit.
template <typename T>
class Pooled {
 public:
  explicit Pooled(Pool<T>& pool) : pool_(pool) {}
  ~Pooled() {
    if (held_) pool_.Release(std::move(handle_));
  }
  Pooled(const Pooled&) = delete;
  Pooled& operator=(const Pooled&) = delete;

  bool Acquire(typename Pool<T>::Clock::time_point deadline) {
    held_ = pool_.Acquire(deadline, &handle_);
    return held_;
  }
  typename Pool<T>::Handle& conn() { return handle_; }
  void Drop() { handle_.reset(); }

 private:
  Pool<T>& pool_;
  typename Pool<T>::Handle handle_;
  bool held_ = false;
};

using PooledConnection = Pooled<RedisConnection>;

}  // namespace ef::client
