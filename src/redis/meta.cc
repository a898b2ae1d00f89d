#include "redis/meta.h"

#include <map>

#include "bloom/keys.h"

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

Status ToMap(const StatusOr<RedisReply>& reply, const std::string& what,
             std::map<std::string, std::string>* out) {
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) {
    if (RedisConnection::ClassifyErrorReply(reply->str) == RedisErrorKind::kAuth)
      return PermissionDenied(what + ": " + reply->str);
    return Unavailable(what + ": " + reply->str);
  }
  if (reply->type != RedisReply::Type::kArray)
    return Internal(what + ": unexpected reply type (is the meta key a hash?)");
  for (size_t i = 0; i + 1 < reply->elements.size(); i += 2)
    (*out)[reply->elements[i].str] = reply->elements[i + 1].str;
  return Status::Ok();
}

}  // namespace

Status EnsureMeta(RedisConnection& conn, const Layout& layout) {
  const std::string key = MetaKey(layout.prefix);
  std::vector<std::string> args = {"EVAL", kEnsureScript, "1", key};
  for (const auto& [f, v] : layout.ToFields()) {
    args.push_back(f);
    args.push_back(v);
  }
  std::map<std::string, std::string> stored;
  EF_RETURN_IF_ERROR(ToMap(conn.Command(args), "redis " + conn.address() + ": " + key, &stored));
  return CompareLayout(stored, layout, key);
}

Status CheckMeta(RedisConnection& conn, const Layout& layout, bool* stored_found) {
  const std::string key = MetaKey(layout.prefix);
  std::map<std::string, std::string> stored;
  EF_RETURN_IF_ERROR(
      ToMap(conn.Command({"HGETALL", key}), "redis " + conn.address() + ": " + key, &stored));
  *stored_found = !stored.empty();
  if (stored.empty()) return Status::Ok();
  return CompareLayout(stored, layout, key);
}

}  // namespace ef
