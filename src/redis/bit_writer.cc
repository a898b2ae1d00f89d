#include "redis/bit_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <ctime>

#include "common/printable.h"
#include "redis/meta.h"

namespace ef {

BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis) {
  BitWriterOptions wo;
  wo.redis = redis;
  wo.mode = config.write_mode == "setbit" ? WriteMode::kSetbit : WriteMode::kBitfield;
  wo.expire_cache_keys = static_cast<size_t>(config.expire_cache_keys);
  wo.expire_refresh_s = config.expire_refresh_ms / 1000;
  return wo;
}

BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis,
                                            const Layout& layout) {
  BitWriterOptions wo = BitWriterOptionsFromConfig(config, redis);
  wo.layout = layout;
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

Status RedisBitWriter::CheckMeta(RedisConnection& conn) {
  if (!options_.layout) return Status::Ok();
  Status st = EnsureMeta(conn, *options_.layout);
  if (st.code() == StatusCode::kFailedPrecondition || st.code() == StatusCode::kInternal) {
    // The layout changed while we were away (or the meta key is not a hash):
    // writing on would corrupt every filter. Final for this writer.
    fatal_ = FailedPrecondition("redis " + conn.address() + ": " + st.message());
    return fatal_;
  }
  return st;
}

Status RedisBitWriter::EnsureConnected() {
  if (!fatal_.ok()) return fatal_;
  if (conn_) return Status::Ok();
  auto conn = RedisConnection::Connect(options_.redis);
  if (!conn.ok()) return conn.status();
  // Redis may have restarted empty, or failed over: trust no cached expiry, and
  // put the meta back if it is gone.
  expire_cache_.Clear();
  EF_RETURN_IF_ERROR(CheckMeta(**conn));
  conn_ = std::move(conn.value());
  return Status::Ok();
}

size_t RedisBitWriter::AppendKey(const KeyBits& kb, bool with_expire, const uint32_t* probe) {
  size_t commands = 0;
  if (options_.mode == WriteMode::kBitfield) {
    AppendRespArrayHeader(2 + 4 * kb.positions.size() + (probe ? 3 : 0), &buffer_);
    AppendRespBulk("BITFIELD", &buffer_);
    AppendRespBulk(kb.key, &buffer_);
    if (probe) {
      // First, so that it reads the bit as it was before this write.
      buffer_.append("$3\r\nGET\r\n$2\r\nu1\r\n");
      AppendRespBulk(static_cast<uint64_t>(*probe), &buffer_);
    }
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
  AppendExpire(kb);
  return commands + 1;
}

void RedisBitWriter::AppendExpire(const KeyBits& kb) {
  buffer_.append("*3\r\n$8\r\nEXPIREAT\r\n");
  AppendRespBulk(kb.key, &buffer_);
  AppendRespBulk(static_cast<uint64_t>(kb.expire_at), &buffer_);
}

Status RedisBitWriter::Write(const BitBatch& batch, WriteStats* stats) {
  Status st = WriteOnce(batch, stats);
  if (!st.ok() && expire_cache_.enabled()) {
    // Bits of this batch may be in Redis without the EXPIREAT that was to follow
    // them: the retry must send it, whatever the bits then say.
    for (size_t i = 0; i < batch.size; ++i) expire_cache_.Forget(batch.keys[i].key);
  }
  return st;
}

Status RedisBitWriter::Fail(RedisErrorKind kind, Status st) {
  last_error_ = kind;
  if (observer_) observer_(kind);
  return st;
}

Status RedisBitWriter::ReplyFailure(const char* what, const std::string& key,
                                    const RedisConnection::ReplyError& e) {
  last_error_ = e.kind;
  std::string msg =
      "redis " + conn_->address() + ": " + what + " '" + Printable(key) + "': " + Printable(e.text);
  // READONLY / MASTERDOWN: this server will not take writes; the next Write
  // connects again (and resolves the host name again).
  if (RedisConnection::CallsForReconnect(e.text)) {
    conn_.reset();
    msg += " (reconnecting)";
  }
  if (e.kind == RedisErrorKind::kAuth) return PermissionDenied(msg);
  return Unavailable(msg);
}

Status RedisBitWriter::Pipeline(size_t commands) {
  errors_.clear();
  Status st = conn_->Pipeline(buffer_.data(), buffer_.size(), commands, &errors_, &ints_);
  if (!st.ok()) {
    RedisErrorKind kind = conn_->last_error_kind();
    conn_.reset();  // the pipeline's state is unknown: start over on a new connection
    return Fail(kind, st);
  }
  return Status::Ok();
}

Status RedisBitWriter::WriteOnce(const BitBatch& batch, WriteStats* stats) {
  WriteStats local;
  Status st = EnsureConnected();
  if (!st.ok()) return Fail(RedisErrorKind::kConnect, st);
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  key_state_.assign(batch.size, KeyState{});
  size_t i = 0;
  while (i < batch.size) {
    buffer_.clear();
    command_key_.clear();
    size_t first_key = i;
    while (i < batch.size &&
           (command_key_.size() < options_.max_commands_per_round || i == first_key)) {
      const KeyBits& kb = batch.keys[i];
      KeyState& ks = key_state_[i];
      uint32_t sentinel = 0;
      ks.expire_sent = !expire_cache_.Known(kb.key, kb.expire_at, now_s, &sentinel);
      const bool probe = !ks.expire_sent && options_.mode == WriteMode::kBitfield;
      size_t n = AppendKey(kb, ks.expire_sent, probe ? &sentinel : nullptr);
      command_key_.insert(command_key_.end(), n, i);
      local.bits += kb.positions.size();
      ++i;
    }
    EF_RETURN_IF_ERROR(Pipeline(command_key_.size()));
    local.commands += command_key_.size();
    size_t last_skipped = SIZE_MAX;
    for (const auto& e : errors_) {
      if (observer_) observer_(e.kind);
      size_t key_index = command_key_[e.index];
      if (e.kind == RedisErrorKind::kWrongType) {
        key_state_[key_index].failed = true;
        if (key_index != last_skipped) {
          ++local.skipped_keys;
          last_skipped = key_index;
          spdlog::warn("redis: key '{}' holds another type ({}); its bits are skipped",
                       Printable(batch.keys[key_index].key), Printable(e.text));
        }
        continue;
      }
      return ReplyFailure("writing", batch.keys[key_index].key, e);
    }
    // Which keys showed an old bit set (the key held data of an earlier write),
    // and which EXPIREATs found their key.
    for (size_t c = 0; c < command_key_.size(); ++c) {
      KeyState& ks = key_state_[command_key_[c]];
      const bool last_of_key =
          c + 1 == command_key_.size() || command_key_[c + 1] != command_key_[c];
      if (ks.expire_sent && last_of_key) {
        ks.expire_set = ints_[c].count == 1 && ints_[c].first == 1;
      } else if (ints_[c].zeros < ints_[c].count) {
        ks.old_bit_set = true;
      }
    }
  }
  // The expire cache skipped EXPIREAT for a key, but the write found none of the
  // old bits set (the remembered sentinel included): the key may have been lost
  // and re-created by this write. Send its EXPIREAT now (docs: bit_writer.h).
  follow_up_.clear();
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    if (ks.expire_sent) continue;
    if (ks.failed || ks.old_bit_set) {
      ++local.expires_skipped;
    } else {
      follow_up_.push_back(k);
    }
  }
  if (!follow_up_.empty()) {
    LogLostKeys(batch, now_s);
    // Keys were lost behind our back (FLUSHALL, a restart, a resync): the meta
    // may be gone with them.
    st = CheckMeta(*conn_);
    if (!st.ok()) {
      if (st.code() == StatusCode::kUnavailable) conn_.reset();
      return Fail(RedisErrorKind::kReply, st);
    }
    for (size_t at = 0; at < follow_up_.size();) {
      const size_t end = std::min(follow_up_.size(), at + options_.max_commands_per_round);
      buffer_.clear();
      for (size_t f = at; f < end; ++f) AppendExpire(batch.keys[follow_up_[f]]);
      EF_RETURN_IF_ERROR(Pipeline(end - at));
      local.commands += end - at;
      if (!errors_.empty()) {
        const auto& e = errors_.front();
        if (observer_) observer_(e.kind);
        return ReplyFailure("EXPIREAT", batch.keys[follow_up_[at + e.index]].key, e);
      }
      for (size_t f = at; f < end; ++f)
        key_state_[follow_up_[f]].expire_set = ints_[f - at].count == 1 && ints_[f - at].first == 1;
      at = end;
    }
  }
  // Remember every expiry Redis set (a WRONGTYPE key's too: its writes fail for
  // good, and remembering it saves re-sending EXPIREAT), with the first
  // position of the write that preceded it as the sentinel.
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyBits& kb = batch.keys[k];
    if (key_state_[k].expire_set)
      expire_cache_.Remember(kb.key, kb.expire_at, now_s,
                             kb.positions.empty() ? 0 : kb.positions.front());
  }
  local.keys = batch.size - local.skipped_keys;
  last_error_ = RedisErrorKind::kNone;
  if (stats) *stats = local;
  return Status::Ok();
}

void RedisBitWriter::LogLostKeys(const BitBatch& batch, int64_t now_s) {
  lost_keys_ += follow_up_.size();
  if (now_s - lost_logged_at_s_ < 60) return;
  spdlog::warn(
      "redis: {} key(s) found lost and written again since the last report (deleted, evicted, "
      "flushed, a restart or a resync), e.g. '{}'; their expiry is set again",
      lost_keys_, Printable(batch.keys[follow_up_.front()].key));
  lost_keys_ = 0;
  lost_logged_at_s_ = now_s;
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
