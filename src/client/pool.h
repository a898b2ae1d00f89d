// ConnectionPool: at most `size` Redis connections shared by the threads of one
// exposure_filter::Client. A caller takes a slot (Acquire), uses the connection
// alone, and gives the slot back (Release). Connections are made lazily by the
// caller: Acquire may hand out an empty slot. A broken connection is released as
// nullptr, so the slot's next user connects again. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "redis/connection.h"

namespace ef::client {

class ConnectionPool {
 public:
  using Clock = std::chrono::steady_clock;
  using Conn = std::unique_ptr<RedisConnection>;

  explicit ConnectionPool(size_t size) : free_slots_(size) {}

  // Waits until a slot is free or `deadline` passes. True: the caller holds a slot
  // and *conn is an idle connection, or nullptr (connect one). False: timed out.
  bool Acquire(Clock::time_point deadline, Conn* conn);
  // Gives the slot back with its connection (nullptr: dropped, e.g. broken).
  void Release(Conn conn);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t free_slots_;
  std::vector<Conn> idle_;  // most recently used last
};

// Holds a slot for one call; releases it (with or without the connection) on exit.
class PooledConnection {
 public:
  explicit PooledConnection(ConnectionPool& pool) : pool_(pool) {}
  ~PooledConnection() {
    if (held_) pool_.Release(std::move(conn_));
  }
  PooledConnection(const PooledConnection&) = delete;
  PooledConnection& operator=(const PooledConnection&) = delete;

  bool Acquire(ConnectionPool::Clock::time_point deadline) {
    held_ = pool_.Acquire(deadline, &conn_);
    return held_;
  }
  ConnectionPool::Conn& conn() { return conn_; }
  void Drop() { conn_.reset(); }

 private:
  ConnectionPool& pool_;
  ConnectionPool::Conn conn_;
  bool held_ = false;
};

}  // namespace ef::client
