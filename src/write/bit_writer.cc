#include "write/bit_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <random>
#include <string_view>

#include "bloom/keys.h"
#include "common/log_fields.h"
#include "common/printable.h"
#include "common/sha1.h"
#include "common/time_arg.h"
#include "redis/cluster.h"
#include "redis/meta.h"
#include "redis/module_probe.h"
#include "write/class_create.h"

namespace ef {

// RESP literals are appended as string_views: their lengths are constants
// wherever the appending function is inlined or not (a const char* overload that
// is not inlined runs strlen on every argument of every command).
using namespace std::string_view_literals;

WriteMode ParseWriteMode(const std::string& name) {
  if (name == "setbit") return WriteMode::kSetbit;
  if (name == "module") return WriteMode::kModule;
  if (name == "bitop") return WriteMode::kBitop;
  if (name == "auto") return WriteMode::kAuto;
  return WriteMode::kBitfield;
}

const char* WriteModeName(WriteMode mode) {
  switch (mode) {
    case WriteMode::kBitfield:
      return "bitfield";
    case WriteMode::kSetbit:
      return "setbit";
    case WriteMode::kModule:
      return "module";
    case WriteMode::kBitop:
      return "bitop";
    case WriteMode::kAuto:
      return "auto";
  }
  return "?";
}

BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis) {
  BitWriterOptions wo;
  wo.redis = redis;
  wo.mode = ParseWriteMode(config.write_mode);
  wo.bitop_threshold = static_cast<size_t>(config.bitop_threshold);
  wo.expire_cache_keys = static_cast<size_t>(config.expire_cache_keys);
  wo.expire_refresh_s = config.expire_refresh_ms / 1000;
  wo.wait_replicas = static_cast<int>(config.wait_replicas);
  wo.wait_timeout_ms = config.wait_timeout_ms;
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
      expire_cache_(options_.expire_cache_keys, options_.expire_refresh_s),
      mode_(options_.mode) {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  tmp_suffix_ = std::string(":ef-tmp:") + hex;
  class_sha_ = Sha1Hex(kCreateClassKeyScript);
  grow_sha_ = Sha1Hex(kGrowClassKeyScript);
}

Status RedisBitWriter::ChooseMode(RedisConnection& conn) {
  if (options_.mode != WriteMode::kAuto && options_.mode != WriteMode::kModule) return Status::Ok();
  auto probe = ProbeModule(conn, options_.redis);
  if (!probe.ok()) return probe.status();
  const bool creates_classed = probe->usable() && effective_ && effective_->v4;
  if (creates_classed && class_key_logged_ != probe->class_key)
    spdlog::info("redis {}: layout v4's keys are created with {}", conn.address(),
                 probe->class_key
                     ? "EF.CLASSKEY (module ef)"
                     : "the Lua creation script: the module has no EF.CLASSKEY for this user "
                       "(a module before it, or an ACL without +ef.classkey)");
  native_class_key_ = probe->class_key;
  if (creates_classed) class_key_logged_ = probe->class_key;
  if (options_.mode == WriteMode::kModule) {
    replicas_ = probe->replica_set;
    if (!probe->usable())
      return Unavailable(
          "redis " + conn.address() +
          ": redis.write_mode is module, but EF.SETBITS is not usable: " + probe->reason);
    return Status::Ok();
  }
  replicas_ = probe->replica_set;
  const WriteMode chosen = probe->usable() ? WriteMode::kModule : WriteMode::kBitop;
  if (chosen != mode_) {
    if (chosen == WriteMode::kModule) {
      spdlog::info(
          "redis {}: write_mode auto: writing with EF.SETBITS (module ef version {} on the node "
          "and on its {} replica(s))",
          conn.address(), probe->master_version, probe->replicas_total);
    } else {
      spdlog::info(
          "redis {}: write_mode auto: writing with plain Redis (BITFIELD, MULTI/BITOP for keys "
          "with more than {} bits in a batch), not EF.SETBITS: {}",
          conn.address(), options_.bitop_threshold, probe->reason);
    }
  }
  mode_ = chosen;
  return Status::Ok();
}

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
  // A meta lost since it was read (DEL, FLUSHALL, a restart without persistence)
  // is stored again as last read, not as configured: its buckets keep their rules.
  Status st = options_.ensure_meta ? options_.ensure_meta(*options_.layout, &effective)
                                   : EnsureMeta(conn, *options_.layout, &effective,
                                                effective_ ? &*effective_ : nullptr);
  if (st.code() == StatusCode::kFailedPrecondition || st.code() == StatusCode::kInternal) {
    // The layout changed while we were away (or the meta key is not a hash):
    // writing on would corrupt every filter. Final for this writer.
    fatal_ = FailedPrecondition("redis " + conn.address() + ": " + st.message());
    return fatal_;
  }
  if (!st.ok()) return st;
  const bool was_v1 = effective_ && effective_->version() == 1;
  if (effective.stages > 1 && was_v1) {
    spdlog::info(
        "redis {}: the layout stored at {} is version {} now: heavy users' filters grow "
        "in stages from this write on",
        conn.address(), MetaKey(effective.prefix), effective.version());
  }
  if (effective.v3 && effective_ && !effective_->v3) {
    spdlog::info(
        "redis {}: the layout stored at {} is version 3 now: buckets from {} (v3_from {}) get "
        "rule 9's positions",
        conn.address(), MetaKey(effective.prefix), FormatTimeRfc3339(effective.v3_from * 1000),
        effective.v3_from);
  }
  if (effective.v4 && effective_ && !effective_->v4) {
    spdlog::info(
        "redis {}: the layout stored at {} is version 4 now: keys of buckets from {} (v4_from "
        "{}) are created with a size class (rule 11)",
        conn.address(), MetaKey(effective.prefix), FormatTimeRfc3339(effective.v4_from * 1000),
        effective.v4_from);
  }
  effective_ = std::move(effective);
  stages_ = effective_->stages > 1 ? effective_->stage_table : std::vector<Stage>{};
  return Status::Ok();
}

Status RedisBitWriter::RecheckMeta(int64_t now_s) {
  if (!options_.layout) return Status::Ok();
  if (mode_ == WriteMode::kModule) {
    // No write tells a lost key (FLUSHALL) from a new one here (no sentinel):
    // ensure the meta every module_meta_check_s instead (and at most 10 s apart
    // while an upgrade may come, as below).
    if (now_s < next_meta_check_s_) return Status::Ok();
    int64_t every = options_.module_meta_check_s;
    if (!effective_ || !effective_->v4) every = std::min<int64_t>(every, kMetaRecheckSeconds);
    next_meta_check_s_ = now_s + every;
  } else {
    // While the stored layout is below version 4, its upgrade may come: read it
    // again before any write when the copy is 10 s old (docs/FORMAT.md rules 9
    // and 11: `layout upgrade --to 3` and `--to 4` put v3_from / v4_from at least
    // 20 s ahead, so no bucket from then on is written by the copy before it).
    if (effective_ && effective_->v4) return Status::Ok();
    if (now_s < next_meta_check_s_) return Status::Ok();
    next_meta_check_s_ = now_s + kMetaRecheckSeconds;
  }
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
  class_script_loaded_ = false;  // script caches are per server
  grow_script_loaded_ = false;
  EF_RETURN_IF_ERROR(CheckMeta(**conn));
  EF_RETURN_IF_ERROR(ChooseMode(**conn));
  if (mode_ == WriteMode::kModule)
    next_meta_check_s_ = static_cast<int64_t>(std::time(nullptr)) + options_.module_meta_check_s;
  conn_ = std::move(conn.value());
  return Status::Ok();
}

// The bits of a class header (Redis bit order: bit 0 is the high bit of byte 0).
static size_t HeaderBits(uint8_t header, uint32_t* out) {
  size_t n = 0;
  for (uint32_t b = 0; b < 8; ++b)
    if (header & (0x80u >> b)) out[n++] = b;
  return n;
}

size_t RedisBitWriter::AppendBits(const std::string& key, const uint32_t* p, size_t n,
                                  const uint32_t* probe, int64_t expire_at, uint8_t header) {
  if (mode_ == WriteMode::kModule) {
    // The header's bits first (positions 0-7), then the stage's (from 8 on).
    uint32_t head[8];
    const size_t h = HeaderBits(header, head);
    BeginCommand();
    buffer_.append("*4\r\n$10\r\nEF.SETBITS\r\n"sv);
    AppendRespBulk(key, &buffer_);
    buffer_.push_back('$');
    buffer_.append(std::to_string(4 * (h + n)));
    buffer_.append("\r\n"sv);
    const size_t at = buffer_.size();
    buffer_.resize(at + 4 * (h + n));
    char* out = buffer_.data() + at;
    for (size_t i = 0; i < h + n; ++i) {
      const uint32_t v = i < h ? head[i] : p[i - h];
      out[4 * i] = static_cast<char>(v & 0xff);
      out[4 * i + 1] = static_cast<char>((v >> 8) & 0xff);
      out[4 * i + 2] = static_cast<char>((v >> 16) & 0xff);
      out[4 * i + 3] = static_cast<char>(v >> 24);
    }
    buffer_.append("\r\n"sv);
    AppendRespBulk(static_cast<uint64_t>(expire_at), &buffer_);
    return 1;
  }
  if (mode_ != WriteMode::kSetbit) {  // bitfield, and bitop's sparse keys
    BeginCommand();
    AppendRespArrayHeader(2 + 4 * n + (header ? 4 : probe ? 3 : 0), &buffer_);
    AppendRespBulk("BITFIELD", &buffer_);
    AppendRespBulk(key, &buffer_);
    if (header) {
      // The class header again (rule 11), first: its old value is the probe (0:
      // the key was lost, or never created with its class).
      buffer_.append("$3\r\nSET\r\n$2\r\nu8\r\n$1\r\n0\r\n"sv);
      AppendRespBulk(uint64_t{header}, &buffer_);
    } else if (probe) {
      // First, so that it reads the bit as it was before this write.
      buffer_.append("$3\r\nGET\r\n$2\r\nu1\r\n"sv);
      AppendRespBulk(static_cast<uint64_t>(*probe), &buffer_);
    }
    for (size_t i = 0; i < n; ++i) {
      buffer_.append("$3\r\nSET\r\n$2\r\nu1\r\n"sv);
      AppendRespBulk(static_cast<uint64_t>(p[i]), &buffer_);
      buffer_.append("$1\r\n1\r\n"sv);
    }
    return 1;
  }
  // setbit: the header's bits, if any, are AppendHeaderBits's.
  for (size_t i = 0; i < n; ++i) {
    BeginCommand();
    buffer_.append("*4\r\n$6\r\nSETBIT\r\n"sv);
    AppendRespBulk(key, &buffer_);
    AppendRespBulk(static_cast<uint64_t>(p[i]), &buffer_);
    buffer_.append("$1\r\n1\r\n"sv);
  }
  return n;
}

void RedisBitWriter::AppendGrow(const BitBatch& batch, size_t k) {
  if (!key_header_[k] || plans_.empty()) return;
  const KeyPlan& kp = plans_[k];
  if (kp.n_groups == 0) return;
  const uint32_t last = groups_[kp.first_group + kp.n_groups - 1].stage;
  if (last <= kp.state.stage) return;  // no stage starts in this write
  BeginCommand();
  buffer_.append("*5\r\n$7\r\nEVALSHA\r\n"sv);
  AppendRespBulk(grow_sha_, &buffer_);
  buffer_.append("$1\r\n1\r\n"sv);
  AppendRespBulk(batch.keys[k].key, &buffer_);
  AppendRespBulk(ValueBytes(*TableOf(k), last + 1), &buffer_);
  Expect(1, k, SIZE_MAX, Reply::kGrow);
}

size_t RedisBitWriter::AppendHeaderBits(const std::string& key, uint8_t header) {
  uint32_t head[8];
  const size_t h = HeaderBits(header, head);
  for (size_t i = 0; i < h; ++i) {
    BeginCommand();
    buffer_.append("*4\r\n$6\r\nSETBIT\r\n"sv);
    AppendRespBulk(key, &buffer_);
    AppendRespBulk(uint64_t{head[i]}, &buffer_);
    buffer_.append("$1\r\n1\r\n"sv);
  }
  return h;
}

// The temporary key of `key`: the key itself with the suffix appended, so that
// it starts with the key prefix (an ACL written as `~<prefix>*` covers it) and
// keeps the key's hash tag (`<prefix>{<user>}:...`: the same Redis Cluster slot,
// since a tag is the first `{...}` of a key and the suffix comes after it).
// False on a cluster node if the slots still differ (a key with no tag), and the
// caller writes that key without one.
static bool TmpKey(const std::string& key, const std::string& suffix, bool cluster,
                   std::string* tmp) {
  tmp->assign(key);
  tmp->append(suffix);
  return !cluster || KeySlot(*tmp) == KeySlot(key);
}

size_t RedisBitWriter::AppendBitop(const BitBatch& batch, size_t k) {
  const KeyBits& kb = batch.keys[k];
  std::string tmp;
  TmpKey(kb.key, tmp_suffix_, options_.cluster_node, &tmp);
  // The mask: every position of the key in this batch (Redis bit order: bit 0 is
  // the high bit of byte 0).
  mask_.clear();
  auto set = [this](const uint32_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const size_t byte = p[i] >> 3;
      if (byte >= mask_.size()) mask_.resize(byte + 1, '\0');
      mask_[byte] = static_cast<char>(static_cast<uint8_t>(mask_[byte]) | (0x80u >> (p[i] & 7)));
    }
  };
  const KeyPlan* plan = TableOf(k) ? &plans_[k] : nullptr;                 // planned in stages
  if (key_header_[k]) mask_.assign(1, static_cast<char>(key_header_[k]));  // rule 11's header
  if (plan) {
    for (size_t g = plan->first_group; g < plan->first_group + plan->n_groups; ++g)
      set(groups_[g].p, groups_[g].n);
  } else {
    set(key_pos_[k].p, key_pos_[k].n);
  }
  buffer_.append("*1\r\n$5\r\nMULTI\r\n"sv);
  buffer_.append("*5\r\n$3\r\nSET\r\n"sv);
  AppendRespBulk(tmp, &buffer_);
  AppendRespBulk(mask_, &buffer_);
  buffer_.append("$2\r\nPX\r\n$5\r\n60000\r\n"sv);
  buffer_.append("*5\r\n$5\r\nBITOP\r\n$2\r\nOR\r\n"sv);
  AppendRespBulk(kb.key, &buffer_);
  AppendRespBulk(kb.key, &buffer_);
  AppendRespBulk(tmp, &buffer_);
  buffer_.append("*2\r\n$3\r\nDEL\r\n"sv);
  AppendRespBulk(tmp, &buffer_);
  AppendExpire(kb);
  buffer_.append("*1\r\n$4\r\nEXEC\r\n"sv);
  if (!plan) return 6;
  // The fill of the last stage written (the one the key's stage state tracks).
  const Stage& stage = (*TableOf(k))[groups_[plan->first_group + plan->n_groups - 1].stage];
  const uint64_t first = stage.offset / 8;
  buffer_.append("*4\r\n$8\r\nBITCOUNT\r\n"sv);
  AppendRespBulk(kb.key, &buffer_);
  AppendRespBulk(first, &buffer_);
  AppendRespBulk(first + (static_cast<uint64_t>(stage.m) + 7) / 8 - 1, &buffer_);
  return 7;
}

void RedisBitWriter::AppendExpire(const KeyBits& kb) {
  BeginCommand();
  buffer_.append("*3\r\n$8\r\nEXPIREAT\r\n"sv);
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

// EF.SETBITS's answer to an expireat that is not in the future (every module
// version says it so).
static bool IsExpiredReply(std::string_view text) {
  return text.find("EF.SETBITS expireat") != std::string_view::npos &&
         text.find("is not in the future") != std::string_view::npos;
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
  // WAIT answers after up to wait_timeout (Redis checks blocked clients' timeouts
  // from its event loop, so a little later): the socket waits that long on top of
  // the usual command timeout, so a WAIT that times out is reported as such
  // ("0 of n replicas"), not as a dropped connection.
  conn_->SetCommandTimeout(options_.redis.command_timeout_ms + options_.wait_timeout_ms);
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

// Copies a key's whole value and expiry to the replicas: a script's effects are
// what replicates (SET, PEXPIREAT), not the script, so a replica that refused
// the key's EF.SETBITS gets the value the master holds, atomically.
static constexpr char kHealScript[] =
    "redis.replicate_commands() "
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return 0 end "
    "local t = redis.call('PTTL', KEYS[1]) "
    "redis.call('SET', KEYS[1], v) "
    "if t > 0 then redis.call('PEXPIRE', KEYS[1], t) end "
    "return 1";

Status RedisBitWriter::CheckReplicasUnchanged(const BitBatch& batch) {
  auto now = ReadReplicaSet(*conn_);
  if (!now.ok()) {
    const RedisErrorKind kind = conn_->last_error_kind();
    conn_.reset();
    return Fail(kind == RedisErrorKind::kNone ? RedisErrorKind::kReply : kind, now.status());
  }
  if (*now == replicas_) return Status::Ok();
  // A replica attached since the probe: it may have refused this batch's
  // EF.SETBITS (an earlier batch was in its initial sync: this check follows
  // every write, and a replica is listed before its sync starts).
  spdlog::warn(
      "redis {}: its replicas changed since the module was probed (were [{}], now [{}]) while "
      "writing with EF.SETBITS: copying this batch's {} key(s) to them and probing every "
      "replica again before the next write",
      conn_->address(), replicas_, *now, batch.size);
  std::vector<std::vector<std::string>> heal;
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    if (ks.failed || ks.redirected) continue;
    heal.push_back({"EVAL", kHealScript, "1", batch.keys[k].key});
  }
  std::vector<RedisReply> replies;
  Status st = heal.empty() ? Status::Ok() : conn_->Commands(heal, &replies);
  for (size_t i = 0; st.ok() && i < replies.size(); ++i) {
    if (replies[i].type == RedisReply::Type::kError)
      st = Unavailable("redis " + conn_->address() + ": copying '" + Printable(heal[i][3]) +
                       "' to the replicas: " + Printable(replies[i].str));
  }
  if (!st.ok()) {
    conn_.reset();  // the next Write connects and probes; the batch is written again
    return Fail(RedisErrorKind::kReply, st);
  }
  replicas_ = *now;
  probe_due_ = true;
  return Status::Ok();
}

Status RedisBitWriter::PositionsByStoredRule(const BitBatch& batch) {
  key_rule_.resize(batch.size);
  key_pos_.resize(batch.size);
  fixed_positions_.clear();
  fixed_at_.clear();
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyBits& kb = batch.keys[k];
    const PositionRule rule = effective_ ? effective_->RuleFor(kb.bucket_start) : kb.rule;
    key_rule_[k] = rule;
    key_pos_[k] = {kb.positions.data(), kb.positions.size()};
    // A key with a size class is planned from its items with its class's table
    // (PlanKey): stage-0 positions by the meta's m are of no use to it.
    if (effective_ && effective_->HasClass(kb.bucket_start)) continue;
    if (rule == kb.rule && !kb.classed) continue;
    // The coalescer guessed the rule before this write read the stored layout
    // (the first batch, or one coalesced during a `layout upgrade --to 3`), or
    // took the key for one with a size class (its config's layout version 4 while
    // the stored meta is not, or not from this bucket on).
    if (kb.items.empty() && !kb.positions.empty()) {
      return Internal("key '" + Printable(kb.key) +
                      "': its positions follow another rule than its bucket's and its items "
                      "are not kept to compute them again");
    }
    const Layout& l = *effective_;
    const size_t begin = fixed_positions_.size();
    fixed_positions_.resize(begin + kb.items.size() * l.k);
    uint32_t* out = fixed_positions_.data() + begin;
    for (const Hash128& h : kb.items) {
      ComputePositions(h, l.m, l.k, rule, out);
      out += l.k;
    }
    uint32_t* end = unique_.Run(fixed_positions_.data() + begin,
                                fixed_positions_.data() + fixed_positions_.size(), 0, l.m);
    fixed_positions_.resize(static_cast<size_t>(end - fixed_positions_.data()));
    fixed_at_.push_back({k, begin});
  }
  for (size_t f = 0; f < fixed_at_.size(); ++f) {
    const size_t begin = fixed_at_[f].second;
    const size_t end = f + 1 < fixed_at_.size() ? fixed_at_[f + 1].second : fixed_positions_.size();
    key_pos_[fixed_at_[f].first] = {fixed_positions_.data() + begin, end - begin};
  }
  return Status::Ok();
}

Status RedisBitWriter::PlanStages(const BitBatch& batch, int64_t now_s, WriteStats* stats) {
  if (forget_states_.exchange(false)) expire_cache_.ForgetStages();
  plans_.assign(batch.size, KeyPlan{});
  groups_.clear();
  group_positions_.clear();
  reads_.clear();
  class_reads_.clear();
  values_.assign(batch.size, std::string_view());
  skip_.assign(ChooseReads(batch, now_s), 0);
  std::vector<RedisReply> replies;  // values_ points into it until the keys are planned
  EF_RETURN_IF_ERROR(ReadStates(batch, &replies, stats));
  for (size_t k = 0; k < batch.size; ++k) PlanKey(batch, k, stats);
  values_.assign(batch.size, std::string_view());  // `replies` goes now
  for (PlannedGroup& g : groups_) {
    if (g.begin != SIZE_MAX) g.p = group_positions_.data() + g.begin;
  }
  return Status::Ok();
}

size_t RedisBitWriter::ChooseReads(const BitBatch& batch, int64_t now_s) {
  size_t skip_items = 0;
  for (size_t k = 0; k < batch.size; ++k) {
    KeyPlan& plan = plans_[k];
    if (key_state_[k].expired) continue;  // not written
    const KeyBits& kb = batch.keys[k];
    const bool classed = effective_->HasClass(kb.bucket_start);
    if (!classed && stages_.size() <= 1) continue;  // one stage: its stage-0 positions
    // Read the key when its state is unknown, or when some item of the batch may
    // bring its stage to fill_s (docs/FORMAT.md rule 8: the bits decide then).
    uint8_t header = 0;
    bool known =
        !options_.read_before_write &&
        expire_cache_.StageKnown(key_hash_[k], now_s, &plan.state.stage, &plan.state.fill, &header);
    if (known && classed) {
      known = header != 0 && header <= effective_->class_tables.size();
      if (known) key_header_[k] = header;
    }
    if (known) planner_.Use(*TableOf(k), classed);
    if (!known || planner_.NeedsValue(plan.state, kb.items.data(), kb.items.size(), &plan.fit)) {
      // A classed key is read by the creation script (rule 11): created if absent.
      (classed ? class_reads_ : reads_).push_back(k);
      if (options_.read_before_write) skip_items += kb.items.size();
    }
  }
  return skip_items;
}

Status RedisBitWriter::ReadStates(const BitBatch& batch, std::vector<RedisReply>* replies,
                                  WriteStats* stats) {
  // The keys of reads_: one MGET per kReadKeysPerMget keys, all in one round. (A
  // key holding another type reads as nil, and its write then fails with
  // WRONGTYPE as usual.)
  std::vector<Mget> mgets;
  std::vector<std::vector<std::string>> commands;
  for (size_t at = 0; at < reads_.size();) {
    const size_t end = MgetEnd(batch, at);
    if (asking_) commands.push_back({"ASKING"});
    mgets.push_back({commands.size(), at, end});
    commands.emplace_back();
    commands.back().reserve(end - at + 1);
    commands.back().push_back("MGET");
    for (size_t r = at; r < end; ++r) commands.back().push_back(batch.keys[reads_[r]].key);
    at = end;
  }
  // The creation script per classed key: EVALSHA, but the first one whole (EVAL,
  // which caches it) until this connection has sent it (class_script_loaded_);
  // in module mode with EF.CLASSKEY that command instead, with the script's
  // arguments. The growth script is made known with the first classed read of a
  // connection (grow_script_loaded_: EVAL of a call that changes nothing, a length
  // of 0). No SCRIPT LOAD: the documented ACL allows EVAL and EVALSHA (docs/CONFIG.md).
  const bool native = native_class_key_ && mode_ == WriteMode::kModule;
  const bool create_whole = !class_script_loaded_ && !native && !class_reads_.empty();
  const bool grow_whole = !grow_script_loaded_ && !class_reads_.empty();
  std::vector<size_t> script_at;  // per class_reads_: its command's index
  for (size_t k : class_reads_) {
    if (asking_) commands.push_back({"ASKING"});
    script_at.push_back(commands.size());
    if (native)
      commands.push_back({"EF.CLASSKEY"});
    else if (create_whole && script_at.size() == 1)
      commands.push_back({"EVAL", kCreateClassKeyScript, "3"});
    else
      commands.push_back({"EVALSHA", class_sha_, "3"});
    for (std::string& a : ClassKeyCall(*effective_, batch.keys[k].key, batch.keys[k].bucket_start))
      commands.back().push_back(std::move(a));
    if (grow_whole && script_at.size() == 1) {
      if (asking_) commands.push_back({"ASKING"});
      commands.push_back({"EVAL", kGrowClassKeyScript, "1", batch.keys[k].key, "0"});
    }
  }
  if (!commands.empty()) {
    Status st = conn_->Commands(commands, replies);
    if (!st.ok()) {
      RedisErrorKind kind = conn_->last_error_kind();
      conn_.reset();
      return Fail(kind, st);
    }
    stats->commands += commands.size();
    if (create_whole) class_script_loaded_ = true;
    if (grow_whole) grow_script_loaded_ = true;
  }
  size_t next_skip = 0;
  for (const Mget& mget : mgets)
    EF_RETURN_IF_ERROR(TakeValues(batch, mget, (*replies)[mget.command], &next_skip, stats));
  for (size_t i = 0; i < class_reads_.size(); ++i) {
    EF_RETURN_IF_ERROR(
        TakeClassValue(batch, class_reads_[i], (*replies)[script_at[i]], &next_skip, stats));
  }
  return Status::Ok();
}

size_t RedisBitWriter::MgetEnd(const BitBatch& batch, size_t at) const {
  const size_t end = std::min(reads_.size(), at + kReadKeysPerMget);
  if (!options_.cluster_node) return end;
  // One slot per MGET (CROSSSLOT otherwise): a user's keys share one.
  const uint16_t slot = KeySlot(batch.keys[reads_[at]].key);
  for (size_t r = at + 1; r < end; ++r) {
    if (KeySlot(batch.keys[reads_[r]].key) != slot) return r;
  }
  return end;
}

Status RedisBitWriter::TakeValues(const BitBatch& batch, const Mget& mget, const RedisReply& reply,
                                  size_t* next_skip, WriteStats* stats) {
  if (reply.type == RedisReply::Type::kError && options_.cluster_node && ParseRedirect(reply.str)) {
    // Not this node's keys (any more): reported, not planned, not written.
    for (size_t r = mget.first; r < mget.end; ++r) Redirect(reads_[r], reply.str);
    return Status::Ok();
  }
  if (reply.type == RedisReply::Type::kError) {
    RedisConnection::ReplyError e{mget.command, RedisConnection::ClassifyErrorReply(reply.str),
                                  reply.str};
    if (observer_) observer_(e.kind);
    return ReplyFailure("reading", batch.keys[reads_[mget.first]].key, e);
  }
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() != mget.end - mget.first)
    return Fail(RedisErrorKind::kProtocol,
                Unavailable("redis " + conn_->address() + ": MGET: unexpected reply"));
  for (size_t r = 0; r < reply.elements.size(); ++r) {
    const size_t k = reads_[mget.first + r];
    KeyPlan& plan = plans_[k];
    plan.read = true;
    values_[k] = reply.elements[r].str;  // "" for nil; lives as long as the reply
    ++stats->keys_read;
    if (!options_.read_before_write) continue;
    // replay: an item the value holds in any stage (rule 6) is not written again,
    // so replaying a range does not fill a stage by itself.
    plan.skip_at = *next_skip;
    for (const Hash128& h : batch.keys[k].items) {
      const bool present =
          !values_[k].empty() && ValueContains(values_[k], stages_, key_rule_[k], h);
      skip_[(*next_skip)++] = present;
      stats->items_present += present;
    }
  }
  return Status::Ok();
}

Status RedisBitWriter::TakeClassValue(const BitBatch& batch, size_t k, const RedisReply& reply,
                                      size_t* next_skip, WriteStats* stats) {
  const KeyBits& kb = batch.keys[k];
  if (reply.type == RedisReply::Type::kError) {
    if (options_.cluster_node && ParseRedirect(reply.str)) {
      Redirect(k, reply.str);  // not this node's key (any more)
      return Status::Ok();
    }
    RedisConnection::ReplyError e{0, RedisConnection::ClassifyErrorReply(reply.str), reply.str};
    if (observer_) observer_(e.kind);
    if (reply.str.rfind("NOSCRIPT", 0) == 0) ScriptsFlushed();
    if (e.kind == RedisErrorKind::kWrongType) {
      SkipKey(batch, k, "holds another type (" + Printable(e.text) + ")", stats);
      return Status::Ok();
    }
    return ReplyFailure("creating", kb.key, e);
  }
  if (reply.type != RedisReply::Type::kString)
    return Fail(RedisErrorKind::kProtocol,
                Unavailable("redis " + conn_->address() + ": creating '" + Printable(kb.key) +
                            "': unexpected reply to layout v4's creation script"));
  const std::vector<Stage>* table = effective_->TableFor(reply.str, kb.bucket_start);
  if (!table || reply.str.empty()) {
    // Written by something that does not know its class (rule 11): readers leave
    // it out, and bits of another geometry would not help them.
    SkipKey(batch, k,
            "holds a value whose first byte (" +
                std::to_string(reply.str.empty() ? 0 : static_cast<uint8_t>(reply.str[0])) +
                ") names no size class of the stored layout",
            stats);
    return Status::Ok();
  }
  key_header_[k] = static_cast<uint8_t>(reply.str[0]);
  KeyPlan& plan = plans_[k];
  plan.read = true;
  values_[k] = reply.str;  // lives as long as the reply
  ++stats->keys_read;
  if (!options_.read_before_write) return Status::Ok();
  plan.skip_at = *next_skip;
  for (const Hash128& h : kb.items) {
    const bool present = ValueContains(values_[k], *table, key_rule_[k], h);
    skip_[(*next_skip)++] = present;
    stats->items_present += present;
  }
  return Status::Ok();
}

void RedisBitWriter::SkipKey(const BitBatch& batch, size_t k, const std::string& why,
                             WriteStats* local) {
  KeyState& ks = key_state_[k];
  if (ks.failed) return;
  ks.failed = true;
  ++local->skipped_keys;
  LogWith(spdlog::level::warn, {{"key", Printable(batch.keys[k].key)}},
          "redis: key '{}' {}; its bits are skipped", Printable(batch.keys[k].key), why);
}

void RedisBitWriter::PlanKey(const BitBatch& batch, size_t k, WriteStats* stats) {
  const KeyBits& kb = batch.keys[k];
  KeyPlan& plan = plans_[k];
  plan.first_group = groups_.size();
  if (key_state_[k].failed || key_state_[k].redirected) return;
  const uint8_t* skip = plan.skip_at == SIZE_MAX ? nullptr : skip_.data() + plan.skip_at;
  const std::vector<Stage>* table = TableOf(k);
  if (!table) {  // one stage, no class: the coalescer's positions
    groups_.push_back(PlannedGroup{0, key_pos_[k].p, key_pos_[k].n});
    plan.n_groups = 1;
    return;
  }
  planner_.Use(*table, key_header_[k] != 0);
  if (plan.read) {
    plan.staged = planner_.PlanValue(values_[k], kb.items.data(), kb.items.size(), skip,
                                     key_rule_[k], &stats->stages);
    plan.state = planner_.start();
    stats->items_present += planner_.present();
  } else {
    plan.staged = planner_.Plan(plan.state, kb.items.data(), kb.items.size(), skip, key_rule_[k],
                                &stats->stages, plan.fit);
  }
  if (!plan.staged) {
    PlannedGroup g;
    g.p = key_pos_[k].p;
    g.n = key_pos_[k].n;
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

namespace {

// A reply of exactly one integer, equal to v (EXPIREAT's 1, EXISTS's 0).
inline bool OneInt(const ReplyScanner::Ints& r, int64_t v) { return r.count == 1 && r.first == v; }

inline uint64_t NonNegative(int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); }

// BITFIELD's or SETBIT's reply: how many of the old bits it returned were 0, less the
// sentinel probe's (BITFIELD GET, the first integer) when the key's write had one
// and it read 0.
inline uint64_t NewBitsOfBits(const ReplyScanner::Ints& r, bool had_probe) {
  uint64_t zeros = r.zeros;
  if (had_probe && r.count > 0 && r.first == 0) --zeros;
  return zeros;
}

// BITCOUNT's fill of a stage after the write, less its fill before (0 for another
// stage than the key's state's).
inline uint64_t FillGained(int64_t fill_after, uint64_t fill_before) {
  const uint64_t fill = NonNegative(fill_after);
  return fill > fill_before ? fill - fill_before : 0;
}

// Command c of a round is the first of its key's (command_key_).
inline bool FirstOfKey(const std::vector<size_t>& command_key, size_t c) {
  return c == 0 || command_key[c - 1] != command_key[c];
}

// A MULTI/BITOP reply answered ASK or TRYAGAIN on a cluster node (a slot being
// migrated): the key is written again as BITFIELD (KeyState::plain_retry).
inline bool AskedToRetryPlain(bool bits_reply, std::string_view text) {
  return !bits_reply && (text.rfind("ASK ", 0) == 0 || text.rfind("TRYAGAIN", 0) == 0);
}

}  // namespace

Status RedisBitWriter::WriteOnce(const BitBatch& batch, WriteStats* stats) {
  BatchPlan plan;
  EF_RETURN_IF_ERROR(StartBatch(&plan));
  WriteStats local;
  EF_RETURN_IF_ERROR(PlanKeys(batch, plan, &local));
  bool meta_gone = false;  // the first round's EXISTS <prefix>meta answered 0
  EF_RETURN_IF_ERROR(WriteRounds(batch, plan, &local, &meta_gone));
  EF_RETURN_IF_ERROR(FollowUp(batch, plan, meta_gone, &local));
  EF_RETURN_IF_ERROR(Conclude(batch, plan, meta_gone, &local));
  last_error_ = RedisErrorKind::kNone;
  if (stats) *stats = local;
  return Status::Ok();
}

Status RedisBitWriter::StartBatch(BatchPlan* plan) {
  Status st = EnsureConnected();
  if (!st.ok()) return Fail(RedisErrorKind::kConnect, st);
  if (probe_due_) {
    probe_due_ = false;
    st = ChooseMode(*conn_);
    if (!st.ok()) {
      probe_due_ = true;
      return Fail(RedisErrorKind::kReply, st);
    }
  }
  plan->now_s = static_cast<int64_t>(std::time(nullptr));
  st = RecheckMeta(plan->now_s);
  if (!st.ok()) return Fail(RedisErrorKind::kReply, st);
  plan->staged = stages_.size() > 1 || (effective_ && effective_->v4);
  plan->mode = mode_;
  return Status::Ok();
}

Status RedisBitWriter::PlanKeys(const BitBatch& batch, const BatchPlan& plan, WriteStats* local) {
  key_state_.assign(batch.size, KeyState{});
  // A key whose bucket has expired is not written (EXPIREAT would delete it at
  // once; EF.SETBITS refuses it): a batch held through an outage or a replay at
  // the window's edge. Dropped and counted, so the pipeline goes on.
  for (size_t k = 0; k < batch.size; ++k) {
    if (batch.keys[k].expire_at > plan.now_s) continue;
    key_state_[k].failed = key_state_[k].expired = true;
    ++local->expired_keys;
  }
  redirects_.clear();
  key_header_.assign(batch.size, 0);
  key_hash_.resize(batch.size);
  if (expire_cache_.enabled())
    for (size_t k = 0; k < batch.size; ++k) key_hash_[k] = ExpireCache::KeyHash(batch.keys[k].key);
  EF_RETURN_IF_ERROR(PositionsByStoredRule(batch));
  if (plan.staged) EF_RETURN_IF_ERROR(PlanStages(batch, plan.now_s, local));
  return Status::Ok();
}

Status RedisBitWriter::WriteRounds(const BitBatch& batch, const BatchPlan& plan, WriteStats* local,
                                   bool* meta_gone) {
  // Pass 0 writes every key; pass 1 (cluster_node) rewrites with BITFIELD the keys
  // whose MULTI/BITOP form got ASK or TRYAGAIN: in a migrating slot the absent
  // temporary key is answered ASK even when the key itself is still here.
  plain_retry_.clear();
  for (int pass = 0; pass < 2; ++pass) {
    const size_t count = pass == 0 ? batch.size : plain_retry_.size();
    for (size_t at = 0; at < count;) {
      at = EncodeRound(batch, plan, pass, at, count, local);
      if (command_key_.empty()) continue;
      EF_RETURN_IF_ERROR(Pipeline(command_key_.size()));
      // Writes only (not the meta's EXISTS).
      local->commands += command_key_.size() - (command_reply_.front() == Reply::kMeta ? 1 : 0);
      EF_RETURN_IF_ERROR(TriageErrors(batch, local));
      ReadReplies(plan, meta_gone);
    }
  }
  return Status::Ok();
}

size_t RedisBitWriter::EncodeRound(const BitBatch& batch, const BatchPlan& plan, int pass,
                                   size_t at, size_t count, WriteStats* local) {
  buffer_.clear();
  command_key_.clear();
  command_group_.clear();
  command_reply_.clear();
  const size_t first_at = at;
  if (pass == 0 && first_at == 0 && options_.layout && !asking_) {
    // Is the meta still there? (Answered with the writes: no extra round trip.)
    buffer_.append("*2\r\n$6\r\nEXISTS\r\n"sv);
    AppendRespBulk(MetaKey(options_.layout->prefix), &buffer_);
    Expect(1, SIZE_MAX, SIZE_MAX, Reply::kMeta);
  }
  while (at < count && (command_key_.size() < options_.max_commands_per_round || at == first_at)) {
    const size_t k = pass == 0 ? at : plain_retry_[at];
    ++at;
    KeyState& ks = key_state_[k];
    ks.plain_retry = false;
    if (ks.expired) continue;
    if (plan.staged && plans_[k].n_groups == 0) {
      // Refused by its read (WRONGTYPE), redirected, or every item already present.
      ks.nothing_to_write = !ks.failed && !ks.redirected;
      continue;
    }
    if (plan.mode == WriteMode::kBitop && !asking_ && pass == 0 &&
        EncodeBitop(batch, plan, k, local))
      continue;
    EncodeBits(batch, plan, pass, k, local);
  }
  return at;
}

bool RedisBitWriter::EncodeBitop(const BitBatch& batch, const BatchPlan& plan, size_t k,
                                 WriteStats* local) {
  const KeyPlan& kp = plans_[k];
  size_t key_bits = key_pos_[k].n;
  if (plan.staged) {
    key_bits = 0;
    for (size_t g = 0; g < kp.n_groups; ++g) key_bits += groups_[kp.first_group + g].n;
  }
  if (key_bits <= options_.bitop_threshold ||
      !TmpKey(batch.keys[k].key, tmp_suffix_, options_.cluster_node, &tmp_))
    return false;
  key_state_[k].expire_sent = true;  // EXPIREAT inside the MULTI
  AppendGrow(batch, k);
  const size_t n = AppendBitop(batch, k);
  Expect(5, k, SIZE_MAX, Reply::kTxn);
  Expect(1, k, SIZE_MAX, Reply::kExec);
  if (n == 7) Expect(1, k, kp.first_group + kp.n_groups - 1, Reply::kCount);
  local->bits += key_bits;
  return true;
}

void RedisBitWriter::EncodeBits(const BitBatch& batch, const BatchPlan& plan, int pass, size_t k,
                                WriteStats* local) {
  const KeyBits& kb = batch.keys[k];
  KeyState& ks = key_state_[k];
  uint32_t sentinel = 0;
  // module: EF.SETBITS sets the expiry itself, only when missing.
  ks.expire_sent =
      !plan.module() && !expire_cache_.Known(key_hash_[k], kb.expire_at, plan.now_s, &sentinel);
  const bool probe = !ks.expire_sent && plan.bitfield();
  const Reply bits_reply = plan.module() ? Reply::kModule : Reply::kBits;
  // Layout v4: every write of a classed key sets its header again (rule 11), with
  // its first command, so that a key lost behind the writer's back and re-created
  // by this write still names its class (setbit: SETBITs of its own).
  const uint8_t header = key_header_[k];
  if (header && mode_ == WriteMode::kSetbit)
    Expect(AppendHeaderBits(kb.key, header), k, SIZE_MAX, Reply::kHeader);
  AppendGrow(batch, k);
  if (plan.staged) {
    const KeyPlan& kp = plans_[k];
    for (size_t g = kp.first_group; g < kp.first_group + kp.n_groups; ++g) {
      const PlannedGroup& pg = groups_[g];
      const bool first = g == kp.first_group;
      const size_t n = AppendBits(kb.key, pg.p, pg.n, probe && first ? &sentinel : nullptr,
                                  kb.expire_at, first ? header : 0);
      Expect(n, k, g, bits_reply);
      if (pass == 0) local->bits += pg.n;
    }
  } else {
    const size_t n =
        AppendBits(kb.key, key_pos_[k].p, key_pos_[k].n, probe ? &sentinel : nullptr, kb.expire_at);
    Expect(n, k, SIZE_MAX, bits_reply);
    if (pass == 0) local->bits += key_pos_[k].n;
  }
  if (ks.expire_sent) {
    AppendExpire(kb);
    Expect(1, k, SIZE_MAX, Reply::kExpire);
  }
}

Status RedisBitWriter::TriageErrors(const BitBatch& batch, WriteStats* local) {
  for (const auto& e : errors_) {
    const Reply reply = command_reply_[e.index];
    // The meta's check alone: a cluster node that does not hold the meta
    // answers MOVED (its holder's writer checks it).
    if (reply == Reply::kMeta) continue;
    if (observer_) observer_(e.kind);
    const size_t k = command_key_[e.index];
    KeyState& ks = key_state_[k];
    if (ks.plain_retry) continue;
    if (options_.cluster_node &&
        AskedToRetryPlain(
            reply == Reply::kBits || reply == Reply::kExpire || reply == Reply::kModule, e.text)) {
      ks.plain_retry = true;
      plain_retry_.push_back(k);
      continue;
    }
    if (Redirect(k, e.text)) continue;
    if (reply == Reply::kGrow && e.text.rfind("NOSCRIPT", 0) == 0) ScriptsFlushed();
    // A MULTI with a redirected command ends in EXECABORT: that key's alone.
    if (ks.redirected) continue;
    if (reply == Reply::kModule && IsExpiredReply(e.text)) {
      // EF.SETBITS refuses an expiry that is not in the future (Redis's
      // clock): the bucket has expired, as EXPIREAT would have deleted the
      // key in the other modes. Dropped and counted; never retried.
      if (!ks.failed) {
        ks.failed = true;
        ++local->expired_keys;
      }
      continue;
    }
    if (e.kind == RedisErrorKind::kWrongType) {
      SkipKey(batch, k, "holds another type (" + Printable(e.text) + ")", local);
      continue;
    }
    return ReplyFailure("writing", batch.keys[k].key, e);
  }
  return Status::Ok();
}

void RedisBitWriter::ReadReplies(const BatchPlan& plan, bool* meta_gone) {
  // Which keys showed an old bit set (the key held data of an earlier write),
  // which EXPIREATs found their key, and (v2) how many bits each stage gained.
  for (size_t c = 0; c < command_key_.size(); ++c) {
    const ReplyScanner::Ints& r = ints_[c];
    if (command_reply_[c] == Reply::kMeta) {
      *meta_gone = OneInt(r, 0);
      continue;
    }
    const size_t k = command_key_[c];
    KeyState& ks = key_state_[k];
    if (ks.plain_retry) continue;  // written again in pass 1
    const size_t g = command_group_[c];
    switch (command_reply_[c]) {
      case Reply::kExpire:
        ks.expire_set = OneInt(r, 1);
        break;
      case Reply::kTxn:
      case Reply::kMeta:  // (handled above)
        break;
      case Reply::kGrow:  // the key's exact growth: nothing to learn
        break;
      case Reply::kHeader:  // setbit: a header bit already 1 is the key's data
        if (r.count == 1 && r.first != 0) ks.old_bit_set = true;
        break;
      case Reply::kExec:
        // [OK, BITOP's length, DEL's 1, EXPIREAT's 1]: the key exists after the
        // BITOP, so its EXPIREAT set the expiry.
        ks.expire_set = !ks.failed && !ks.redirected && r.count == 3;
        break;
      case Reply::kCount:
        TakeCountReply(r, k, g);
        break;
      case Reply::kModule:
        TakeModuleReply(r, k, g);
        break;
      case Reply::kBits:
        if (r.zeros < r.count) ks.old_bit_set = true;
        if (g == SIZE_MAX) break;
        // The first integer of a key's first BITFIELD is a probe's: the sentinel's
        // GET, or a classed key's header SET.
        groups_[g].new_bits += NewBitsOfBits(r, plan.bitfield() && FirstOfKey(command_key_, c) &&
                                                    (key_header_[k] != 0 || !ks.expire_sent));
        break;
    }
  }
}

void RedisBitWriter::TakeCountReply(const ReplyScanner::Ints& r, size_t k, size_t g) {
  if (g == SIZE_MAX || r.count != 1 || key_state_[k].failed) return;
  // The stage's fill after the write; RememberStages adds new_bits to the fill
  // before it (when the stage is the same).
  const StageState& before = plans_[k].state;
  groups_[g].new_bits = FillGained(r.first, groups_[g].stage == before.stage ? before.fill : 0);
}

void RedisBitWriter::TakeModuleReply(const ReplyScanner::Ints& r, size_t k, size_t g) {
  // EF.SETBITS: the number of bits that were 0, of n unique positions (and the
  // header's bits with a classed key's first group).
  if (r.count != 1) return;
  const size_t header_bits = g != SIZE_MAX && g == plans_[k].first_group
                                 ? static_cast<size_t>(__builtin_popcount(key_header_[k]))
                                 : 0;
  const size_t n = (g != SIZE_MAX ? groups_[g].n : key_pos_[k].n) + header_bits;
  const uint64_t zeros = NonNegative(r.first);
  if (zeros < n) key_state_[k].old_bit_set = true;
  // Every bit 0: the key was absent, its header's bits too.
  if (g != SIZE_MAX) groups_[g].new_bits += zeros == n ? zeros - header_bits : zeros;
}

Status RedisBitWriter::FollowUp(const BitBatch& batch, const BatchPlan& plan, bool meta_gone,
                                WriteStats* local) {
  // The expire cache skipped EXPIREAT for a key, but the write found none of the
  // old bits set (the remembered sentinel included): the key may have been lost
  // and re-created by this write. Send its EXPIREAT now (docs: bit_writer.h).
  follow_up_.clear();
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    if (ks.expire_sent || ks.redirected || ks.expired) continue;
    // module: EF.SETBITS set any missing expiry itself (counted as skipped EXPIREATs).
    if (plan.module() || ks.failed || ks.old_bit_set || ks.nothing_to_write) {
      ++local->expires_skipped;
    } else {
      follow_up_.push_back(k);
    }
  }
  if (!follow_up_.empty()) LogLostKeys(batch, plan.now_s);
  // The meta is gone (FLUSHDB, FLUSHALL, a restart without persistence), or
  // keys were lost behind our back and it may be gone with them: store it
  // again before this Write succeeds.
  if (meta_gone || !follow_up_.empty()) EF_RETURN_IF_ERROR(StoreMetaAgain(meta_gone));
  return SendFollowUps(batch, local);
}

Status RedisBitWriter::StoreMetaAgain(bool meta_gone) {
  if (meta_gone)
    LogWith(spdlog::level::warn,
            {{"redis", conn_->address()}, {"key", MetaKey(options_.layout->prefix)}},
            "redis {}: {} was gone (FLUSHDB, FLUSHALL or DEL?): storing the layout last read "
            "(version {}{}) again",
            conn_->address(), MetaKey(options_.layout->prefix),
            effective_ ? effective_->version() : options_.layout->version(),
            effective_ && effective_->v3 ? ", v3_from " + std::to_string(effective_->v3_from) : "");
  Status st = CheckMeta(*conn_);
  if (!st.ok()) {
    if (st.code() == StatusCode::kUnavailable) conn_.reset();
    return Fail(RedisErrorKind::kReply, st);
  }
  return Status::Ok();
}

Status RedisBitWriter::SendFollowUps(const BitBatch& batch, WriteStats* local) {
  for (size_t at = 0; at < follow_up_.size();) {
    const size_t end = std::min(follow_up_.size(), at + options_.max_commands_per_round);
    buffer_.clear();
    for (size_t f = at; f < end; ++f) AppendExpire(batch.keys[follow_up_[f]]);
    EF_RETURN_IF_ERROR(Pipeline(end - at));
    local->commands += end - at;
    for (const auto& e : errors_) {
      if (Redirect(follow_up_[at + e.index], e.text)) continue;  // moved meanwhile
      if (observer_) observer_(e.kind);
      return ReplyFailure("EXPIREAT", batch.keys[follow_up_[at + e.index]].key, e);
    }
    for (size_t f = at; f < end; ++f)
      key_state_[follow_up_[f]].expire_set = OneInt(ints_[f - at], 1);
    at = end;
  }
  return Status::Ok();
}

Status RedisBitWriter::Conclude(const BitBatch& batch, const BatchPlan& plan, bool meta_gone,
                                WriteStats* local) {
  if (plan.staged) RememberStages(batch, plan.now_s);
  // The meta was gone (FLUSHALL, FLUSHDB): the keys may be gone with it. A key
  // remembered at the stage limit is never written, so no write of it would
  // notice: read every key again.
  if (plan.staged && meta_gone) expire_cache_.ForgetStages();
  RememberExpiries(batch, plan);
  if (plan.module()) EF_RETURN_IF_ERROR(CheckReplicasUnchanged(batch));
  if (options_.wait_replicas > 0 && redirects_.size() < batch.size)
    EF_RETURN_IF_ERROR(WaitReplicas());
  local->keys = batch.size - local->skipped_keys - local->expired_keys - redirects_.size();
  if (local->expired_keys) LogExpiredKeys(local->expired_keys, plan.now_s);
  if (local->stages.limit_items) LogStageLimit(local->stages, plan.now_s);
  return Status::Ok();
}

void RedisBitWriter::RememberExpiries(const BitBatch& batch, const BatchPlan& plan) {
  // Remember every expiry Redis set (a WRONGTYPE key's too: its writes fail for
  // good, and remembering it saves re-sending EXPIREAT), with the first
  // position of the write that preceded it as the sentinel.
  for (size_t k = 0; k < batch.size; ++k) {
    if (!key_state_[k].expire_set) continue;
    // The sentinel: a bit this write set (v2: of the key's first stage written).
    uint32_t sentinel = key_pos_[k].n == 0 ? 0 : key_pos_[k].p[0];
    if (plan.staged && plans_[k].n_groups > 0 && groups_[plans_[k].first_group].n > 0)
      sentinel = groups_[plans_[k].first_group].p[0];
    expire_cache_.Remember(key_hash_[k], batch.keys[k].expire_at, plan.now_s, sentinel);
  }
}

void RedisBitWriter::RememberStages(const BitBatch& batch, int64_t now_s) {
  for (size_t k = 0; k < batch.size; ++k) {
    const KeyState& ks = key_state_[k];
    const KeyPlan& plan = plans_[k];
    if (ks.failed || ks.redirected) continue;
    // module: no sentinel tells a lost key from a key whose bits of this write
    // were all new (most sparse keys'), so the state is trusted until it is read
    // again (StageKnown's age limit) or a reconnect.
    if (mode_ != WriteMode::kModule && !ks.expire_sent && !ks.old_bit_set && !ks.nothing_to_write) {
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
    expire_cache_.RememberStage(key_hash_[k], now_s, after.stage, after.fill, plan.read,
                                key_header_[k]);
  }
}

void RedisBitWriter::LogStageLimit(const StageStats& s, int64_t now_s) {
  limit_items_ += s.limit_items;
  limit_keys_ += s.limit_keys;
  if (now_s - limit_logged_at_s_ < 60) return;
  spdlog::warn(
      "redis: {} item(s) of {} key write(s) were not written since the last report: their key's "
      "last stage had reached its fill (filter.stages = {} reached). Those users keep their "
      "false-positive rate but may see such items again; bots or shared IDs? Else raise "
      "filter.stages (exposure_filter_stage_limit_items_total)",
      limit_items_, limit_keys_, stages_.size());
  limit_items_ = limit_keys_ = 0;
  limit_logged_at_s_ = now_s;
}

void RedisBitWriter::LogExpiredKeys(uint64_t n, int64_t now_s) {
  expired_unlogged_ += n;
  if (now_s - expired_logged_at_s_ < 60) return;
  spdlog::warn(
      "redis: {} key write(s) dropped since the last report: their bucket had expired "
      "(written after its end + filter.window, e.g. after an outage or a replay at the "
      "window's edge); counted in exposure_filter_keys_expired_total",
      expired_unlogged_);
  expired_unlogged_ = 0;
  expired_logged_at_s_ = now_s;
}

void RedisBitWriter::LogLostKeys(const BitBatch& batch, int64_t now_s) {
  lost_keys_ += follow_up_.size();
  if (now_s - lost_logged_at_s_ < 60) return;
  LogWith(spdlog::level::warn, {{"key", Printable(batch.keys[follow_up_.front()].key)}},
          "redis: {} key(s) found lost and written again since the last report (deleted, "
          "evicted, flushed, a restart or a resync), e.g. '{}'; their expiry is set again",
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

bool RedisBitWriter::WaitReady(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return job_done_; });
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
