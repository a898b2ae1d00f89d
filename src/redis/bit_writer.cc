#include "redis/bit_writer.h"

#include <spdlog/spdlog.h>

#include <ctime>

namespace ef {

BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis) {
  BitWriterOptions wo;
  wo.redis = redis;
  wo.mode = config.write_mode == "setbit" ? WriteMode::kSetbit : WriteMode::kBitfield;
  wo.expire_cache_keys = static_cast<size_t>(config.expire_cache_keys);
  wo.expire_refresh_s = config.expire_refresh_ms / 1000;
  return wo;
}

RedisBitWriter::RedisBitWriter(BitWriterOptions options)
    : options_(std::move(options)),
      expire_cache_(options_.expire_cache_keys, options_.expire_refresh_s) {}

RedisBitWriter::~RedisBitWriter() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
}

Status RedisBitWriter::EnsureConnected() {
  if (conn_) return Status::Ok();
  auto conn = RedisConnection::Connect(options_.redis);
  if (!conn.ok()) return conn.status();
  conn_ = std::move(conn.value());
  // Redis may have restarted empty, or failed over: trust no cached expiry.
  expire_cache_.Clear();
  return Status::Ok();
}

size_t RedisBitWriter::AppendKey(const KeyBits& kb, bool with_expire) {
  size_t commands = 0;
  if (options_.mode == WriteMode::kBitfield) {
    AppendRespArrayHeader(2 + 4 * kb.positions.size(), &buffer_);
    AppendRespBulk("BITFIELD", &buffer_);
    AppendRespBulk(kb.key, &buffer_);
    for (uint32_t p : kb.positions) {
      buffer_.append("$3\r\nSET\r\n$2\r\nu1\r\n");
      AppendRespBulk(static_cast<uint64_t>(p), &buffer_);
      buffer_.append("$1\r\n1\r\n");
    }
    commands = 1;
  } else {
    for (uint32_t p : kb.positions) {
      buffer_.append("*4\r\n$6\r\nSETBIT\r\n");
      AppendRespBulk(kb.key, &buffer_);
      AppendRespBulk(static_cast<uint64_t>(p), &buffer_);
      buffer_.append("$1\r\n1\r\n");
    }
    commands = kb.positions.size();
  }
  if (!with_expire) return commands;
  buffer_.append("*3\r\n$8\r\nEXPIREAT\r\n");
  AppendRespBulk(kb.key, &buffer_);
  AppendRespBulk(static_cast<uint64_t>(kb.expire_at), &buffer_);
  return commands + 1;
}

Status RedisBitWriter::Write(const BitBatch& batch, WriteStats* stats) {
  WriteStats local;
  Status st = EnsureConnected();
  if (!st.ok()) {
    last_error_ = RedisErrorKind::kConnect;
    if (observer_) observer_(last_error_);
    return st;
  }
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  expire_sent_.clear();
  size_t i = 0;
  while (i < batch.size) {
    buffer_.clear();
    command_key_.clear();
    errors_.clear();
    size_t first_key = i;
    while (i < batch.size &&
           (command_key_.size() < options_.max_commands_per_round || i == first_key)) {
      const KeyBits& kb = batch.keys[i];
      const bool with_expire = !expire_cache_.Known(kb.key, kb.expire_at, now_s);
      size_t n = AppendKey(kb, with_expire);
      if (with_expire) {
        expire_sent_.push_back(i);
      } else {
        ++local.expires_skipped;
      }
      command_key_.insert(command_key_.end(), n, i);
      local.bits += kb.positions.size();
      ++i;
    }
    st = conn_->Pipeline(buffer_.data(), buffer_.size(), command_key_.size(), &errors_);
    if (!st.ok()) {
      last_error_ = conn_->last_error_kind();
      if (observer_) observer_(last_error_);
      conn_.reset();  // the pipeline's state is unknown: start over on a new connection
      return st;
    }
    local.commands += command_key_.size();
    size_t last_skipped = SIZE_MAX;
    for (const auto& e : errors_) {
      if (observer_) observer_(e.kind);
      size_t key_index = command_key_[e.index];
      if (e.kind == RedisErrorKind::kWrongType) {
        if (key_index != last_skipped) {
          ++local.skipped_keys;
          last_skipped = key_index;
          spdlog::warn("redis: key '{}' holds another type ({}); its bits are skipped",
                       batch.keys[key_index].key, e.text);
        }
        continue;
      }
      last_error_ = e.kind;
      return Unavailable("redis " + conn_->address() + ": writing '" + batch.keys[key_index].key +
                         "': " + e.text);
    }
  }
  // Every EXPIREAT of this batch was acknowledged (a WRONGTYPE key's too: it
  // failed for good, and remembering it saves re-sending it).
  for (size_t k : expire_sent_) {
    expire_cache_.Remember(batch.keys[k].key, batch.keys[k].expire_at, now_s);
  }
  local.keys = batch.size - local.skipped_keys;
  last_error_ = RedisErrorKind::kNone;
  if (stats) *stats = local;
  return Status::Ok();
}

void RedisBitWriter::Send(const BitBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
  job_ = &batch;
  job_done_ = false;
  cv_.notify_all();
}

Status RedisBitWriter::Await(WriteStats* stats) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return job_done_; });
  job_done_ = false;
  if (stats) *stats = job_stats_;
  return job_status_;
}

bool RedisBitWriter::Ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return job_done_;
}

void RedisBitWriter::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return quit_ || job_ != nullptr; });
    if (quit_) return;
    const BitBatch* batch = job_;
    job_ = nullptr;
    lock.unlock();
    WriteStats stats;
    Status st = Write(*batch, &stats);
    lock.lock();
    job_status_ = std::move(st);
    job_stats_ = stats;
    job_done_ = true;
    cv_.notify_all();
  }
}

}  // namespace ef
