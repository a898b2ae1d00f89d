// The content index in Redis (docs/CONTENT.md "3. Index" and "4. Redis layout"):
// assigns each item a near-duplicate cluster ID from its Simhash fingerprint,
// with the permuted-block tables of content/block_index.h kept in Redis, and
// keeps the map item -> cluster. On a single Redis or a Redis Cluster (keys
// spread by hash tags; commands routed by redis/cluster.h's ClusterRouter).
//
// ContentIndex contract
// - Assign(batch): for each item, in batch order:
//   * an item already in the map (an earlier Assign, or earlier in this batch)
//     keeps its cluster: redelivery gives the same answer (idempotent);
//   * else its cluster is the cluster of the nearest earlier item within
//     content.max_distance: the stored items (what earlier Assigns filed and has
//     not expired) and the items before it in this batch; among equally near
//     ones the oldest, the one with the smallest sequence number (the order of
//     first assignment: an INCRBY of the sequence key per batch, so later
//     batches and later positions in a batch are younger);
//   * else the item is its own cluster: cluster ID = its item ID.
//   Clusters are never merged: an item joins one existing cluster and later
//   items never move it. In a chain A ~ B ~ C where A and C are not near, C joins
//   B's cluster, which is A's only if B joined A; so a cluster's items may be up
//   to (number of hops) x max_distance bits from its first item (no snowball:
//   each item is compared with the items themselves, never with a cluster's
//   "centre"), and two near items may be in different clusters when they
//   arrived in an order that gave each its own first.
// - Copies: a new item with the fingerprint of an earlier one (stored, or
//   earlier in the batch) joins it at distance 0 and is not filed in the
//   buckets: the earlier one is as near to every later item and older, so it
//   stands for the copy; its map entry and buckets are renewed instead. So N
//   copies of one text keep one bucket entry, and an Assign's cost does not grow
//   with N (a flood of reposts stays flat). A known item renews its entry and
//   buckets (PEXPIRE) and is not filed again.
// - Bad map entries: a map key that holds no map entry (a string shorter than
//   17 bytes, or a key of another type; docs/CONTENT.md rule 4) is an unknown
//   item, as the readers count it, and ContentIndexOptions::on_bad_value is told
//   its key. Assign writes the item's own new entry over it. Such a key never
//   fails a call: one bad key must not hold every batch back.
// - Tables: layout revision 2, sorted sets of many buckets in generations of
//   half a retention (contentdb/groups.h). "Renewing" an item's table entries
//   means filing them again in the current generation.
// - Round trips (each one pipeline per master, the masters in parallel): 1. GET
//   every item's map entry and INCRBY the sequence; 2. ZRANGEBYSCORE of each
//   new item's C(b, k) buckets in each live generation; 3. GET the map entries
//   of stored candidates within the distance (skipped when there are none); 4.
//   write: SET NX of the map entries, ZADD of the table entries of new items
//   that are no copies, and of known and copied items (renewal), in the
//   current generation, PEXPIREAT of its keys, ZREM of stale entries met,
//   PEXPIRE of known and copied items' map entries and of the sequence key.
// - Concurrency: two Assigns of the same item at once both write with SET NX
//   ... GET, so the first write wins and the other returns the winner's cluster;
//   two near (not equal) items assigned at once by two callers may each start a
//   cluster (neither is stored when the other reads). Run one assigner per
//   items stream for exact "nearest earlier".
// - Errors: kInvalidArgument for a bad item (empty, longer than
//   kMaxContentItemBytes) naming its position, before anything is sent; Redis
//   failures as the transport reports them (naming the node); an error reply
//   names its command: kPermissionDenied when refused for good (NOAUTH, NOPERM),
//   kUnavailable when the server is not ready or not a master (LOADING, BUSY,
//   READONLY, MASTERDOWN, OOM), else kInternal. Nothing of a failed batch is
//   guaranteed written or not: send it again (idempotent).
// - Thread-compatible: one thread uses an index at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "content/block_index.h"
#include "contentdb/groups.h"
#include "contentdb/map.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace ef::contentdb {

// Where the index's commands go: one pipeline per master per call.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Replies in input order; fails (no replies) on a transport failure.
  virtual StatusOr<std::vector<RedisReply>> Run(
      const std::vector<ClusterRouter::SlotCommand>& commands) = 0;
};
// A single Redis: one pipeline on `conn` (not owned), slots ignored.
std::unique_ptr<CommandRunner> SingleNodeRunner(RedisConnection& conn);
// A Redis Cluster: ClusterRouter::Commands (not owned).
std::unique_ptr<CommandRunner> ClusterRunner(ClusterRouter& router);
// A single Redis from redis.*, owning its connection: made at the first Run,
// and made again at the next Run after a connection failure or a reply that
// calls for it (READONLY, MASTERDOWN: RedisConnection::CallsForReconnect), so a
// Redis that restarts, or a failover behind its address, is followed without a
// new runner.
std::unique_ptr<CommandRunner> ReconnectingRunner(RedisOptions redis);
// A runner that owns its Redis, from redis.* (RedisOptionsFromConfig): a
// ClusterRouter when UseCluster says so (`redis.cluster: auto` asks the seeds
// now: kUnavailable if none answers), else ReconnectingRunner.
StatusOr<std::unique_ptr<CommandRunner>> ConnectRunner(const RedisOptions& redis);

struct ContentItem {
  std::string item_id;
  uint64_t simhash = 0;
};

struct Assignment {
  std::string cluster;  // the cluster ID (an item ID)
  bool known = false;   // the item was in the map already (or earlier in the batch)
  // For a new item that joined a cluster: the item it is near and their distance;
  // "" and -1 when it started its own cluster, or when known.
  std::string nearest;
  int distance = -1;
};

struct ContentIndexOptions {
  std::string key_prefix = "ef:";                     // filter.key_prefix
  int max_distance = 3;                               // content.max_distance
  int index_blocks = 5;                               // content.index_blocks
  int64_t retention_ms = int64_t{60} * 86400 * 1000;  // content.retention
  int index_group_bits = 14;                          // content.index_group_bits
  // Wall clock, epoch ms: picks the generation (contentdb/groups.h). Empty =
  // the system clock. Tests move it; it must stay near Redis's own clock,
  // since generations expire with PEXPIREAT.
  std::function<int64_t()> now_ms;
  // Told the key of each bad map entry read (see "Bad map entries" above); may
  // be empty. Called on the thread that calls Assign or Lookup.
  std::function<void(const std::string& key)> on_bad_value;
};
ContentIndexOptions ContentIndexOptionsFrom(const Config& config);

// The keys (docs/CONTENT.md "4. Redis layout"); the tables': GroupLayout.
std::string SequenceKey(std::string_view prefix);
// `<p>cindex`: "2" when the tables are layout revision 2's: written with an
// index's first sequence number (a new index) and by `content reindex`, renewed
// with the sequence key. A sequence key without it: an index written by
// revision 1, not reindexed yet.
std::string RevisionKey(std::string_view prefix);

class ContentIndex {
 public:
  // kInvalidArgument for a bad max_distance/index_blocks pair (BlockScheme),
  // retention_ms < 2 or index_group_bits outside 0..kMaxGroupBits.
  static StatusOr<std::unique_ptr<ContentIndex>> Make(ContentIndexOptions options,
                                                      std::unique_ptr<CommandRunner> runner);

  // See the contract above: one Assignment per item, in order.
  StatusOr<std::vector<Assignment>> Assign(const std::vector<ContentItem>& items);
  // The map: each item's cluster, nullopt if not assigned (or expired). One
  // round trip (one pipeline per master). Bad items as Assign. Read only,
  // unless `renew` (the writers: an exposed item's entry lives on while it is
  // exposed): each found item's map entry gets content.retention again in the
  // same round trip, and, when it had less than half of it left, its table
  // entries, if it has any (a copy filed as its twin has none), are filed
  // again in the current generation: checked with the next renewing Lookup's
  // round trip, written with the one after (queued: at most
  // kMaxQueuedRenewals items; past that, they are not renewed, the entries
  // just expire earlier).
  StatusOr<std::vector<std::optional<std::string>>> Lookup(const std::vector<std::string>& items,
                                                           bool renew = false);
  static constexpr size_t kMaxQueuedRenewals = 65536;
  // Files the given map entries' table entries in the current generation (one
  // round trip): what `content reindex` does with every entry of the map, so
  // that an index written by layout revision 1 (or with other group bits) is
  // found by probes again. Idempotent.
  struct MapItem {
    std::string item_id;
    uint64_t simhash = 0;
  };
  Status File(const std::vector<MapItem>& items);
  // RevisionKey: MarkRevision writes it (`content reindex`, once the map is
  // filed); Unindexed is true when the sequence key exists without it (see
  // RevisionKey). One round trip each.
  Status MarkRevision();
  StatusOr<bool> Unindexed();

  const content::BlockScheme& scheme() const { return scheme_; }
  const GroupLayout& layout() const { return layout_; }
  int64_t NowMs() const;

 private:
  ContentIndex(ContentIndexOptions options, content::BlockScheme scheme,
               std::unique_ptr<CommandRunner> runner)
      : options_(std::move(options)),
        scheme_(std::move(scheme)),
        layout_(options_.key_prefix, scheme_, options_.index_group_bits, options_.retention_ms),
        runner_(std::move(runner)) {}
  std::optional<MapValue> MapEntry(const RedisReply& reply, const std::string& key, bool* bad);
  StatusOr<std::vector<std::optional<MapValue>>> ReadMap(const std::vector<std::string>& items);
  ContentIndexOptions options_;
  // Lookup(renew): the ZADDs (and PEXPIREATs) of found items' table entries,
  // sent before the next renewing Lookup's commands (kept on a failure: sent
  // again).
  std::vector<ClusterRouter::SlotCommand> renewals_;
  // Lookup(renew): found items with less than half their retention left,
  // checked (are they filed? AppendFiledChecks) with the next renewing Lookup,
  // whose round trip queues the filed ones' renewals_ (copies never are).
  std::vector<MapItem> checks_;
  content::BlockScheme scheme_;
  GroupLayout layout_;  // after scheme_: points to it
  std::unique_ptr<CommandRunner> runner_;
};

}  // namespace ef::contentdb
