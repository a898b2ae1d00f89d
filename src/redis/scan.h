// SCAN over one Redis node (a single Redis, or one master of a Redis Cluster:
// SCAN sees only the node it is sent to).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "redis/connection.h"

namespace ef {

// `text` with the glob specials ('*', '?', '[', ']', '\') escaped, so that a
// key prefix is matched literally by SCAN MATCH.
std::string GlobEscape(std::string_view text);

// SCAN MATCH `pattern` COUNT 1000 to the end, handing each non-empty batch of
// keys to on_keys; stops early (Ok) when on_keys returns false. Fails on a
// transport failure or an error reply, naming the node and SCAN. A key may be
// handed twice (SCAN's guarantee is "at least once" for keys present
// throughout).
Status ScanKeys(RedisConnection& conn, const std::string& pattern,
                const std::function<bool(const std::vector<std::string>& keys)>& on_keys);

}  // namespace ef
