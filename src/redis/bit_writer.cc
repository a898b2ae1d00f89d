#include "redis/bit_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <ctime>

#include "bloom/keys.h"
#include "common/printable.h"
#include "redis/cluster.h"
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
  Layout effective;
  Status st = options_.ensure_meta ? options_.ensure_meta(*options_.layout, &effective)
                                   : EnsureMeta(conn, *options_.layout, &effective);
  if (st.code() == StatusCode::kFailedPrecondition || st.code() == StatusCode::kInternal) {
    // The layout changed while we were away (or the meta key is not a hash):
    // writing on would corrupt every filter. Final for this writer.
    fatal_ = FailedPrecondition("redis " + conn.address() + ": " + st.message());
    return fatal_;
  }
  if (!st.ok()) return st;
  const bool was_v1 = effective_ && effective_->version() == 1;
  if (effective.version() == 2 && was_v1) {
    spdlog::info(
        "redis {}: the layout stored at {} is version 2 now: heavy users' filters grow "
        "in stages from this write on",
        conn.address(), MetaKey(effective.prefix));
  }
  effective_ = std::move(effective);
  stages_ = effective_->version() == 2 ? effective_->stage_table : std::vector<Stage>{};
  return Status::Ok();
}

Status RedisBitWriter::RecheckMeta(int64_t now_s) {
  if (!options_.layout || options_.layout->version() == 1 || stages_.size() > 1)
    return Status::Ok();
  if (now_s < next_meta_check_s_) return Status::Ok();
  next_meta_check_s_ = now_s + 10;
  Status st = CheckMeta(*conn_);
  if (!st.ok() && st.code() == StatusCode::kUnavailable) conn_.reset();
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
  forget_states_ = false;
  EF_RETURN_IF_ERROR(CheckMeta(**conn));
  conn_ = std::move(conn.value());
  return Status::Ok();
}

size_t RedisBitWriter::AppendBits(const std::string& key, const uint32_t* p, size_t n,
                                  const uint32_t* probe) {
  if (options_.mode == WriteMode::kBitfield) {
    BeginCommand();
    AppendRespArrayHeader(2 + 4 * n + (probe ? 3 : 0), &buffer_);
    AppendRespBulk("BITFIELD", &buffer_);
    AppendRespBulk(key, &buffer_);
    if (probe) {
      // First, so that it reads the bit as it was before this write.
      buffer_.append("$3\r\nGET\r\n$2\r\nu1\r\n");
      AppendRespBulk(static_cast<uint64_t>(*probe), &buffer_);
    }
    for (size_t i = 0; i < n; ++i) {
      buffer_.append("$3\r\nSET\r\n$2\r\nu1\r\n");
      AppendRespBulk(static_cast<uint64_t>(p[i]), &buffer_);
      buffer_.append("$1\r\n1\r\n");
    }
    return 1;
  }
  for (size_t i = 0; i < n; ++i) {
    BeginCommand();
    buffer_.append("*4\r\n$6\r\nSETBIT\r\n");
    AppendRespBulk(key, &buffer_);
    AppendRespBulk(static_cast<uint64_t>(p[i]), &buffer_);
    buffer_.append("$1\r\n1\r\n");
  }
  return n;
}

void RedisBitWriter::AppendExpire(const KeyBits& kb) {
  BeginCommand();
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
  // With asking_, every command follows an ASKING (BeginCommand): 2n replies, of
  // which the odd ones are the commands'.
  const size_t sent = asking_ ? 2 * commands : commands;
  Status st = conn_->Pipeline(buffer_.data(), buffer_.size(), sent, &errors_, &ints_);
  if (!st.ok()) {
    RedisErrorKind kind = conn_->last_error_kind();
    conn_.reset();  // the pipeline's state is unknown: start over on a new connection
    return Fail(kind, st);
  }
  if (asking_) {
    for (size_t c = 0; c < commands; ++c) ints_[c] = ints_[2 * c + 1];
    ints_.resize(commands);
    for (auto& e : errors_) e.index /= 2;  // an ASKING error counts as its command's
  }
  return Status::Ok();
}

bool RedisBitWriter::Redirect(size_t k, const std::string& text) {
  if (!options_.cluster_node || !ParseRedirect(text)) return false;
  KeyState& ks = key_state_[k];
  if (!ks.redirected) redirects_.push_back({k, text});
  ks.redirected = true;
  return true;
}

Status RedisBitWriter::WaitReplicas() {
  conn_->SetCommandTimeout(options_.redis.command_timeout_ms);
  auto reply = conn_->Command(
      {"WAIT", std::to_string(options_.wait_replicas), std::to_string(options_.wait_timeout_ms)});
  if (!reply.ok()) {
    RedisErrorKind kind = conn_->last_error_kind();
    conn_.reset();
    return Fail(kind, reply.status());
  }
  if (reply->type == RedisReply::Type::kError) {
    const RedisErrorKind kind = RedisConnection::ClassifyErrorReply(reply->str);
    const std::string msg = "redis " + conn_->address() + ": WAIT: " + Printable(reply->str);
    return Fail(kind, kind == RedisErrorKind::kAuth ? PermissionDenied(msg) : Unavailable(msg));
  }
  if (reply->type != RedisReply::Type::kInteger || reply->integer < options_.wait_replicas) {
    return Fail(
        RedisErrorKind::kTimeout,
        Unavailable("redis " + conn_->address() + ": WAIT: " + std::to_string(reply->integer) +
                    " of " + std::to_string(options_.wait_replicas) +
                    " replica(s) acknowledged the write within " +
                    std::to_string(options_.wait_timeout_ms) +
                    " ms (redis.wait_replicas); the batch is written again"));
  }
  return Status::Ok();
}

Status RedisBitWriter::PlanStages(const BitBatch& batch, int64_t now_s, WriteStats* stats) {
  if (forget_states_.exchange(false)) expire_cache_.ForgetStages();
  plans_.assign(batch.size, KeyPlan{});
  groups_.clear();
  group_positions_.clear();
  reads_.clear();
  size_t skip_items = 0;
  for (size_t k = 0; k < batch.size; ++k) {
    KeyPlan& plan = plans_[k];
    if (options_.read_before_write ||
        !expire_cache_.StageKnown(key_hash_[k], now_s, &plan.state.stage, &plan.state.fill)) {
      reads_.push_back(k);
      skip_items += batch.keys[k].items.size();
    }
  }
  // Keys whose state is unknown: read them, one MGET per kReadKeysPerMget keys,
  // all in one round. (A key holding another type reads as nil, and its write
  // then fails with WRONGTYPE as usual.)
  skip_.assign(skip_items, 0);
  std::vector<size_t> skip_at(batch.size, SIZE_MAX);
  std::vector<std::vector<std::string>> commands;
  std::vector<RedisReply> replies;
  std::vector<size_t> first_read;  // per MGET: its first index in reads_
  for (size_t at = 0; at < reads_.size();) {
    size_t end = std::min(reads_.size(), at + kReadKeysPerMget);
    if (options_.cluster_node) {
      // One slot per MGET (CROSSSLOT otherwise): a user's keys share one.
      const uint16_t slot = KeySlot(batch.keys[reads_[at]].key);
      for (size_t r = at + 1; r < end; ++r) {
        if (KeySlot(batch.keys[reads_[r]].key) != slot) {
          end = r;
          break;
        }
      }
    }
    if (asking_) commands.push_back({"ASKING"});
    first_read.push_back(at);
    commands.emplace_back();
    commands.back().reserve(end - at + 1);
    commands.back().push_back("MGET");
    for (size_t r = at; r < end; ++r) commands.back().push_back(batch.keys[reads_[r]].key);
    at = end;
  }
  if (!commands.empty()) {
    Status st = conn_->Commands(commands, &replies);
    if (!st.ok()) {
      RedisErrorKind kind = conn_->last_error_kind();
      conn_.reset();
      return Fail(kind, st);
    }
    stats->commands += commands.size();
  }
  size_t next_skip = 0;
  for (size_t m = 0; m < first_read.size(); ++m) {
    const size_t c = asking_ ? 2 * m + 1 : m;  // skip the ASKINGs' replies
    const RedisReply& reply = replies[c];
    const size_t first = first_read[m];
    if (reply.type == RedisReply::Type::kError && options_.cluster_node &&
        ParseRedirect(reply.str)) {
      // Not this node's keys (any more): reported, not planned, not written.
      for (size_t r = first; r < first + commands[c].size() - 1; ++r)
        Redirect(reads_[r], reply.str);
      continue;
    }
    if (reply.type == RedisReply::Type::kError) {
      RedisConnection::ReplyError e{c, RedisConnection::ClassifyErrorReply(reply.str), reply.str};
      if (observer_) observer_(e.kind);
      return ReplyFailure("reading", batch.keys[reads_[first]].key, e);
    }
    if (reply.type != RedisReply::Type::kArray || reply.elements.size() != commands[c].size() - 1)
      return Fail(RedisErrorKind::kProtocol,
                  Unavailable("redis " + conn_->address() + ": MGET: unexpected reply"));
    for (size_t r = 0; r < reply.elements.size(); ++r) {
      const size_t k = reads_[first + r];
      const KeyBits& kb = batch.keys[k];
      const std::string_view value = reply.elements[r].str;  // "" for nil
      KeyPlan& plan = plans_[k];
      plan.read = true;
      plan.state.stage = static_cast<uint32_t>(StagesPresent(stages_, value.size()) - 1);
      plan.state.fill = StagePopcount(value, stages_[plan.state.stage]);
      skip_at[k] = next_skip;
      for (const Hash128& h : kb.items) {
        const bool present = !value.empty() && ValueContains(value, stages_, h);
        skip_[next_skip++] = present;
        stats->items_present += present;
      }
      ++stats->keys_read;
    }
  }
  // Where each key's items go.
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyBits& kb = batch.keys[k];
    KeyPlan& plan = plans_[k];
    plan.first_group = groups_.size();
    if (key_state_[k].failed || key_state_[k].redirected) continue;
    const uint8_t* skip = skip_at[k] == SIZE_MAX ? nullptr : skip_.data() + skip_at[k];
    plan.staged = planner_.Plan(plan.state, kb.items.data(), kb.items.size(), skip, &stats->stages);
    if (!plan.staged) {
      PlannedGroup g;
      g.p = kb.positions.data();
      g.n = kb.positions.size();
      groups_.push_back(g);
    } else {
      const size_t base = group_positions_.size();
      group_positions_.insert(group_positions_.end(), planner_.positions().begin(),
                              planner_.positions().end());
      for (const auto& pg : planner_.groups()) {
        PlannedGroup g;
        g.stage = pg.stage;
        g.begin = base + pg.begin;
        g.n = pg.end - pg.begin;
        groups_.push_back(g);
      }
    }
    plan.n_groups = groups_.size() - plan.first_group;
  }
  for (PlannedGroup& g : groups_) {
    if (g.begin != SIZE_MAX) g.p = group_positions_.data() + g.begin;
  }
  return Status::Ok();
}

Status RedisBitWriter::WriteOnce(const BitBatch& batch, WriteStats* stats) {
  WriteStats local;
  Status st = EnsureConnected();
  if (!st.ok()) return Fail(RedisErrorKind::kConnect, st);
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  st = RecheckMeta(now_s);
  if (!st.ok()) return Fail(RedisErrorKind::kReply, st);
  key_state_.assign(batch.size, KeyState{});
  redirects_.clear();
  key_hash_.resize(batch.size);
  if (expire_cache_.enabled())
    for (size_t k = 0; k < batch.size; ++k) key_hash_[k] = ExpireCache::KeyHash(batch.keys[k].key);
  const bool staged = stages_.size() > 1;
  if (staged) EF_RETURN_IF_ERROR(PlanStages(batch, now_s, &local));
  const bool bitfield = options_.mode == WriteMode::kBitfield;
  size_t i = 0;
  while (i < batch.size) {
    buffer_.clear();
    command_key_.clear();
    command_group_.clear();
    size_t first_key = i;
    while (i < batch.size &&
           (command_key_.size() < options_.max_commands_per_round || i == first_key)) {
      const KeyBits& kb = batch.keys[i];
      KeyState& ks = key_state_[i];
      if (staged && plans_[i].n_groups == 0) {
        // Refused by its read (WRONGTYPE), redirected, or every item already present.
        ks.nothing_to_write = !ks.failed && !ks.redirected;
        ++i;
        continue;
      }
      uint32_t sentinel = 0;
      ks.expire_sent = !expire_cache_.Known(key_hash_[i], kb.expire_at, now_s, &sentinel);
      const bool probe = !ks.expire_sent && bitfield;
      if (staged) {
        const KeyPlan& plan = plans_[i];
        for (size_t g = plan.first_group; g < plan.first_group + plan.n_groups; ++g) {
          const PlannedGroup& pg = groups_[g];
          const bool with_probe = probe && g == plan.first_group;
          size_t n = AppendBits(kb.key, pg.p, pg.n, with_probe ? &sentinel : nullptr);
          command_key_.insert(command_key_.end(), n, i);
          command_group_.insert(command_group_.end(), n, g);
          local.bits += pg.n;
        }
      } else {
        size_t n = AppendBits(kb.key, kb.positions.data(), kb.positions.size(),
                              probe ? &sentinel : nullptr);
        command_key_.insert(command_key_.end(), n, i);
        command_group_.insert(command_group_.end(), n, SIZE_MAX);
        local.bits += kb.positions.size();
      }
      if (ks.expire_sent) {
        AppendExpire(kb);
        command_key_.push_back(i);
        command_group_.push_back(SIZE_MAX);
      }
      ++i;
    }
    if (command_key_.empty()) continue;
    EF_RETURN_IF_ERROR(Pipeline(command_key_.size()));
    local.commands += command_key_.size();
    size_t last_skipped = SIZE_MAX;
    for (const auto& e : errors_) {
      if (observer_) observer_(e.kind);
      size_t key_index = command_key_[e.index];
      if (Redirect(key_index, e.text)) continue;
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
    // which EXPIREATs found their key, and (v2) how many bits each stage gained.
    for (size_t c = 0; c < command_key_.size(); ++c) {
      KeyState& ks = key_state_[command_key_[c]];
      const bool first_of_key = c == 0 || command_key_[c - 1] != command_key_[c];
      const bool last_of_key =
          c + 1 == command_key_.size() || command_key_[c + 1] != command_key_[c];
      if (ks.expire_sent && last_of_key) {
        ks.expire_set = ints_[c].count == 1 && ints_[c].first == 1;
        continue;
      }
      if (ints_[c].zeros < ints_[c].count) ks.old_bit_set = true;
      if (command_group_[c] != SIZE_MAX) {
        const bool had_probe = !ks.expire_sent && bitfield && first_of_key;
        uint64_t zeros = ints_[c].zeros;
        if (had_probe && ints_[c].count > 0 && ints_[c].first == 0) --zeros;
        groups_[command_group_[c]].new_bits += zeros;
      }
    }
  }
  // The expire cache skipped EXPIREAT for a key, but the write found none of the
  // old bits set (the remembered sentinel included): the key may have been lost
  // and re-created by this write. Send its EXPIREAT now (docs: bit_writer.h).
  follow_up_.clear();
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    if (ks.expire_sent || ks.redirected) continue;
    if (ks.failed || ks.old_bit_set || ks.nothing_to_write) {
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
      for (const auto& e : errors_) {
        if (Redirect(follow_up_[at + e.index], e.text)) continue;  // moved meanwhile
        if (observer_) observer_(e.kind);
        return ReplyFailure("EXPIREAT", batch.keys[follow_up_[at + e.index]].key, e);
      }
      for (size_t f = at; f < end; ++f)
        key_state_[follow_up_[f]].expire_set = ints_[f - at].count == 1 && ints_[f - at].first == 1;
      at = end;
    }
  }
  if (staged) RememberStages(batch, now_s);
  // Remember every expiry Redis set (a WRONGTYPE key's too: its writes fail for
  // good, and remembering it saves re-sending EXPIREAT), with the first
  // position of the write that preceded it as the sentinel.
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyBits& kb = batch.keys[k];
    if (!key_state_[k].expire_set) continue;
    // The sentinel: a bit this write set (v2: of the key's first stage written).
    uint32_t sentinel = kb.positions.empty() ? 0 : kb.positions.front();
    if (staged && plans_[k].n_groups > 0 && groups_[plans_[k].first_group].n > 0)
      sentinel = groups_[plans_[k].first_group].p[0];
    expire_cache_.Remember(key_hash_[k], kb.expire_at, now_s, sentinel);
  }
  if (options_.wait_replicas > 0 && redirects_.size() < batch.size) {
    Status ws = WaitReplicas();
    if (!ws.ok()) return ws;
  }
  local.keys = batch.size - local.skipped_keys - redirects_.size();
  if (local.stages.limit_items) LogStageLimit(local.stages, now_s);
  last_error_ = RedisErrorKind::kNone;
  if (stats) *stats = local;
  return Status::Ok();
}

void RedisBitWriter::RememberStages(const BitBatch& batch, int64_t now_s) {
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    const KeyPlan& plan = plans_[k];
    if (ks.failed || ks.redirected) continue;
    if (!ks.expire_sent && !ks.old_bit_set && !ks.nothing_to_write) {
      // Found lost (a follow-up EXPIREAT key): its remembered state is wrong.
      expire_cache_.Forget(key_hash_[k]);
      continue;
    }
    StageState after = plan.state;
    if (plan.n_groups > 0) {
      const PlannedGroup& g = groups_[plan.first_group + plan.n_groups - 1];
      const uint64_t base = g.stage == plan.state.stage ? plan.state.fill : 0;
      after.stage = g.stage;
      after.fill = static_cast<uint32_t>(std::min<uint64_t>(base + g.new_bits, UINT32_MAX));
    }
    expire_cache_.RememberStage(key_hash_[k], now_s, after.stage, after.fill, plan.read);
  }
}

void RedisBitWriter::LogStageLimit(const StageStats& s, int64_t now_s) {
  limit_items_ += s.limit_items;
  limit_keys_ += s.limit_keys;
  if (now_s - limit_logged_at_s_ < 60) return;
  spdlog::warn(
      "redis: {} item(s) of {} key write(s) went into the last stage past its fill since the "
      "last report (filter.stages = {} reached): those users' false-positive rate climbs; raise "
      "filter.stages (exposure_filter_stage_limit_items_total)",
      limit_items_, limit_keys_, stages_.size());
  limit_items_ = limit_keys_ = 0;
  limit_logged_at_s_ = now_s;
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
