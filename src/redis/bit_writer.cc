#include "redis/bit_writer.h"

#include <spdlog/spdlog.h>

namespace ef {

RedisBitWriter::RedisBitWriter(BitWriterOptions options) : options_(std::move(options)) {}

RedisBitWriter::~RedisBitWriter() = default;

Status RedisBitWriter::EnsureConnected() {
  if (conn_) return Status::Ok();
  auto conn = RedisConnection::Connect(options_.redis);
  if (!conn.ok()) return conn.status();
  conn_ = std::move(conn.value());
  return Status::Ok();
}

size_t RedisBitWriter::AppendKey(const KeyBits& kb) {
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
  size_t i = 0;
  while (i < batch.size) {
    buffer_.clear();
    command_key_.clear();
    errors_.clear();
    size_t first_key = i;
    while (i < batch.size && (command_key_.size() < options_.max_commands_per_round || i == first_key)) {
      size_t n = AppendKey(batch.keys[i]);
      command_key_.insert(command_key_.end(), n, i);
      local.bits += batch.keys[i].positions.size();
      ++i;
    }
    conn_->AppendFormatted(buffer_.data(), buffer_.size());
    st = conn_->ReadReplies(command_key_.size(), &errors_);
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
  local.keys = batch.size - local.skipped_keys;
  last_error_ = RedisErrorKind::kNone;
  if (stats) *stats = local;
  return Status::Ok();
}

}  // namespace ef
