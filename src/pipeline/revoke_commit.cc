#include "pipeline/revoke_commit.h"

#include <prometheus/counter.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace ef {

void CommitRevoked(MessageSource& source, std::vector<PartitionOffset> offsets,
                   const std::vector<TopicPartition>& revoked, std::string_view log_prefix,
                   const RevokeCommitCounters& counters) {
  std::erase_if(offsets, [&](const PartitionOffset& po) {
    return std::find(revoked.begin(), revoked.end(), po.tp) == revoked.end();
  });
  if (offsets.empty()) return;
  Status st = source.Commit(offsets, true);
  if (st.ok()) {
    if (counters.commits) ++*counters.commits;
    if (counters.ok) counters.ok->Increment();
    return;
  }
  spdlog::warn("{}commit on revoke: {} (the new owner re-reads from the last commit)", log_prefix,
               st.message());
  if (counters.failed) counters.failed->Increment();
}

}  // namespace ef
