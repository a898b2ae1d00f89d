// `exposure-filter content reindex` (docs/CONTENT.md "Upgrading the index"):
// files every entry of the content map in the tables of the configured layout
// (revision 2, content.index_group_bits), then deletes revision 1's bucket
// hashes (<p>cb{...}) unless keep_old. For an index written by an earlier
// version, or after changing content.index_group_bits. Idempotent; safe while
// `content` and `run` assign (they file what they assign themselves).
#pragma once

#include "app/common.h"

namespace ef::app {

// The exit code: kExitOk, kExitConfig (bad config), kExitUnreachable (Redis),
// kExitDenied (an ACL refusal), kExitFailure.
int ContentReindex(const ConfigArgs& args, bool keep_old);

}  // namespace ef::app
