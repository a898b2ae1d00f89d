// serve's marks of served items, written after the answer (issue 52): a
// request with "mark_served" is answered as soon as its read is done, its marks
// queued here; one writer thread takes what is queued, up to max_batch plans,
// and writes them in one round trip (Client::WriteMarks: a pipeline of EVALSHAs
// on a pooled connection of its own).
//
// The window (README "Paged feeds", docs/HTTP.md): from a request's answer to
// its marks written, a next request for the same user does not see them and may
// return the same items. It lasts the queue's wait plus one round trip: the
// writer takes what is queued `linger` after the oldest was queued (at once when
// max_batch are), and while it writes one batch, what is queued meanwhile waits
// for the next.
//
// The queue holds at most `capacity` plans: Enqueue refuses one more (counted in
// exposure_filter_serve_mark_queue_full_total) and the request writes its own
// marks before answering, as without the queue. A write that fails is counted
// (exposure_filter_serve_mark_errors_total, by the client) and logged: its answer
// is gone. Stop writes what is queued for at most `drain`, then drops the rest
// (logged with their count).
//
// State (under mu_): queue_ (plans not taken yet, oldest first), waiting_ (the
// writer waits on cv_ for a first plan: an Enqueue into an empty queue wakes it),
// lingering_ (it waits for the linger to pass: only the max_batch-th plan wakes
// it; while it writes, nothing wakes it and it takes the queue when done),
// stopping_. Invariant:
// queue_.size() <= capacity; after stopping_, Enqueue refuses.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "exposure_filter/client.h"

namespace ef::serve {

class MarkWriter {
 public:
  struct Options {
    size_t capacity = 10000;  // plans queued at most (serve.mark_queue)
    size_t max_batch = 64;    // plans written in one round trip
    // The writer waits this long after a plan was queued for others to join its
    // round trip (unless max_batch are queued): fewer, larger round trips.
    std::chrono::microseconds linger{1000};
    std::chrono::milliseconds timeout{50};  // a round trip's deadline (serve.timeout)
    std::chrono::milliseconds drain{5000};  // Stop's time to write what is queued
  };
  // Starts the writer thread. `client` is read at each write (serve's client
  // pointer: null until Redis answered; Enqueue is only called once it is set).
  MarkWriter(const Options& options, const std::atomic<exposure_filter::Client*>* client,
             prometheus::Registry& registry);
  ~MarkWriter();  // Stop()
  MarkWriter(const MarkWriter&) = delete;
  MarkWriter& operator=(const MarkWriter&) = delete;

  // Queues *plan (moved from on success). False when the queue is full or
  // stopping: *plan is left as it was, for the caller to write.
  bool Enqueue(exposure_filter::MarkPlan* plan);
  // Writes what is queued (at most options.drain), joins the thread. Idempotent.
  void Stop();

 private:
  struct Queued {
    exposure_filter::MarkPlan plan;
    std::chrono::steady_clock::time_point at;
  };
  void Run();
  void Write(std::vector<Queued>* batch);

  const Options options_;
  const std::atomic<exposure_filter::Client*>* client_;
  prometheus::Counter& queued_total_;
  prometheus::Counter& full_total_;
  prometheus::Gauge& depth_;
  prometheus::Histogram& batch_size_;
  prometheus::Histogram& delay_;
  std::chrono::steady_clock::time_point last_warning_{};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool waiting_ = false;
  bool lingering_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ef::serve
