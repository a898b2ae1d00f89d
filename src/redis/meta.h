// The `<prefix>meta` hash of contract v1, rule 7.
#pragma once

#include "bloom/layout.h"
#include "common/status.h"
#include "redis/connection.h"

namespace ef {

// Writers: stores the layout if no meta exists (atomically, one Lua script), else
// compares. kFailedPrecondition names each differing field with both values;
// kInternal: the key is not a hash; kPermissionDenied: NOAUTH/NOPERM (e.g. an ACL
// without EVAL); kUnavailable: connection lost or another error reply (READONLY).
Status EnsureMeta(RedisConnection& conn, const Layout& layout);

// Readers: compares when meta exists; *stored_found tells whether it did.
Status CheckMeta(RedisConnection& conn, const Layout& layout, bool* stored_found);

}  // namespace ef
