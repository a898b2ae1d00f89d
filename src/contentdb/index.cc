#include "contentdb/index.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "bloom/keys.h"
#include "common/clock.h"
#include "content/simhash.h"
#include "redis/connection.h"

namespace ef::contentdb {
namespace {

using SlotCommand = ClusterRouter::SlotCommand;

class SingleNode : public CommandRunner {
 public:
  explicit SingleNode(RedisConnection& conn) : conn_(&conn) {}
  StatusOr<std::vector<RedisReply>> Run(const std::vector<SlotCommand>& commands) override {
    std::vector<std::vector<std::string>> args;
    args.reserve(commands.size());
    for (const SlotCommand& c : commands) args.push_back(c.args);
    std::vector<RedisReply> replies;
    if (Status s = conn_->Commands(args, &replies); !s.ok()) return s;
    return replies;
  }

 private:
  RedisConnection* conn_;
};

class Cluster : public CommandRunner {
 public:
  explicit Cluster(ClusterRouter& router) : router_(&router) {}
  StatusOr<std::vector<RedisReply>> Run(const std::vector<SlotCommand>& commands) override {
    return router_->Commands(commands);
  }

 private:
  ClusterRouter* router_;
};

// One Redis, owned, connected again after a connection failure.
class OwnedSingleNode : public CommandRunner {
 public:
  explicit OwnedSingleNode(RedisOptions options) : options_(std::move(options)) {}
  StatusOr<std::vector<RedisReply>> Run(const std::vector<SlotCommand>& commands) override {
    if (!conn_) {
      auto c = RedisConnection::Connect(options_);
      if (!c.ok()) return c.status();
      conn_ = std::move(c.value());
    }
    std::vector<std::vector<std::string>> args;
    args.reserve(commands.size());
    for (const SlotCommand& c : commands) args.push_back(c.args);
    std::vector<RedisReply> replies;
    if (Status s = conn_->Commands(args, &replies); !s.ok()) {
      conn_.reset();  // unusable now: the next Run connects again
      return s;
    }
    for (const RedisReply& r : replies) {
      // Not a master (a failover): the next Run connects again, and reaches
      // the new master where the address follows it.
      if (r.type == RedisReply::Type::kError && RedisConnection::CallsForReconnect(r.str)) {
        conn_.reset();
        break;
      }
    }
    return replies;
  }

 private:
  RedisOptions options_;
  std::unique_ptr<RedisConnection> conn_;
};

// A Redis Cluster, its router owned.
class OwnedCluster : public CommandRunner {
 public:
  explicit OwnedCluster(std::unique_ptr<ClusterRouter> router) : router_(std::move(router)) {}
  StatusOr<std::vector<RedisReply>> Run(const std::vector<SlotCommand>& commands) override {
    return router_->Commands(commands);
  }

 private:
  std::unique_ptr<ClusterRouter> router_;
};

Status CheckItem(std::string_view item, size_t index) {
  if (item.empty()) {
    return InvalidArgument("content item " + std::to_string(index) + ": the item ID is empty");
  }
  if (item.size() > kMaxContentItemBytes) {
    return InvalidArgument("content item " + std::to_string(index) + ": the item ID has " +
                           std::to_string(item.size()) + " bytes, more than " +
                           std::to_string(kMaxContentItemBytes));
  }
  return Status::Ok();
}

SlotCommand Cmd(const std::string& key, std::vector<std::string> args) {
  return {KeySlot(key), std::move(args)};
}

bool IsWrongType(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kError &&
         RedisConnection::ClassifyErrorReply(reply.str) == RedisErrorKind::kWrongType;
}

// Fails on an error reply, naming the command: kPermissionDenied for a refused
// one (NOAUTH, WRONGPASS, NOPERM: retrying cannot help), kUnavailable for a
// server not ready or not a master (LOADING, BUSY, READONLY, MASTERDOWN, OOM:
// retrying can), else kInternal. A GET's WRONGTYPE is no failure: a map key of
// another type is a bad map entry (MapEntry).
Status CheckReplies(const std::vector<SlotCommand>& commands,
                    const std::vector<RedisReply>& replies) {
  if (replies.size() != commands.size()) {
    return Internal("content index: " + std::to_string(replies.size()) + " replies to " +
                    std::to_string(commands.size()) + " commands");
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].type != RedisReply::Type::kError) continue;
    const auto& args = commands[i].args;
    if (args[0] == "GET" && IsWrongType(replies[i])) continue;
    const RedisErrorKind kind = RedisConnection::ClassifyErrorReply(replies[i].str);
    const bool retriable = kind == RedisErrorKind::kBusy || kind == RedisErrorKind::kOom;
    return RedisConnection::ErrorReplyStatus(
        replies[i].str,
        "content index: " + args[0] + " " + (args.size() > 1 ? args[1] : "") + ": " +
            replies[i].str,
        retriable ? StatusCode::kUnavailable : StatusCode::kInternal);
  }
  return Status::Ok();
}

}  // namespace

// A GET's reply for map key `key`: its entry, or nothing when absent or bad (a
// bad one, told to on_bad_value, sets *bad).
std::optional<MapValue> ContentIndex::MapEntry(const RedisReply& reply, const std::string& key,
                                               bool* bad) {
  if (bad) *bad = false;
  if (reply.type == RedisReply::Type::kNil) return std::nullopt;
  std::optional<MapValue> v;
  if (reply.type == RedisReply::Type::kString) v = DecodeMapValue(reply.str);
  if (!v) {
    if (bad) *bad = true;
    if (options_.on_bad_value) options_.on_bad_value(key);
  }
  return v;
}

// The map entries of `items` (GET of each, one pipelined step): nothing for an
// item not in the map.
StatusOr<std::vector<std::optional<MapValue>>> ContentIndex::ReadMap(
    const std::vector<std::string>& items) {
  std::vector<SlotCommand> cmds;
  for (const std::string& item : items) {
    std::string key = MapKey(options_.key_prefix, item);
    cmds.push_back(Cmd(key, {"GET", key}));
  }
  std::vector<std::optional<MapValue>> out(items.size());
  if (cmds.empty()) return out;
  auto replies = runner_->Run(cmds);
  if (!replies.ok()) return replies.status();
  EF_RETURN_IF_ERROR(CheckReplies(cmds, *replies));
  for (size_t i = 0; i < items.size(); ++i)
    out[i] = MapEntry((*replies)[i], cmds[i].args[1], nullptr);
  return out;
}

namespace {

struct Near {
  int distance = 1 << 20;
  uint64_t seq = UINT64_MAX;
  std::string item;
  std::string cluster;
  bool Better(int d, uint64_t s) const { return d < distance || (d == distance && s < seq); }
};

}  // namespace

std::unique_ptr<CommandRunner> SingleNodeRunner(RedisConnection& conn) {
  return std::make_unique<SingleNode>(conn);
}
std::unique_ptr<CommandRunner> ClusterRunner(ClusterRouter& router) {
  return std::make_unique<Cluster>(router);
}

std::unique_ptr<CommandRunner> ReconnectingRunner(RedisOptions redis) {
  return std::make_unique<OwnedSingleNode>(std::move(redis));
}

StatusOr<std::unique_ptr<CommandRunner>> ConnectRunner(const RedisOptions& redis) {
  auto cluster = UseCluster(redis);
  if (!cluster.ok()) return cluster.status();
  if (!*cluster) return ReconnectingRunner(redis);
  auto options = ClusterOptionsFrom(redis);
  if (!options.ok()) return options.status();
  auto router = std::make_unique<ClusterRouter>(std::move(*options));
  EF_RETURN_IF_ERROR(router->Discover());
  return std::unique_ptr<CommandRunner>(std::make_unique<OwnedCluster>(std::move(router)));
}

ContentIndexOptions ContentIndexOptionsFrom(const Config& config) {
  ContentIndexOptions o;
  o.key_prefix = config.filter.key_prefix;
  o.max_distance = static_cast<int>(config.content.max_distance);
  o.index_blocks = static_cast<int>(config.content.index_blocks);
  o.retention_ms = config.content.retention_ms;
  o.index_group_bits = static_cast<int>(config.content.index_group_bits);
  return o;
}

std::string SequenceKey(std::string_view prefix) { return std::string(prefix) + "cseq"; }
std::string RevisionKey(std::string_view prefix) { return std::string(prefix) + "cindex"; }

StatusOr<std::unique_ptr<ContentIndex>> ContentIndex::Make(ContentIndexOptions options,
                                                           std::unique_ptr<CommandRunner> runner) {
  if (options.retention_ms < 2) return InvalidArgument("content.retention must be positive");
  if (options.index_group_bits < 0 || options.index_group_bits > kMaxGroupBits) {
    return InvalidArgument("content.index_group_bits (" + std::to_string(options.index_group_bits) +
                           ") must be 0.." + std::to_string(kMaxGroupBits));
  }
  auto scheme = content::BlockScheme::Make(options.index_blocks, options.max_distance);
  if (!scheme.ok()) return scheme.status();
  return std::unique_ptr<ContentIndex>(
      new ContentIndex(std::move(options), std::move(*scheme), std::move(runner)));
}

int64_t ContentIndex::NowMs() const {
  if (options_.now_ms) return options_.now_ms();
  return SystemClock().NowMs();
}

namespace {

// Files an item's table entries in generation `gen` (ZADD), and sets that
// generation's keys to expire as a whole (PEXPIREAT); `expiring` (may be null)
// collects the keys instead, for one PEXPIREAT each later.
void FileEntries(const GroupLayout& layout, int tables, uint64_t fp, std::string_view item,
                 int64_t gen, std::vector<SlotCommand>* cmds, std::set<std::string>* expiring) {
  const std::string member = GroupLayout::Member(fp, item);
  const std::string at = std::to_string(layout.ExpireAtMs(gen));
  for (int t = 0; t < tables; ++t) {
    GroupPlace place = layout.Place(t, fp, gen);
    cmds->push_back(Cmd(place.key, {"ZADD", place.key, place.score, member}));
    if (expiring) {
      expiring->insert(std::move(place.key));
    } else {
      cmds->push_back(Cmd(place.key, {"PEXPIREAT", place.key, at}));
    }
  }
}

// Whether an item is filed (a copy, filed as its twin, is not: it must stay
// so when renewed): ZSCORE of its member in table 0's key of each live
// generation, appended to cmds; FiledIn reads their replies.
void AppendFiledChecks(const GroupLayout& layout, uint64_t fp, std::string_view item,
                       int64_t now_ms, std::vector<SlotCommand>* cmds) {
  const std::string member = GroupLayout::Member(fp, item);
  for (int64_t g = layout.OldestGeneration(now_ms); g <= layout.Generation(now_ms); ++g) {
    std::string key = layout.Place(0, fp, g).key;
    cmds->push_back(Cmd(key, {"ZSCORE", key, member}));
  }
}
bool FiledIn(const std::vector<RedisReply>& replies, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (replies[i].type == RedisReply::Type::kString) return true;
  return false;
}

}  // namespace

StatusOr<std::vector<std::optional<std::string>>> ContentIndex::Lookup(
    const std::vector<std::string>& items, bool renew) {
  for (size_t i = 0; i < items.size(); ++i) EF_RETURN_IF_ERROR(CheckItem(items[i], i));
  std::vector<std::optional<std::string>> out(items.size());
  if (!renew) {
    auto entries = ReadMap(items);
    if (!entries.ok()) return entries.status();
    for (size_t i = 0; i < items.size(); ++i)
      if ((*entries)[i]) out[i] = std::move((*entries)[i]->cluster);
    return out;
  }
  if (items.empty()) return out;
  // The queued renewals and filed checks, then each item's GET, PTTL and
  // PEXPIRE.
  const std::string ttl = std::to_string(options_.retention_ms);
  const int64_t now = NowMs();
  std::vector<SlotCommand> cmds = renewals_;
  std::vector<size_t> check_at;  // where each queued check's ZSCOREs start
  for (const MapItem& c : checks_) {
    check_at.push_back(cmds.size());
    AppendFiledChecks(layout_, c.simhash, c.item_id, now, &cmds);
  }
  const size_t queued = cmds.size();
  check_at.push_back(queued);
  for (const std::string& item : items) {
    std::string key = MapKey(options_.key_prefix, item);
    cmds.push_back(Cmd(key, {"GET", key}));
    cmds.push_back(Cmd(key, {"PTTL", key}));
    cmds.push_back(Cmd(key, {"PEXPIRE", key, ttl}));
  }
  auto replies = runner_->Run(cmds);
  if (!replies.ok()) return replies.status();
  EF_RETURN_IF_ERROR(CheckReplies(cmds, *replies));
  // The checked items that are filed: filed again in the current generation
  // with the next renewing Lookup.
  renewals_.clear();
  const int64_t gen = layout_.Generation(now);
  for (size_t c = 0; c < checks_.size(); ++c) {
    if (!FiledIn(*replies, check_at[c], check_at[c + 1])) continue;
    FileEntries(layout_, scheme_.tables(), checks_[c].simhash, checks_[c].item_id, gen, &renewals_,
                nullptr);
  }
  checks_.clear();
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t at = queued + 3 * i;
    std::optional<MapValue> v = MapEntry((*replies)[at], cmds[at].args[1], nullptr);
    if (!v) continue;
    out[i] = v->cluster;
    // The table entries only when the entry had less than half its retention
    // left: at most twice a retention per item, not at every lookup (each item
    // has C(b, k) entries: renewing them all at every lookup cost ~15x the
    // lookup).
    const RedisReply& pttl = (*replies)[at + 1];
    if (pttl.type == RedisReply::Type::kInteger && pttl.integer >= options_.retention_ms / 2)
      continue;
    if (checks_.size() >= kMaxQueuedRenewals) continue;
    checks_.push_back({items[i], v->simhash});
  }
  return out;
}

Status ContentIndex::MarkRevision() {
  const std::string key = RevisionKey(options_.key_prefix);
  std::vector<SlotCommand> cmds = {
      Cmd(key, {"SET", key, "2", "PX", std::to_string(options_.retention_ms)})};
  auto replies = runner_->Run(cmds);
  if (!replies.ok()) return replies.status();
  return CheckReplies(cmds, *replies);
}

StatusOr<bool> ContentIndex::Unindexed() {
  const std::string seq = SequenceKey(options_.key_prefix);
  const std::string rev = RevisionKey(options_.key_prefix);
  std::vector<SlotCommand> cmds = {Cmd(seq, {"EXISTS", seq}), Cmd(rev, {"GET", rev})};
  auto replies = runner_->Run(cmds);
  if (!replies.ok()) return replies.status();
  EF_RETURN_IF_ERROR(CheckReplies(cmds, *replies));
  return (*replies)[0].integer == 1 && (*replies)[1].str != "2";
}

Status ContentIndex::File(const std::vector<MapItem>& items) {
  if (items.empty()) return Status::Ok();
  const int64_t gen = layout_.Generation(NowMs());
  std::vector<SlotCommand> cmds;
  std::set<std::string> expiring;
  for (const MapItem& item : items)
    FileEntries(layout_, scheme_.tables(), item.simhash, item.item_id, gen, &cmds, &expiring);
  const std::string expire_at = std::to_string(layout_.ExpireAtMs(gen));
  for (const std::string& key : expiring) cmds.push_back(Cmd(key, {"PEXPIREAT", key, expire_at}));
  auto replies = runner_->Run(cmds);
  if (!replies.ok()) return replies.status();
  return CheckReplies(cmds, *replies);
}

StatusOr<std::vector<Assignment>> ContentIndex::Assign(const std::vector<ContentItem>& items) {
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) EF_RETURN_IF_ERROR(CheckItem(items[i].item_id, i));
  std::vector<Assignment> out(n);
  if (n == 0) return out;
  const std::string& prefix = options_.key_prefix;
  const std::string ttl = std::to_string(options_.retention_ms);
  const int k = scheme_.max_distance();
  const int tables = scheme_.tables();

  // 1. The map entries, and n sequence numbers.
  std::vector<SlotCommand> cmds;
  cmds.reserve(n + 1);
  for (const ContentItem& item : items) {
    std::string key = MapKey(prefix, item.item_id);
    cmds.push_back(Cmd(key, {"GET", key}));
  }
  const std::string seq_key = SequenceKey(prefix);
  cmds.push_back(Cmd(seq_key, {"INCRBY", seq_key, std::to_string(n)}));
  auto r1 = runner_->Run(cmds);
  if (!r1.ok()) return r1.status();
  EF_RETURN_IF_ERROR(CheckReplies(cmds, *r1));
  const uint64_t seq_base = static_cast<uint64_t>((*r1)[n].integer) - n + 1;
  // Records known from Redis, by item ID (the batch's and, after step 3, candidates').
  std::unordered_map<std::string, MapValue> records;
  std::vector<bool> stored(n, false);
  std::vector<bool> bad(n, false);                // its map key holds no map entry: written over
  std::unordered_map<std::string, size_t> first;  // item ID -> first position in the batch
  std::vector<size_t> fresh;                      // positions of new items (first occurrences)
  for (size_t i = 0; i < n; ++i) {
    bool is_bad = false;
    auto v = MapEntry((*r1)[i], cmds[i].args[1], &is_bad);
    bad[i] = is_bad;
    if (v) {
      stored[i] = true;
      records[items[i].item_id] = std::move(*v);
    }
    bool is_first = first.emplace(items[i].item_id, i).second;
    if (is_first && !stored[i]) fresh.push_back(i);
  }

  // 2. The buckets of each new item, in each generation that may live.
  const int64_t now = NowMs();
  const int64_t gen = layout_.Generation(now);
  const int64_t oldest = layout_.OldestGeneration(now);
  std::map<std::pair<std::string, std::string>, size_t> bucket_index;  // (key, score) -> cmd
  std::vector<std::vector<size_t>> item_buckets(n);
  cmds.clear();
  // A known item is filed again only if it is filed now (a copy is not).
  std::vector<std::pair<size_t, size_t>> filed_check(n, {0, 0});  // [from, to) in cmds
  for (size_t i = 0; i < n; ++i) {
    if (!stored[i] || first[items[i].item_id] != i) continue;
    filed_check[i].first = cmds.size();
    AppendFiledChecks(layout_, records[items[i].item_id].simhash, items[i].item_id, now, &cmds);
    filed_check[i].second = cmds.size();
  }
  for (size_t i : fresh) {
    for (int t = 0; t < tables; ++t) {
      for (int64_t g = oldest; g <= gen; ++g) {
        GroupPlace place = layout_.Place(t, items[i].simhash, g);
        auto [it, added] =
            bucket_index.emplace(std::make_pair(place.key, place.score), cmds.size());
        if (added) {
          cmds.push_back(Cmd(place.key, {"ZRANGEBYSCORE", place.key, place.score, place.score}));
        }
        item_buckets[i].push_back(it->second);
      }
    }
  }
  std::vector<bool> filed(n, false);  // a known item whose entries are in the tables
  // Within-distance stored entries per new item: (item ID, bucket, member).
  struct Hit {
    std::string item;
    size_t bucket;
    std::string member;
  };
  std::vector<std::vector<Hit>> hits(n);
  std::vector<std::string> to_read;  // candidates whose map entries step 3 reads
  if (!cmds.empty()) {
    auto r2 = runner_->Run(cmds);
    if (!r2.ok()) return r2.status();
    EF_RETURN_IF_ERROR(CheckReplies(cmds, *r2));
    for (size_t i = 0; i < n; ++i) {
      if (filed_check[i].second > filed_check[i].first)
        filed[i] = FiledIn(*r2, filed_check[i].first, filed_check[i].second);
    }
    std::unordered_set<std::string> wanted;
    for (size_t i : fresh) {
      for (size_t b : item_buckets[i]) {
        for (const RedisReply& m : (*r2)[b].elements) {
          uint64_t fp = 0;
          std::string_view field;
          if (!GroupLayout::ParseMember(m.str, &fp, &field) || field == items[i].item_id) continue;
          if (content::HammingDistance(fp, items[i].simhash) > k) continue;
          hits[i].push_back({std::string(field), b, m.str});
          if (!records.count(hits[i].back().item) && wanted.insert(hits[i].back().item).second)
            to_read.push_back(hits[i].back().item);
        }
      }
    }
  }
  std::vector<SlotCommand> bucket_cmds = std::move(cmds);

  // 3. The map entries of those candidates.
  if (!to_read.empty()) {
    auto r3 = ReadMap(to_read);
    if (!r3.ok()) return r3.status();
    for (size_t c = 0; c < to_read.size(); ++c)
      if ((*r3)[c]) records[to_read[c]] = std::move(*(*r3)[c]);
  }

  // Assign in batch order.
  std::vector<MapValue> batch(n);                          // what each position ends up with
  std::vector<std::pair<std::string, std::string>> stale;  // (key, member) to ZREM
  for (size_t i = 0; i < n; ++i) {
    const ContentItem& item = items[i];
    size_t f = first[item.item_id];
    if (f != i) {  // again in this batch: as its first occurrence
      batch[i] = batch[f];
      out[i].cluster = batch[f].cluster;
      out[i].known = true;
      continue;
    }
    if (stored[i]) {
      batch[i] = records[item.item_id];
      out[i].cluster = batch[i].cluster;
      out[i].known = true;
      continue;
    }
    Near best;
    for (const Hit& h : hits[i]) {
      auto rec = records.find(h.item);
      if (rec == records.end()) {  // its map entry expired: a stale bucket entry
        stale.emplace_back(bucket_cmds[h.bucket].args[1], h.member);
        continue;
      }
      int d = content::HammingDistance(rec->second.simhash, item.simhash);
      if (d <= k && best.Better(d, rec->second.seq)) {
        best = {d, rec->second.seq, h.item, rec->second.cluster};
      }
    }
    for (size_t j = 0; j < i; ++j) {  // earlier in this batch
      if (first[items[j].item_id] != j) continue;
      int d = content::HammingDistance(batch[j].simhash, item.simhash);
      if (d <= k && best.Better(d, batch[j].seq)) {
        best = {d, batch[j].seq, items[j].item_id, batch[j].cluster};
      }
    }
    batch[i].seq = seq_base + i;
    batch[i].simhash = item.simhash;
    if (best.item.empty()) {
      batch[i].cluster = item.item_id;
    } else {
      batch[i].cluster = best.cluster;
      out[i].nearest = best.item;
      out[i].distance = best.distance;
    }
    out[i].cluster = batch[i].cluster;
  }

  // 4. Write: new map entries (SET NX GET), table entries, TTLs.
  cmds.clear();
  std::vector<size_t> set_pos(n, SIZE_MAX);
  std::set<std::string> expiring;  // the current generation's keys written
  std::unordered_set<std::string> renewed_twins;
  for (size_t i = 0; i < n; ++i) {
    if (first[items[i].item_id] != i) continue;
    std::string key = MapKey(prefix, items[i].item_id);
    if (stored[i]) {
      cmds.push_back(Cmd(key, {"PEXPIRE", key, ttl}));
    } else if (bad[i]) {  // a bad entry (of any type): replaced, not kept
      cmds.push_back(
          Cmd(key, {"SET", key, EncodeMapValue(batch[i].seq, batch[i].simhash, batch[i].cluster),
                    "PX", ttl}));
    } else {
      set_pos[i] = cmds.size();
      cmds.push_back(
          Cmd(key, {"SET", key, EncodeMapValue(batch[i].seq, batch[i].simhash, batch[i].cluster),
                    "NX", "GET", "PX", ttl}));
    }
    // A new item with the fingerprint of an earlier one (its twin, the nearest
    // at distance 0) is not filed in the tables: for every later item the twin
    // is as near and older, so it would never be the nearest earlier one. Its
    // twin's entry and table entries are renewed instead, so floods of copies
    // keep one entry per generation, not one per copy (the cost of a probe
    // stays flat). A known item renews its own, if it has any.
    const bool twin = !stored[i] && out[i].distance == 0;
    if (twin) {
      if (renewed_twins.insert(out[i].nearest).second) {
        std::string tkey = MapKey(prefix, out[i].nearest);
        cmds.push_back(Cmd(tkey, {"PEXPIRE", tkey, ttl}));
        FileEntries(layout_, tables, batch[i].simhash, out[i].nearest, gen, &cmds, &expiring);
      }
    } else if (!stored[i] || filed[i]) {
      FileEntries(layout_, tables, batch[i].simhash, items[i].item_id, gen, &cmds, &expiring);
    }
  }
  for (const auto& [key, member] : stale) cmds.push_back(Cmd(key, {"ZREM", key, member}));
  const std::string expire_at = std::to_string(layout_.ExpireAtMs(gen));
  for (const std::string& key : expiring) cmds.push_back(Cmd(key, {"PEXPIREAT", key, expire_at}));
  cmds.push_back(Cmd(seq_key, {"PEXPIRE", seq_key, ttl}));
  // A new index (its first sequence numbers) is revision 2's from the start.
  const std::string rev_key = RevisionKey(prefix);
  if (seq_base == 1) {
    cmds.push_back(Cmd(rev_key, {"SET", rev_key, "2", "PX", ttl}));
  } else {
    cmds.push_back(Cmd(rev_key, {"PEXPIRE", rev_key, ttl}));
  }
  auto r4 = runner_->Run(cmds);
  if (!r4.ok()) return r4.status();
  EF_RETURN_IF_ERROR(CheckReplies(cmds, *r4));
  // A concurrent assigner wrote an entry first: its cluster stands.
  for (size_t i = 0; i < n; ++i) {
    if (set_pos[i] == SIZE_MAX) continue;
    // (A bad value written meanwhile: this item's cluster stands; the next
    // Assign of it writes over the bad value.)
    auto v = MapEntry((*r4)[set_pos[i]], cmds[set_pos[i]].args[1], nullptr);
    if (v) {
      out[i].cluster = v->cluster;
      out[i].known = true;
      out[i].nearest.clear();
      out[i].distance = -1;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    size_t f = first[items[i].item_id];
    if (f != i) out[i].cluster = out[f].cluster;
  }
  return out;
}

}  // namespace ef::contentdb
