#include "redis/scan.h"

namespace ef {

std::string GlobEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Status ScanKeys(RedisConnection& conn, const std::string& pattern,
                const std::function<bool(const std::vector<std::string>& keys)>& on_keys) {
  std::string cursor = "0";
  std::vector<std::string> keys;
  do {
    auto r = conn.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError)
      return RedisConnection::ErrorReplyStatus(r->str,
                                               "redis " + conn.address() + ": SCAN: " + r->str);
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 2)
      return Internal("redis " + conn.address() + ": SCAN: unexpected reply");
    cursor = r->elements[0].str;
    keys.clear();
    for (const RedisReply& k : r->elements[1].elements) keys.push_back(k.str);
    if (!keys.empty() && !on_keys(keys)) return Status::Ok();
  } while (cursor != "0");
  return Status::Ok();
}

}  // namespace ef
