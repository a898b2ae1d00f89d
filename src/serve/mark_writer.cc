#include "serve/mark_writer.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

namespace ef::serve {

namespace pm = prometheus;
using Clock = std::chrono::steady_clock;

MarkWriter::MarkWriter(const Options& options, const std::atomic<exposure_filter::Client*>* client,
                       pm::Registry& r)
    : options_(options),
      client_(client),
      queued_total_(pm::BuildCounter()
                        .Name("exposure_filter_serve_marks_queued_total")
                        .Help("Requests whose marks of served items were queued, written after "
                              "the answer (serve.mark_queue)")
                        .Register(r)
                        .Add({})),
      full_total_(pm::BuildCounter()
                      .Name("exposure_filter_serve_mark_queue_full_total")
                      .Help("Requests that found the mark queue full and wrote their marks "
                            "before answering (serve.mark_queue)")
                      .Register(r)
                      .Add({})),
      depth_(pm::BuildGauge()
                 .Name("exposure_filter_serve_mark_queue_depth")
                 .Help("Requests' marks queued, not written yet")
                 .Register(r)
                 .Add({})),
      batch_size_(pm::BuildHistogram()
                      .Name("exposure_filter_serve_mark_batch_size")
                      .Help("Requests' marks written in one round trip")
                      .Register(r)
                      .Add({}, pm::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64})),
      delay_(
          pm::BuildHistogram()
              .Name("exposure_filter_serve_mark_delay_seconds")
              .Help("From a request's marks queued to written: the window in which a next "
                    "request of its user does not see them")
              .Register(r)
              .Add({}, pm::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005,
                                                       0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1})) {
  thread_ = std::thread([this] { Run(); });
}

MarkWriter::~MarkWriter() { Stop(); }

bool MarkWriter::Enqueue(exposure_filter::MarkPlan* plan) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= options_.capacity) {
      if (!stopping_) full_total_.Increment();
      return false;
    }
    queue_.push_back({std::move(*plan), Clock::now()});
    depth_.Set(static_cast<double>(queue_.size()));
    wake = (waiting_ && queue_.size() == 1) || (lingering_ && queue_.size() == options_.max_batch);
  }
  queued_total_.Increment();
  if (wake) cv_.notify_one();
  return true;
}

void MarkWriter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void MarkWriter::Run() {
  std::vector<Queued> batch;
  Clock::time_point drain_end{};
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    waiting_ = true;
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    waiting_ = false;
    if (queue_.empty()) return;  // stopping, nothing left
    if (!stopping_ && queue_.size() < options_.max_batch) {
      lingering_ = true;
      cv_.wait_until(lock, queue_.front().at + options_.linger,
                     [&] { return stopping_ || queue_.size() >= options_.max_batch; });
      lingering_ = false;
    }
    if (stopping_) {
      if (drain_end == Clock::time_point{}) drain_end = Clock::now() + options_.drain;
      if (Clock::now() >= drain_end) {
        spdlog::error(
            "serve: stopping: {} requests' marks of served items not written within {} ms "
            "(dropped)",
            queue_.size(), options_.drain.count());
        queue_.clear();
        depth_.Set(0);
        return;
      }
    }
    const size_t n = std::min(queue_.size(), options_.max_batch);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    depth_.Set(static_cast<double>(queue_.size()));
    lock.unlock();
    Write(&batch);
    batch.clear();
    lock.lock();
  }
}

void MarkWriter::Write(std::vector<Queued>* batch) {
  exposure_filter::Client* client = client_->load(std::memory_order_acquire);
  std::vector<exposure_filter::MarkPlan> plans;
  plans.reserve(batch->size());
  for (Queued& q : *batch) plans.push_back(std::move(q.plan));
  exposure_filter::CallOptions call;
  call.deadline = options_.timeout;
  const std::vector<exposure_filter::MarkResult> results = client->WriteMarks(plans, call);
  const Clock::time_point now = Clock::now();
  batch_size_.Observe(static_cast<double>(plans.size()));
  size_t failed = 0;
  const std::string* error = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok || results[i].failed_open) {
      ++failed;
      error = &results[i].error;
      continue;
    }
    delay_.Observe(std::chrono::duration<double>(now - (*batch)[i].at).count());
  }
  if (failed > 0 && now - last_warning_ >= std::chrono::seconds(10)) {
    last_warning_ = now;
    spdlog::warn(
        "serve: {} (the marks of served items of {} of {} answered requests not written; "
        "counted in exposure_filter_serve_mark_errors_total)",
        *error, failed, plans.size());
  }
}

}  // namespace ef::serve
