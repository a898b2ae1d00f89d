// Layout v4's writers (docs/FORMAT.md rule 11, issue 53) in every write mode on
// real redis-servers: the same batches leave every key with the same value and
// EXPIRETIME byte for byte; each new key's class is the class rule's choice from
// the user's previous bucket (ChooseClassFrom); the reader finds
// every item; a key whose first byte names no class, and a key of another type,
// are skipped; a key deleted behind the writer's back is written again with its
// header and its expiry.
#include <catch2/catch.hpp>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "bloom/stages.h"
#include "config/config.h"
#include "module/module_support.h"
#include "write/bit_writer.h"

namespace ef::test {
namespace {

constexpr int64_t kDay = 86400;

struct V4Case {
  std::string name;
  WriteMode mode;
  bool module_loaded;
  size_t bitop_threshold;
};

// The default layout at items_per_bucket 10 (stages advance within a few
// batches), version 4 with v4_from 0: every key has a class.
Layout V4Layout() {
  FilterConfig f;
  f.items_per_bucket = 10;
  f.layout_version = 4;
  f.key_prefix = "w4:";
  auto l = LayoutFromConfig(f);
  REQUIRE(l.ok());
  REQUIRE(l->version() == 4);
  return *l;
}

int64_t Today() { return BucketStart(static_cast<int64_t>(std::time(nullptr)), kDay); }

std::string KeyOf(const Layout& l, int user, int64_t bucket) {
  return MakeKey(l.prefix, "u" + std::to_string(user), bucket, kDay);
}

// One batch key of `user` in `bucket`: n items "<tag>-<i>".
KeyBits UserKey(const Layout& l, int user, int64_t bucket, const std::string& tag, int n) {
  return ItemsKey(l, KeyOf(l, user, bucket), tag, n, ExpireAt(bucket, kDay, l.window_seconds));
}

// Yesterday: users 0-3 at 300, 60, 12 and 3 items (their history); today: the
// write-mode batches' shape over 10 users, each batch written twice.
std::vector<BitBatch> V4Batches(const Layout& l) {
  std::vector<BitBatch> out;
  BitBatch past;
  const int64_t yesterday = Today() - kDay;
  const int history[] = {300, 60, 12, 3};
  for (int u = 0; u < 4; ++u)
    past.keys.push_back(UserKey(l, u, yesterday, "y" + std::to_string(u), history[u]));
  past.size = past.keys.size();
  out.push_back(past);
  std::mt19937 rng(4);
  for (int b = 0; b < 5; ++b) {
    BitBatch batch;
    for (int u = 0; u < 10; ++u) {
      const int n = u < 2 ? 40 + static_cast<int>(rng() % 41) : 1 + static_cast<int>(rng() % 12);
      batch.keys.push_back(
          UserKey(l, u, Today(), "t" + std::to_string(b) + "u" + std::to_string(u), n));
    }
    batch.size = batch.keys.size();
    out.push_back(batch);
    out.push_back(batch);
  }
  return out;
}

// Every key: its value (hex; "<type>" if not a string) and EXPIRETIME.
std::map<std::string, std::pair<std::string, int64_t>> Dump(RedisConnection& conn) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  for (const auto& k : Cmd(conn, {"KEYS", "w4:{*"}).elements) {
    const std::string type = Cmd(conn, {"TYPE", k.str}).str;
    std::string value = type == "string" ? Hex(Cmd(conn, {"GET", k.str}).str) : "<" + type + ">";
    out[k.str] = {value, Cmd(conn, {"EXPIRETIME", k.str}).integer};
  }
  return out;
}

void StoreMeta(RedisConnection& conn, const Layout& l) {
  std::vector<std::string> args = {"HSET", MetaKey(l.prefix)};
  for (const auto& [f, v] : l.ToFields()) args.insert(args.end(), {f, v});
  args.insert(args.end(), {"founder_marks_from", "0"});
  Cmd(conn, args);
}

}  // namespace

TEST_CASE("layout v4 writes: every mode leaves the same values, classes by the rule, all read",
          "[module][write_mode][v4]") {
  const std::vector<V4Case> cases{
      {"bitfield", WriteMode::kBitfield, false, 24},      {"setbit", WriteMode::kSetbit, false, 24},
      {"module", WriteMode::kModule, true, 24},           {"bitop", WriteMode::kBitop, false, 24},
      {"bitop (every key)", WriteMode::kBitop, false, 0},
  };
  const Layout l = V4Layout();
  const std::vector<BitBatch> batches = V4Batches(l);
  const int64_t today = Today();
  const std::string broken = KeyOf(l, 5, today), list = KeyOf(l, 8, today);
  std::map<std::string, std::pair<std::string, int64_t>> reference;
  for (const V4Case& mc : cases) {
    INFO("mode " << mc.name);
    auto redis = mc.module_loaded ? ServerWithModule() : std::make_unique<RedisServer>();
    auto conn = redis->Connect();
    StoreMeta(*conn, l);
    // Today's key of user 5 exists with a first byte that names no class; user 8's
    // is a list. Both are skipped, by every mode, whatever their items.
    Cmd(*conn, {"SET", broken, std::string("\x00\x80\x01", 3)});
    Cmd(*conn, {"LPUSH", list, "a-list"});
    BitWriterOptions o;
    o.redis.port = redis->port();
    o.mode = mc.mode;
    o.bitop_threshold = mc.bitop_threshold;
    o.layout = l;
    RedisBitWriter writer(o);
    uint64_t advances = 0, skipped = 0;
    for (size_t b = 0; b < batches.size(); ++b) {
      WriteStats stats;
      Status st = writer.Write(batches[b], &stats);
      INFO("batch " << b << ": " << st.message());
      REQUIRE(st.ok());
      advances += stats.stages.advances;
      skipped += stats.skipped_keys;
    }
    REQUIRE(writer.effective_layout() != nullptr);
    CHECK(writer.effective_layout()->version() == 4);
    CHECK(advances > 0);
    CHECK(skipped == 2 * 10);  // users 5 and 8 in each of today's 10 writes
    CHECK(Cmd(*conn, {"GET", broken}).str == std::string("\x00\x80\x01", 3));

    // Each of today's keys has the class the rule chooses from yesterday's value.
    for (int u = 0; u < 10; ++u) {
      if (u == 5 || u == 8) continue;
      INFO("user " << u);
      const std::string past = Cmd(*conn, {"GET", KeyOf(l, u, today - kDay)}).str;
      const std::string before = Cmd(*conn, {"GET", KeyOf(l, u, today - 2 * kDay)}).str;
      const std::string value = Cmd(*conn, {"GET", KeyOf(l, u, today)}).str;
      REQUIRE(!value.empty());
      CHECK(static_cast<uint32_t>(static_cast<uint8_t>(value[0])) ==
            ChooseClassFrom(l, today, past, before) + 1);
    }
    // User 0's history (300 items against a design of 10) gives a larger class
    // than user 4's (none: the default class).
    CHECK(Cmd(*conn, {"GET", KeyOf(l, 0, today)}).str[0] >
          Cmd(*conn, {"GET", KeyOf(l, 4, today)}).str[0]);

    // Every item written is in its key (no false negative).
    for (const BitBatch& batch : batches) {
      for (size_t k = 0; k < batch.size; ++k) {
        const KeyBits& kb = batch.keys[k];
        if (kb.key == broken || kb.key == list) continue;
        const std::string value = Cmd(*conn, {"GET", kb.key}).str;
        const std::vector<Stage>* t = l.TableFor(value, kb.bucket_start);
        REQUIRE(t != nullptr);
        for (const Hash128& h : kb.items)
          CHECK(ValueContains(value, *t, l.RuleFor(kb.bucket_start), h));
      }
    }

    auto dump = Dump(*conn);
    for (const auto& [key, v] : dump) {
      INFO("key " << key);
      if (v.first.front() != '<' && key != broken) {
        const int64_t bucket =
            key.find(FormatBucket(today, kDay)) != std::string::npos ? today : today - kDay;
        CHECK(v.second == ExpireAt(bucket, kDay, l.window_seconds));
      }
    }
    if (reference.empty()) {
      reference = dump;
    } else {
      CHECK(dump.size() == reference.size());
      for (const auto& [key, v] : reference) {
        INFO("key " << key);
        REQUIRE(dump.count(key) == 1);
        CHECK(dump[key].first == v.first);
        if (v.first.front() != '<' && key != broken) CHECK(dump[key].second == v.second);
      }
    }

    // A key deleted behind the writer's back (its state remembered) is written
    // again with its header and its expiry.
    const std::string lost = KeyOf(l, 3, today);
    const std::string before = Cmd(*conn, {"GET", lost}).str;
    Cmd(*conn, {"DEL", lost});
    BitBatch again;
    again.keys.push_back(UserKey(l, 3, today, "again", 2));
    again.size = 1;
    WriteStats stats;
    REQUIRE(writer.Write(again, &stats).ok());
    const std::string after = Cmd(*conn, {"GET", lost}).str;
    REQUIRE(!after.empty());
    CHECK(after[0] == before[0]);
    REQUIRE(l.TableFor(after, today) != nullptr);
    for (const Hash128& h : again.keys[0].items)
      CHECK(ValueContains(after, *l.TableFor(after, today), l.RuleFor(today), h));
    CHECK(Cmd(*conn, {"EXPIRETIME", lost}).integer == ExpireAt(today, kDay, l.window_seconds));
  }
}

}  // namespace ef::test
