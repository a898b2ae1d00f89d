#include "redis/meta.h"

#include <ctime>
#include <map>

#include "bloom/keys.h"
#include "redis/cluster.h"
#include "redis/scan.h"

namespace ef {
namespace {

// Create-if-absent and read back in one atomic step, so two writers starting
// together cannot interleave their fields.
constexpr const char* kEnsureScript = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return redis.call('HGETALL', KEYS[1])
)lua";

// Adds field founder_marks_from (ARGV[1]) to an existing meta that lacks it; the
// meta as it is then. HGETALL and HSET only, as kEnsureScript: nothing the
// writers' ACL does not allow already.
constexpr const char* kFounderScript = R"lua(
local cur = redis.call('HGETALL', KEYS[1])
for i = 1, #cur, 2 do
  if cur[i] == 'founder_marks_from' then return cur end
end
redis.call('HSET', KEYS[1], 'founder_marks_from', ARGV[1])
return redis.call('HGETALL', KEYS[1])
)lua";

// The meta fields a writer stores for `l`: its layout's, and founder_marks_from
// when it has one.
std::map<std::string, std::string> FieldsToStore(const Layout& l) {
  std::map<std::string, std::string> f = l.ToFields();
  if (l.founder_marks_from >= 0) f["founder_marks_from"] = std::to_string(l.founder_marks_from);
  return f;
}

// Replace the whole hash iff it still holds exactly the expected fields
// (ARGV[1] = how many expected field/value pairs follow, then the new ones).
constexpr const char* kUpgradeScript = R"lua(
local n = tonumber(ARGV[1])
local cur = redis.call('HGETALL', KEYS[1])
if #cur ~= 2 * n then return 0 end
for i = 1, n do
  if redis.call('HGET', KEYS[1], ARGV[2 * i]) ~= ARGV[2 * i + 1] then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2 * n + 2))
return 1
)lua";

// An error reply to a meta command. WRONGTYPE: the key is not a hash, so another
// program's data sits at <prefix>meta. That is for good (kFailedPrecondition: exit
// 5, and `run` does not retry it as it retries an unreachable Redis).
Status ReplyError(const RedisReply& reply, const std::string& what) {
  if (RedisConnection::ClassifyErrorReply(reply.str) == RedisErrorKind::kWrongType) {
    return FailedPrecondition(what + ": " + reply.str +
                              " (the layout's key is not a hash: another program uses "
                              "filter.key_prefix; choose another prefix or remove the key)");
  }
  return RedisConnection::ErrorReplyStatus(reply.str, what + ": " + reply.str);
}

Status ToMap(const StatusOr<RedisReply>& reply, const std::string& what,
             std::map<std::string, std::string>* out) {
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) return ReplyError(*reply, what);
  if (reply->type != RedisReply::Type::kArray)
    return Internal(what + ": unexpected reply type (is the meta key a hash?)");
  for (size_t i = 0; i + 1 < reply->elements.size(); i += 2)
    (*out)[reply->elements[i].str] = reply->elements[i + 1].str;
  return Status::Ok();
}

std::string What(const MetaTarget& conn, const std::string& key) {
  return "redis " + conn.address() + ": " + key;
}

}  // namespace

StatusOr<RedisReply> MetaTarget::Command(const std::string& key, std::vector<std::string> args) {
  if (router_) return router_->Command(key, std::move(args));
  return conn_->Command(args);
}

std::string MetaTarget::address() const { return router_ ? "cluster" : conn_->address(); }

Status ReadMetaFields(MetaTarget conn, const std::string& prefix,
                      std::map<std::string, std::string>* stored) {
  const std::string key = MetaKey(prefix);
  stored->clear();
  return ToMap(conn.Command(key, {"HGETALL", key}), What(conn, key), stored);
}

Status EnsureMeta(MetaTarget conn, const Layout& layout, Layout* effective,
                  const Layout* create_as) {
  const std::string key = MetaKey(layout.prefix);
  std::vector<std::string> args = {"EVAL", kEnsureScript, "1", key};
  for (const auto& [f, v] : FieldsToStore(create_as ? *create_as : layout)) {
    args.push_back(f);
    args.push_back(v);
  }
  std::map<std::string, std::string> stored;
  EF_RETURN_IF_ERROR(ToMap(conn.Command(key, std::move(args)), What(conn, key), &stored));
  const bool v1_for_now = layout.stages > 1 && IsUpgradableV1(stored, layout);
  if (!v1_for_now) EF_RETURN_IF_ERROR(CompareLayout(stored, layout, key));
  // This writer marks clusters by their founders (CONTENT.md rule 5, revision 2).
  // A meta stored before that revision gets founder_marks_from = the next
  // bucket's start: the buckets until then may hold tokens of earlier writers.
  if (stored.count("founder_marks_from") == 0) {
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    const int64_t next = BucketStart(now, layout.bucket_seconds) + layout.bucket_seconds;
    std::vector<std::string> add = {"EVAL", kFounderScript, "1", key, std::to_string(next)};
    stored.clear();
    EF_RETURN_IF_ERROR(ToMap(conn.Command(key, std::move(add)), What(conn, key), &stored));
  }
  if (v1_for_now) {
    auto founder = LayoutFromFields(stored, key);
    if (!founder.ok()) return founder.status();
    *effective = layout.SingleStage();
    effective->founder_marks_from = founder->founder_marks_from;
    return Status::Ok();
  }
  // The stored version (2, 3 or 4) and v3_from: each bucket's rule is the meta's.
  auto from = LayoutFromFields(stored, key);
  if (!from.ok()) return from.status();
  *effective = std::move(*from);
  return Status::Ok();
}

Status ReadLayout(MetaTarget conn, const Layout& layout, Layout* effective, bool* stored_found) {
  const std::string key = MetaKey(layout.prefix);
  std::map<std::string, std::string> stored;
  EF_RETURN_IF_ERROR(ReadMetaFields(conn, layout.prefix, &stored));
  *stored_found = !stored.empty();
  if (stored.empty()) {
    *effective = layout;
    return Status::Ok();
  }
  auto from = LayoutFromFields(stored, key);
  if (!from.ok()) return from.status();
  // Stage 0 must be the configured filter; the stages follow the stored meta.
  auto stage0 = from->SingleStage().ToFields();
  EF_RETURN_IF_ERROR(CompareLayout(stage0, layout.SingleStage(), key));
  *effective = std::move(*from);
  return Status::Ok();
}

Status UpgradeMeta(MetaTarget conn, const Layout& layout, int to_version, int64_t v3_from,
                   bool dry_run, bool* changed, Layout* stored_after) {
  *changed = false;
  const std::string key = MetaKey(layout.prefix);
  Layout target = layout.WithoutV3();
  if (to_version >= 3) {
    target.v3 = true;
    target.v3_from = v3_from;
  } else if (target.stages == 1) {
    return InvalidArgument(
        "filter.stages is 1: the configured layout is version 1, nothing to upgrade to "
        "version 2 (--to 3 moves it to version 3)");
  }
  std::map<std::string, std::string> stored;
  EF_RETURN_IF_ERROR(ReadMetaFields(conn, layout.prefix, &stored));
  if (stored.empty())
    return FailedPrecondition(What(conn, key) +
                              ": no layout stored (nothing written with this prefix yet): `run` "
                              "creates the configured version's meta by itself");
  auto current = LayoutFromFields(stored, key);
  if (!current.ok()) return current.status();
  if (current->version() >= to_version) {  // already there (or past it)
    EF_RETURN_IF_ERROR(CompareLayout(stored, layout, key));
    *stored_after = std::move(*current);
    return Status::Ok();
  }
  // The stored meta must be the configured layout's earlier version: version 1 of
  // its stage 0, its version 2, or (to 4) its version 3.
  const Layout earlier = current->version() == 1   ? layout.SingleStage()
                         : current->version() == 2 ? layout.WithoutV3()
                                                   : layout.WithoutV4();
  if (to_version == 4) {
    // Rule 11: classes from a bucket that has not begun; a version-3 meta keeps
    // its v3_from (from version 1 or 2, both start there).
    target.v4 = true;
    target.v4_from = v3_from;
    if (current->version() == 3) target.v3_from = current->v3_from;
    EF_RETURN_IF_ERROR(target.Finish());
  }
  EF_RETURN_IF_ERROR(CompareLayout(stored, earlier, key));
  if (current->version() == 1 && !IsUpgradableV1(stored, layout))
    return CompareLayout(stored, layout.SingleStage(), key);
  if (dry_run) {
    *changed = true;
    *stored_after = std::move(target);
    return Status::Ok();
  }
  // Compare-and-set: the whole hash as read, replaced by the target's fields.
  std::vector<std::string> args = {"EVAL", kUpgradeScript, "1", key, std::to_string(stored.size())};
  for (const auto& [f, v] : stored) {
    args.push_back(f);
    args.push_back(v);
  }
  // founder_marks_from is any version's: the upgraded meta keeps it.
  target.founder_marks_from = current->founder_marks_from;
  for (const auto& [f, v] : FieldsToStore(target)) {
    args.push_back(f);
    args.push_back(v);
  }
  auto reply = conn.Command(key, std::move(args));
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) return ReplyError(*reply, What(conn, key));
  if (reply->type != RedisReply::Type::kInteger || reply->integer != 1)
    return FailedPrecondition(What(conn, key) + ": changed while upgrading; run it again");
  *changed = true;
  *stored_after = std::move(target);
  return Status::Ok();
}

StatusOr<std::string> FindBucketKey(RedisConnection& conn, const std::string& prefix) {
  std::string found;
  Status st = ScanKeys(conn, GlobEscape(prefix) + "{*}:*", [&found](const auto& keys) {
    for (const std::string& key : keys) {
      if (key.size() >= 7 && key.compare(key.size() - 7, 7, ":served") == 0) continue;
      found = key;
      return false;
    }
    return true;
  });
  if (!st.ok()) return st;
  return found;
}

namespace {

// EnsureMetaAt's refusal: no meta, but `key`, a bucket key.
Status OrphanBuckets(const std::string& where, const Layout& layout, const std::string& key) {
  return FailedPrecondition(
      where + ": " + MetaKey(layout.prefix) + " is missing but bucket keys of the prefix exist (" +
      key +
      "): the layout they were written with is unknown, so nothing is stored and nothing "
      "written. Restore the meta as it was (HSET " +
      MetaKey(layout.prefix) +
      " with the fields `exposure-filter layout show` or the daemon's start log printed; "
      "docs/OPERATING.md \"A lost meta\"), or remove the prefix's keys to start empty");
}

}  // namespace

Status EnsureMetaAt(const RedisOptions& redis, const Layout& layout, Layout* effective) {
  StatusOr<bool> cluster = UseCluster(redis);
  if (!cluster.ok()) return cluster.status();
  std::map<std::string, std::string> stored;
  if (*cluster) {
    auto options = ClusterOptionsFrom(redis);
    if (!options.ok()) return options.status();
    ClusterRouter router(*options);
    EF_RETURN_IF_ERROR(router.Discover());
    EF_RETURN_IF_ERROR(ReadMetaFields(router, layout.prefix, &stored));
    if (stored.empty()) {
      for (const SlotMap::Shard& shard : router.slot_map().shards()) {
        auto c = router.Connection(shard.master);
        if (!c.ok()) return c.status();
        auto key = FindBucketKey(**c, layout.prefix);
        if (!key.ok()) return key.status();
        if (!key->empty()) return OrphanBuckets("redis cluster", layout, *key);
      }
    }
    return EnsureMeta(router, layout, effective);
  }
  auto conn = RedisConnection::Connect(redis);
  if (!conn.ok()) return conn.status();
  EF_RETURN_IF_ERROR(ReadMetaFields(**conn, layout.prefix, &stored));
  if (stored.empty()) {
    auto key = FindBucketKey(**conn, layout.prefix);
    if (!key.ok()) return key.status();
    if (!key->empty()) return OrphanBuckets("redis " + (*conn)->address(), layout, *key);
  }
  return EnsureMeta(**conn, layout, effective);
}

}  // namespace ef
