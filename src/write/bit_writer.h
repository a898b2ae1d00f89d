// RedisBitWriter: the BitSink over one pipelined Redis connection.
// Per key and batch (write_mode):
// - bitfield: `BITFIELD key SET u1 p1 1 SET u1 p2 1 ...`, then `EXPIREAT key t`
//   unless the expire cache (write/expire_cache.h) knows the key already has that
//   expiry;
// - setbit: one `SETBIT key p 1` per position, EXPIREAT as for bitfield;
// - module: one `EF.SETBITS key <packed little-endian uint32 positions> t` per
//   key (per stage written, layout v2) of our Redis module (redis-module/): it
//   sets the bits and sets EXPIREAT t only if the key has no TTL, atomically, and
//   replies with the bits that were 0 before. No EXPIREAT is ever sent and the
//   expire cache's expiry logic is bypassed. No write reads a sentinel, so a
//   key lost behind the writer's back (FLUSHALL, DEL) is not detected: its
//   expiry heals by itself (set when missing), `<prefix>meta` is ensured every
//   module_meta_check_s, and a cached stage state stays until the key is read
//   again (StageKnown's age limit, or a reconnect). Differs from the others in one way:
//   a key that already has a TTL keeps it (bitfield re-sends EXPIREAT t on a
//   cache miss and every expire_refresh_s);
// - bitop (the plain-Redis hybrid): keys with at most bitop_threshold positions
//   in the batch as bitfield; denser keys with `MULTI; SET <tmp> <mask> PX 60000;
//   BITOP OR key key <tmp>; DEL <tmp>; EXPIREAT key t; EXEC` (one mask of all the
//   key's positions; <tmp> under the key's hash tag, unique per writer), then, for
//   layout v2, `BITCOUNT key <first byte> <last byte>` of the last stage written
//   (outside the MULTI: the stage's fill right after, other writers' bits
//   included). Keys written after an ASK (set_asking) always go as bitfield
//   (one command per ASKING, no MULTI). On a cluster node, a key whose MULTI is
//   answered ASK or TRYAGAIN (a slot being migrated: the temporary key is absent
//   here, the key itself may not be) is written again with BITFIELD on this node
//   in the same Write, so that only keys BITFIELD finds gone follow the ASK;
// - auto: probed on every (re)connect (redis/module_probe.h): module if this
//   node and every replica of it have the module, else bitop; one log line on
//   the first choice and on every change says which and why.
// Every mode sets exactly the same bits; with a fresh key or one whose TTL is t
// the expiry is the same too (tests/module/write_modes_test.cc). Commands are pipelined in rounds
// of at most max_commands_per_round; replies are scanned, not materialised. Send/Await run the
// write on a background thread of the writer, so that the pipeline decodes the next batch
// meanwhile; Write runs on the caller's thread.
//
// Self-healing expiry. A key can lose its data behind the writer's back (DEL,
// eviction, FLUSHDB, a restart without persistence, a replica's full resync)
// while the expire cache still trusts its EXPIREAT. So when the cache skips
// EXPIREAT, the write itself tells whether the key held data: BITFIELD reads,
// first, the cache's sentinel (`GET u1 q`: a bit this writer set in the write
// that carried the acknowledged EXPIREAT), and every `SET u1` / `SETBIT` returns
// the old bit. If no old bit was 1, the key may be new, and the writer sends
// its EXPIREAT in a follow-up round of the same Write, before returning OK.
// Why a key that exists without a TTL gets one (bits are only ever set, never
// cleared, by writers; a key's TTL goes only with the key, unless a client
// removes it while keeping the data: PERSIST, RESTORE with ttl 0, SET):
// - A key's lifetime ("incarnation") starts with a write to an absent key. That
//   write reads all old bits 0 (an absent key reads as zeros), so its writer
//   sends EXPIREAT — with the write on a cache miss, as follow-up on a hit —
//   before its Write succeeds. A Write that fails forgets its keys in the cache
//   (a reconnect clears it), so its retry sends EXPIREAT with the write.
// - A later write that reads some old bit 1 sees data of that same incarnation:
//   its first write set the TTL, which only a client's PERSIST-like command can
//   remove. Skipping EXPIREAT is then safe.
// Residual cases: (1) the TTL removed while the data stays (PERSIST, a restore
// from a dump without TTL): healed by the expire_refresh re-send on the key's
// next write after that; a key never written again keeps no TTL — restore tools
// must keep TTLs. (2) The first writer of a new incarnation dies between its
// write and its follow-up EXPIREAT, and the batch is retried by another daemon
// whose cache trusts the key and whose write reads an old bit 1 (its sentinel or
// its positions set by the dead writer): healed like (1).
// In steady state the saving stays: a key written before in its incarnation
// reads its sentinel as 1 (one more BITFIELD operation, no extra command); in
// setbit mode (no sentinel) only some old bit of the write itself counts, so
// sparse keys get more follow-up EXPIREATs.
//
// Layouts v2 and v3 (docs/FORMAT.md rule 8, "Writers: fill accounting and the
// stage limit"). Each key's items go to the stage the key fills (StagePlanner):
// one BITFIELD per stage written. The writer knows a key's stage state (its current
// stage and that stage's exact fill) from a read of the key and from then on from
// the old bits its writes return. A key is read (`GET`, in MGETs of up to 512 keys,
// all in one round before the writes) when its state is unknown (first write since
// start, a reconnect, a revoke, or an hour after the last read) or when some item of
// the batch may bring its stage to fill_s (fill + k_s * distinct items >= fill_s);
// the planner then follows the rule item by item on the value's bits, so repeats
// and items already in the current stage add no fill. A batch of known keys below
// that bound costs no extra round trip. A key whose last stage has reached its fill
// is not written at all (its items are counted: limit_items, the metric
// exposure_filter_stage_limit_items_total and a warning at most once a minute), and
// needs no read (so if it is lost behind the writer's back, only a FLUSHALL or
// FLUSHDB that took the meta too is noticed at once; a DEL of it, at the key's next
// read: an hour at most, or a reconnect). read_before_write reads every key of every batch (replay)
// and also skips items present in older stages, so replaying a range does not fill a stage by
// itself. While the stored meta is version 1 (a v2 config on data not yet upgraded)
// the writer writes stage 0 only and reads the meta again every 10 s, switching to
// the stages once `exposure-filter layout upgrade` ran.
//
// Layout v4 (docs/FORMAT.md rule 11), for the keys of buckets from the meta's
// v4_from on ("classed" keys): where a v3 key would be read with GET, a classed
// key is read with the creation script (write/class_create.h; EVALSHA in the same
// round as the MGETs, the first of a connection sent whole; in module mode
// EF.CLASSKEY, the module's native copy of it, when the probe found it): it returns the key's
// value, creating it first with the class the rule chooses from the user's two
// previous buckets. The key is then planned with its class's stage table (its
// header byte, remembered with its stage state in the expire cache), from bit 8:
// the coalescer's stage-0 positions (the meta's m) are not used. Every write of a
// classed key sets its header again (BITFIELD: `SET u8 0 h` first, whose old value
// serves as the sentinel probe; bitop: the mask's byte 0; module: the header's bits
// among EF.SETBITS's positions; setbit: one SETBIT per header bit), so a key lost
// behind the writer's back and re-created by a write still names its class. A key
// whose first byte names no class (written by a program that does not follow
// version 4) is skipped and counted, as a key of another type. While the stored
// meta is below version 4 the writer reads it again every 10 s (as for version 3),
// so a `layout upgrade --to 4` reaches it before v4_from begins.
//
// Connections: a lost connection is re-established on the next Write; the
// expire cache is then cleared and, if options.layout is set, `<prefix>meta` is
// ensured (created if absent, else compared), as it is after a Write found keys
// lost. The meta itself is watched too: with options.layout set, the first round
// of every Write carries `EXISTS <prefix>meta` (one small command per batch; on
// a cluster node that does not hold the meta its MOVED is ignored), and a Write
// that finds it gone (FLUSHDB, FLUSHALL, a DEL) ensures it before it returns OK,
// whichever keys it wrote, so readers never wait for a key written before. A layout that differs
// from the stored one is final: that Write and every later one return kFailedPrecondition, without
// reconnecting. READONLY and MASTERDOWN replies drop the connection (redis/connection.h); other
// retriable replies (LOADING, BUSY, OOM, ...) fail the Write (kUnavailable) and keep it.
// NOAUTH/WRONGPASS/NOPERM replies fail it with kPermissionDenied. WRONGTYPE on a
// key is that key's problem alone: it is logged, counted and skipped, so one bad
// key cannot stall the stream. Keys in log lines and errors go through
// Printable (common/printable.h).
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bloom/layout.h"
#include "bloom/stage_planner.h"
#include "bloom/unique_positions.h"
#include "pipeline/sink.h"
#include "redis/connection.h"
#include "write/expire_cache.h"

namespace ef {

enum class WriteMode { kBitfield, kSetbit, kModule, kBitop, kAuto };

// "bitfield" -> kBitfield etc. (config redis.write_mode); unknown -> kBitfield.
WriteMode ParseWriteMode(const std::string& name);
const char* WriteModeName(WriteMode mode);

struct BitWriterOptions {
  RedisOptions redis;
  WriteMode mode = WriteMode::kBitfield;
  size_t max_commands_per_round = 20000;
  // bitop (and auto without the module): keys with more positions than this in
  // a batch go through the MULTI/BITOP form, the others through BITFIELD.
  size_t bitop_threshold = 24;
  // module: `<prefix>meta` is ensured at most this often (the writes cannot tell
  // that keys were lost, e.g. by FLUSHALL, as bitfield's sentinel reads do).
  int64_t module_meta_check_s = 10;
  size_t expire_cache_keys = 1000000;  // 0 = EXPIREAT with every write of a key
  int64_t expire_refresh_s = 600;      // re-send a cached EXPIREAT after this long
  // Set: `<prefix>meta` is ensured (created if absent, else compared) on every
  // (re)connect, so a Redis that restarted empty gets it back.
  std::optional<Layout> layout;
  // Layout v2/v3: read every key before writing it, not only keys whose stage state
  // is unknown or whose stage may fill (for replay: every item already present, in
  // any stage, is then skipped).
  bool read_before_write = false;
  // Set (Redis Cluster, write/cluster_writer.h): the meta is ensured through this
  // instead of on the writer's own connection (the meta key lives on one node).
  std::function<Status(const Layout& layout, Layout* effective)> ensure_meta;
  // A Redis Cluster node: keys answered with MOVED or ASK are not written and not
  // remembered, but reported in redirects() for the caller to send elsewhere; the
  // stage-state reads go in one MGET per slot.
  bool cluster_node = false;
  // > 0: after each Write, `WAIT wait_replicas wait_timeout_ms`; fewer replicas
  // acknowledging fails the Write (kUnavailable; the batch is retried).
  int wait_replicas = 0;
  int64_t wait_timeout_ms = 1000;
};

// From redis.* config keys (write_mode, bitop_threshold, expire cache,
// wait_replicas, wait_timeout), over `redis`; no layout.
BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis);
// The same, with the layout whose meta the writer ensures on every (re)connect.
BitWriterOptions BitWriterOptionsFromConfig(const RedisConfig& config, const RedisOptions& redis,
                                            const Layout& layout);

class RedisBitWriter : public BitSink {
 public:
  explicit RedisBitWriter(BitWriterOptions options);
  ~RedisBitWriter() override;

  Status Write(const BitBatch& batch, WriteStats* stats) override;
  void Send(const BitBatch& batch) override;
  Status Await(WriteStats* stats) override;
  bool Ready() override;
  bool WaitReady(int64_t timeout_ms) override;
  void ForgetKeyStates() override { forget_states_ = true; }

  // The layout in use after the last meta check (the configured one, or its
  // stage 0 alone while the stored meta is version 1). Call between writes.
  const Layout* effective_layout() const override { return effective_ ? &*effective_ : nullptr; }

  // cluster_node: the keys of the last Write that Redis redirected (MOVED or ASK),
  // in batch order; they were not written. Call after Write/Await.
  struct Redirected {
    size_t key = 0;     // index in the batch
    std::string error;  // "MOVED <slot> <host:port>" or "ASK <slot> <host:port>"
  };
  const std::vector<Redirected>& redirects() const { return redirects_; }
  // cluster_node: every command of the next Writes goes after an ASKING (the keys
  // are being imported by this node: they were answered ASK elsewhere).
  void set_asking(bool asking) { asking_ = asking; }

  // The mode in use: options.mode, or for kAuto what the last (re)connect's
  // probe chose (kModule or kBitop; kAuto before the first connect).
  WriteMode mode() const { return mode_; }

  // Error kind of the last failed Write (for metrics), kNone after a success.
  RedisErrorKind last_error_kind() const { return last_error_; }
  // Called once per error reply that was skipped or failed the write (from the
  // thread that runs the write).
  void SetErrorObserver(std::function<void(RedisErrorKind)> observer) {
    observer_ = std::move(observer);
  }

 private:
  // What one Write learnt about a key of its batch.
  struct KeyState {
    bool nothing_to_write = false;  // v2: every item was already present, or at the limit
    bool expire_sent = false;       // EXPIREAT went with the write (cache miss)
    bool expire_set = false;        // an EXPIREAT of this Write returned 1
    bool old_bit_set = false;       // a reply of the write showed an old bit 1
    bool failed = false;            // the key's write was refused (WRONGTYPE), or expired
    bool expired = false;           // its bucket had expired (expire_at <= now): not sent
    bool redirected = false;        // cluster_node: MOVED/ASK; not written here
    bool plain_retry = false;       // cluster_node: bitop form got ASK/TRYAGAIN
  };

  // One Write's decisions fixed before its first round (StartBatch), read by
  // every step after it.
  struct BatchPlan {
    int64_t now_s = 0;                      // the Write's clock (expiry, expire cache, logs)
    bool staged = false;                    // layout v2/v3: keys planned in plans_ and groups_
    WriteMode mode = WriteMode::kBitfield;  // mode_ for the whole Write
    // kModule: EF.SETBITS, never EXPIREAT.
    bool module() const { return mode == WriteMode::kModule; }
    // kBitfield or kBitop: BITFIELD with the sentinel probe.
    bool bitfield() const { return mode == WriteMode::kBitfield || mode == WriteMode::kBitop; }
  };

  // One attempt of Write, in steps: StartBatch, PlanKeys, WriteRounds, FollowUp,
  // Conclude; each failing step has already recorded its error (Fail/ReplyFailure).
  Status WriteOnce(const BitBatch& batch, WriteStats* stats);
  // Connects (and probes, when probe_due_), rechecks a v1/v2 meta, and fixes the plan.
  Status StartBatch(BatchPlan* plan);
  // Per key of the batch: key_state_ (expired keys marked and counted in local),
  // key_hash_, the positions by the stored rule, and (staged) the stage plan.
  Status PlanKeys(const BitBatch& batch, const BatchPlan& plan, WriteStats* local);
  // Every key's write, in pipelined rounds of max_commands_per_round (pass 0), then
  // (cluster_node) the bitop keys answered ASK/TRYAGAIN again as BITFIELD (pass 1).
  // *meta_gone: the first round's `EXISTS <prefix>meta` answered 0.
  Status WriteRounds(const BitBatch& batch, const BatchPlan& plan, WriteStats* local,
                     bool* meta_gone);
  // Encodes the round that starts at key `at` of the pass (of `count` keys) into
  // buffer_, command_key_, command_group_ and command_reply_; returns where the
  // next round starts.
  size_t EncodeRound(const BitBatch& batch, const BatchPlan& plan, int pass, size_t at,
                     size_t count, WriteStats* local);
  // bitop mode: encodes key k in the MULTI/BITOP form if it has more than
  // bitop_threshold positions and a temporary key in its slot; false otherwise
  // (nothing appended).
  bool EncodeBitop(const BitBatch& batch, const BatchPlan& plan, size_t k, WriteStats* local);
  // Encodes key k as EF.SETBITS, BITFIELD or SETBITs (AppendBits; one per stage
  // group when staged), then its EXPIREAT when the expire cache does not know it.
  void EncodeBits(const BitBatch& batch, const BatchPlan& plan, int pass, size_t k,
                  WriteStats* local);
  // The round's error replies: each is a retry as BITFIELD, a redirection, an
  // expired bucket or a WRONGTYPE key (skipped, counted in local), or fails the Write.
  Status TriageErrors(const BitBatch& batch, WriteStats* local);
  // The round's integer replies: key_state_'s expire_set and old_bit_set, and
  // (staged) each group's new_bits; *meta_gone from the meta's EXISTS.
  void ReadReplies(const BatchPlan& plan, bool* meta_gone);
  // One EF.SETBITS reply of key k, stage group g (SIZE_MAX: none): old_bit_set
  // and the group's new_bits.
  void TakeModuleReply(const ReplyScanner::Ints& r, size_t k, size_t g);
  // bitop's BITCOUNT of key k's last stage group g after its write: g's new_bits.
  void TakeCountReply(const ReplyScanner::Ints& r, size_t k, size_t g);
  // Keys whose write showed no old bit while the cache skipped their EXPIREAT
  // (follow_up_): logged as lost, the meta stored again (also when meta_gone),
  // and their EXPIREAT sent in rounds of their own.
  Status FollowUp(const BitBatch& batch, const BatchPlan& plan, bool meta_gone, WriteStats* local);
  // CheckMeta after keys or the meta were found lost (logged when meta_gone).
  Status StoreMetaAgain(bool meta_gone);
  Status SendFollowUps(const BitBatch& batch, WriteStats* local);
  // After the rounds: stage states and expiries remembered, replicas checked or
  // waited for, local->keys counted, and the rate-limited logs.
  Status Conclude(const BitBatch& batch, const BatchPlan& plan, bool meta_gone, WriteStats* local);
  // Each expiry Redis set, into the expire cache with its sentinel.
  void RememberExpiries(const BitBatch& batch, const BatchPlan& plan);
  Status EnsureConnected();
  // EnsureMeta if options_.layout; a mismatch sets fatal_.
  Status CheckMeta(RedisConnection& conn);
  // Sends buffer_ (`commands` commands); replies into errors_ and ints_.
  Status Pipeline(size_t commands);
  Status Fail(RedisErrorKind kind, Status st);
  // The Write's result for an error reply about `key` (not WRONGTYPE): drops the
  // connection on READONLY/MASTERDOWN; kPermissionDenied for auth errors, else
  // kUnavailable.
  Status ReplyFailure(const char* what, const std::string& key,
                      const RedisConnection::ReplyError& e);
  // Appends the commands that set positions p[0..n) in `key`; returns how many.
  // probe: read that bit first (BITFIELD GET), as the reply's first integer.
  // module mode: one EF.SETBITS with expire_at.
  // header (layout v4, a classed key's first command): BITFIELD sets byte 0 to it
  // first (`SET u8 0 header`, instead of the probe: its old value tells the same);
  // EF.SETBITS sets its bits with the positions; setbit leaves it to AppendHeaderBits.
  size_t AppendBits(const std::string& key, const uint32_t* p, size_t n, const uint32_t* probe,
                    int64_t expire_at, uint8_t header = 0);
  // setbit mode: one SETBIT per bit of a classed key's header; returns how many.
  size_t AppendHeaderBits(const std::string& key, uint8_t header);
  // A classed key whose plan starts a stage beyond its state's: the growth script
  // (class_create.h kGrowClassKeyScript) to the end of its last stage planned,
  // before its bits (expected as Reply::kGrow).
  void AppendGrow(const BitBatch& batch, size_t k);
  // bitop form for key k (all its positions of this batch; v2: then a BITCOUNT of
  // its last group's stage); returns the number of commands (replies).
  size_t AppendBitop(const BitBatch& batch, size_t k);
  // Resolves mode_ for kAuto/kModule on a new connection.
  Status ChooseMode(RedisConnection& conn);
  // Layout v2/v3: reads the keys whose stage state is unknown or whose stage may
  // fill in this batch, and plans every key (plans_, groups_, group_positions_).
  // In steps: ChooseReads, ReadStates, then PlanKey for each key.
  Status PlanStages(const BitBatch& batch, int64_t now_s, WriteStats* stats);
  // reads_: the keys to read (state unknown, a stage that may fill, or
  // read_before_write), with plans_' state and fit of the others; returns how
  // many "already present" flags (skip_) the reads will set.
  size_t ChooseReads(const BitBatch& batch, int64_t now_s);
  // One MGET of ReadStates' round: the keys reads_[first, end), sent as
  // commands[command] (after its ASKING, if any).
  struct Mget {
    size_t command, first, end;
  };
  // Reads reads_' keys in one round of MGETs into *replies; values_ points into
  // them (TakeValues).
  Status ReadStates(const BitBatch& batch, std::vector<RedisReply>* replies, WriteStats* stats);
  // Where the MGET of reads_ from `at` ends: kReadKeysPerMget keys, one slot on a
  // cluster node.
  size_t MgetEnd(const BitBatch& batch, size_t at) const;
  // One MGET's reply: its keys redirected, or their values_ (plans_' read, and
  // for read_before_write their items' skip_ flags from *next_skip on); an
  // error reply fails the Write.
  Status TakeValues(const BitBatch& batch, const Mget& mget, const RedisReply& reply,
                    size_t* next_skip, WriteStats* stats);
  // Key k's plan: its groups (planned from its value if read, else from its
  // remembered state; its stage-0 positions if unstaged) appended to groups_.
  void PlanKey(const BitBatch& batch, size_t k, WriteStats* stats);
  // Layout v4: a NOSCRIPT reply (SCRIPT FLUSH, a new master): the scripts are sent
  // whole again, by the next read of a classed key, and every key is read again
  // (so that there is one: a Write of known keys alone would only grow them).
  void ScriptsFlushed() {
    class_script_loaded_ = false;
    grow_script_loaded_ = false;
    forget_states_ = true;
  }
  // The creation script's reply for classed key k: its value (plans_' read,
  // key_header_, skip_ flags as TakeValues), or it is redirected or skipped
  // (WRONGTYPE, or a first byte naming no class); other errors fail the Write.
  Status TakeClassValue(const BitBatch& batch, size_t k, const RedisReply& reply, size_t* next_skip,
                        WriteStats* stats);
  // Key k is not written in this Write (logged with `why`, counted in skipped_keys).
  void SkipKey(const BitBatch& batch, size_t k, const std::string& why, WriteStats* local);
  // Key k's stage table: its class's (key_header_), else the layout's stages, else
  // nullptr (one stage, no class: it is written at its stage-0 positions).
  const std::vector<Stage>* TableOf(size_t k) const {
    if (key_header_[k]) return &effective_->class_tables[key_header_[k] - 1];
    return stages_.size() > 1 ? &stages_ : nullptr;
  }
  // Each key's stage-0 positions by the rule of its bucket in the stored layout
  // (key_pos_, key_rule_): the batch's own, or computed again from its items
  // when the coalescer guessed another rule. kInternal if a key has no items to
  // compute them from.
  Status PositionsByStoredRule(const BitBatch& batch);
  // Layout v2: keys of unknown state are read with MGETs of this many keys.
  static constexpr size_t kReadKeysPerMget = 512;
  // Layout v2: records each written key's stage state after the write.
  void RememberStages(const BitBatch& batch, int64_t now_s);
  // The stored meta may have been upgraded to version 2 meanwhile.
  Status RecheckMeta(int64_t now_s);
  void AppendExpire(const KeyBits& kb);
  // Appends ASKING before a command when asking_.
  void BeginCommand() {
    if (asking_) buffer_.append("*1\r\n$6\r\nASKING\r\n");
  }
  // cluster_node: records a MOVED/ASK reply for key index k; false if `text` is
  // no redirection.
  bool Redirect(size_t k, const std::string& text);
  Status WaitReplicas();
  void LogLostKeys(const BitBatch& batch, int64_t now_s);
  // module mode, after a batch: see replicas_.
  Status CheckReplicasUnchanged(const BitBatch& batch);
  void LogExpiredKeys(uint64_t n, int64_t now_s);
  void LogStageLimit(const StageStats& s, int64_t now_s);
  void WorkerLoop();

  BitWriterOptions options_;
  std::unique_ptr<RedisConnection> conn_;
  ExpireCache expire_cache_;
  std::string buffer_;
  std::vector<size_t> command_key_;  // for each command of the round: its key index
  // For each command of the round: what its reply says.
  // kMeta: the `EXISTS <prefix>meta` of the Write's first round (not a key's).
  // kHeader: setbit mode's SETBIT of a classed key's header bit; kGrow: a classed
  // key's exact growth (AppendGrow).
  enum class Reply : uint8_t {
    kBits,
    kExpire,
    kModule,
    kTxn,
    kExec,
    kCount,
    kMeta,
    kHeader,
    kGrow
  };
  std::vector<Reply> command_reply_;
  // Records n commands of the round: of key index `key` (SIZE_MAX: the meta's
  // EXISTS), stage group `group` (SIZE_MAX: none), answered as `reply` says.
  void Expect(size_t n, size_t key, size_t group, Reply reply) {
    command_key_.insert(command_key_.end(), n, key);
    command_group_.insert(command_group_.end(), n, group);
    command_reply_.insert(command_reply_.end(), n, reply);
  }
  WriteMode mode_;
  std::string tmp_suffix_;           // bitop: ":ef-tmp:<random>" after the key, unique per writer
  std::string mask_;                 // bitop: scratch
  std::string tmp_;                  // bitop: scratch (EncodeBitop's temporary key)
  std::vector<KeyState> key_state_;  // per key of the batch
  std::vector<uint64_t> key_hash_;   // per key of the batch: ExpireCache::KeyHash
  std::vector<size_t> follow_up_;    // keys that get EXPIREAT in a follow-up round
  std::vector<size_t> plain_retry_;  // keys rewritten as BITFIELD (KeyState::plain_retry)
  // Layouts v2/v3, per key of the batch: where its bits go.
  struct KeyPlan {
    bool staged = false;  // groups_[first_group, +n_groups) (else: kb.positions)
    bool read = false;    // the key was read from Redis in this Write
    size_t first_group = 0, n_groups = 0;
    StageState state;  // before the write (for a read key: its value's)
    StagePlanner::Fit fit = StagePlanner::Fit::kUnknown;  // NeedsValue's, for Plan
    // read_before_write: where the key's items' "already present" flags start in skip_
    size_t skip_at = SIZE_MAX;
  };
  struct PlannedGroup {
    uint32_t stage = 0;
    const uint32_t* p = nullptr;  // positions: kb.positions or in group_positions_
    size_t n = 0;
    size_t begin = SIZE_MAX;  // offset in group_positions_ (SIZE_MAX: p is set)
    uint64_t new_bits = 0;    // old bits that were 0 (from the replies)
  };
  std::optional<Layout> effective_;
  std::vector<Stage> stages_;  // effective_'s stage table; size <= 1: one stage
  // Per key of the batch: its bucket's position rule and its stage-0 positions
  // (PositionsByStoredRule); fixed_positions_ holds those computed again, from
  // fixed_at_[i].second on for key fixed_at_[i].first.
  struct Span {
    const uint32_t* p = nullptr;
    size_t n = 0;
  };
  std::vector<PositionRule> key_rule_;
  std::vector<Span> key_pos_;
  std::vector<uint32_t> fixed_positions_;
  std::vector<std::pair<size_t, size_t>> fixed_at_;
  UniquePositions unique_;
  // How old the copy of a version-1/2 meta may be before a write (rule 9).
  static constexpr int64_t kMetaRecheckSeconds = 10;
  StagePlanner planner_{stages_};
  std::vector<KeyPlan> plans_;
  std::vector<PlannedGroup> groups_;
  std::vector<uint32_t> group_positions_;
  std::vector<size_t> command_group_;     // per command of the round: groups_ index or SIZE_MAX
  std::vector<uint8_t> skip_;             // scratch (replay): items a read found present
  std::vector<std::string_view> values_;  // PlanStages: per key, the value read ("" if none)
  std::vector<size_t> reads_;             // keys whose state is read in this Write (MGET)
  // Layout v4, per key of the batch: its header (size class + 1) once known from
  // its value or its remembered state; 0 for a key of a bucket without classes.
  // Invariant: a classed key is planned and written only with the header of the
  // value Redis holds (the creation script's reply, or remembered from one), never
  // with a class this writer chose: two writers racing to create a key both get
  // the stored value (class_create.h), so no value holds two geometries.
  std::vector<uint8_t> key_header_;
  std::vector<size_t> class_reads_;   // classed keys read (or created) by the script
  std::string class_sha_;             // SHA1 of class_create.h's creation script
  std::string grow_sha_;              // kGrowClassKeyScript's
  bool class_script_loaded_ = false;  // the creation script sent whole on this connection
  bool grow_script_loaded_ = false;   // the growth script sent whole on this connection
  // Module mode, and the node's module has EF.CLASSKEY (ModuleProbeResult::class_key):
  // classed keys are created with it instead of the creation script.
  bool native_class_key_ = false;
  int class_key_logged_ = -1;  // native_class_key_ as last logged (-1: not yet)
  std::atomic<bool> forget_states_{false};
  std::vector<Redirected> redirects_;
  bool asking_ = false;
  int64_t next_meta_check_s_ = 0;
  std::vector<RedisConnection::ReplyError> errors_;
  std::vector<ReplyScanner::Ints> ints_;  // per command of the round
  Status fatal_;                          // set once the stored layout differs
  uint64_t lost_keys_ = 0;                // since the last log line about them
  int64_t lost_logged_at_s_ = 0;
  // module: the replicas the module probe asked (ReplicaSet). A write that finds
  // another set afterwards copies its keys to them (value and expiry) and sets
  // probe_due_: the next write probes every replica first (auto may switch to
  // bitop; module refuses while one lacks the module).
  std::string replicas_;
  bool probe_due_ = false;
  int64_t expired_logged_at_s_ = 0;
  uint64_t expired_unlogged_ = 0;              // expired keys dropped since the last log line
  uint64_t limit_items_ = 0, limit_keys_ = 0;  // since the last log line about them
  int64_t limit_logged_at_s_ = 0;
  RedisErrorKind last_error_ = RedisErrorKind::kNone;
  std::function<void(RedisErrorKind)> observer_;

  // Send/Await: one job at a time for the worker thread (started on first Send).
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  const BitBatch* job_ = nullptr;
  bool job_done_ = false;
  bool quit_ = false;
  Status job_status_;
  WriteStats job_stats_;
};

}  // namespace ef
