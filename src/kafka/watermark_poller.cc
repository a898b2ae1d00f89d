#include "kafka/watermark_poller.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"

namespace ef::kafka {

struct WatermarkPoller::State {
  Options options;
  HandlePtr rk;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;                   // guarded by mu
  bool stopped = false;                // guarded by mu: the thread has left its loop
  std::vector<TopicPartition> wanted;  // guarded by mu
  std::map<TopicPartition, std::pair<int64_t, int64_t>> watermarks;  // guarded by mu
  std::thread thread;

  ~State() {
    // Never subscribed, no group: nothing to leave, nothing to wait for.
    if (rk) rd_kafka_destroy_flags(rk.release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }

  void Loop() {
    std::unique_lock lock(mu);
    while (!stop) {
      const std::vector<TopicPartition> tps = wanted;
      for (const TopicPartition& tp : tps) {
        if (stop) break;
        lock.unlock();
        int64_t low = -1, high = -1;
        const rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
            rk.get(), tp.topic.c_str(), tp.partition, &low, &high, options.query_timeout_ms);
        lock.lock();
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) watermarks[tp] = {low, high};
      }
      cv.wait_for(lock, std::chrono::milliseconds(options.interval_ms), [this] { return stop; });
    }
    stopped = true;
    cv.notify_all();
  }
};

StatusOr<std::unique_ptr<WatermarkPoller>> WatermarkPoller::Create(const KafkaConfig& config,
                                                                   Options options) {
  auto state = std::make_shared<State>();
  state->options = options;
  // No group (an empty group.id): this handle only asks for watermarks.
  auto rk = NewConsumerHandle(config, {{"group.id", ""}});
  if (!rk.ok()) return rk.status();
  state->rk = std::move(rk.value());
  // The thread owns a reference: if it is detached while stuck in a query, the
  // state (and the handle) outlive the poller until the query returns.
  state->thread = std::thread([s = state] { s->Loop(); });
  return std::unique_ptr<WatermarkPoller>(new WatermarkPoller(std::move(state)));
}

WatermarkPoller::WatermarkPoller(std::shared_ptr<State> state) : state_(std::move(state)) {}

WatermarkPoller::~WatermarkPoller() {
  bool stopped = false;
  {
    std::unique_lock lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_all();
    stopped = state_->cv.wait_for(lock, std::chrono::milliseconds(state_->options.stop_wait_ms),
                                  [this] { return state_->stopped; });
  }
  if (stopped) {
    state_->thread.join();
  } else {
    state_->thread.detach();  // stuck in librdkafka: see the header
  }
}

void WatermarkPoller::Want(const std::vector<TopicPartition>& partitions) {
  std::lock_guard lock(state_->mu);
  state_->wanted = partitions;
  for (auto it = state_->watermarks.begin(); it != state_->watermarks.end();) {
    bool keep = false;
    for (const auto& tp : partitions) keep = keep || tp == it->first;
    it = keep ? std::next(it) : state_->watermarks.erase(it);
  }
}

bool WatermarkPoller::Get(const TopicPartition& tp, int64_t* low, int64_t* high) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->watermarks.find(tp);
  if (it == state_->watermarks.end()) return false;
  *low = it->second.first;
  *high = it->second.second;
  return true;
}

}  // namespace ef::kafka
