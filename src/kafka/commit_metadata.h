// What the daemon stores in the metadata string of every offset it commits, so
// that tools outside the daemon (`lag`) can tell a stalled consumer (commits
// keep coming, offset does not move) from a stopped one (no commits at all),
// and know the event time of the newest event written. Text form, version 1:
//   "ef1 commit_ms=<epoch ms> event_ms=<epoch ms or 0>"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ef {

struct CommitMetadata {
  int64_t commit_ms = 0;  // wall time of the commit
  int64_t event_ms = 0;   // event time of the newest event written in the partition; 0 = none yet
};

std::string EncodeCommitMetadata(const CommitMetadata& m);
// nullopt for anything not written by EncodeCommitMetadata (other consumers' metadata).
std::optional<CommitMetadata> DecodeCommitMetadata(std::string_view text);

}  // namespace ef
