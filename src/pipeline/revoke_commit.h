// A rebalance's last commit, shared by the two consumers of the pipeline (Ingest
// for exposures, ContentConsumer for the items topic): when partitions are
// revoked (not lost), what this member finished for them is committed at once and
// synchronously, so their next owner starts where this one stopped.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kafka/source.h"

namespace prometheus {
class Counter;
}  // namespace prometheus

namespace ef {

// Where the outcome is counted: *commits (the consumer's totals) and `ok` on a
// commit; `failed` on a failure. The counters may be null (no metrics).
struct RevokeCommitCounters {
  uint64_t* commits = nullptr;
  prometheus::Counter* ok = nullptr;
  prometheus::Counter* failed = nullptr;
};

// Commits, synchronously, the entries of `offsets` whose partition is in
// `revoked` (nothing is sent when there are none). A failure is logged as a
// warning, "<log_prefix>commit on revoke: <error> (the new owner re-reads from
// the last commit)".
void CommitRevoked(MessageSource& source, std::vector<PartitionOffset> offsets,
                   const std::vector<TopicPartition>& revoked, std::string_view log_prefix,
                   const RevokeCommitCounters& counters);

}  // namespace ef
