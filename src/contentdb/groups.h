// Where the content index keeps its table entries in Redis: layout revision 2
// (docs/CONTENT.md "4. Redis layout"). Pure arithmetic, no I/O.
//
// Revision 1 kept one hash per bucket (`<p>cb{t:key}`); with 25-26-bit keys
// nearly every bucket was a key of its own, ~175 bytes of Redis per entry.
// Revision 2 packs many buckets into one small sorted set, which Redis stores
// as a listpack (~28 bytes per entry):
// - table t's key of a fingerprint (BlockScheme::Key, key_bits(t) bits) is
//   split into its top g = min(group_bits, key_bits(t)) bits, the group, and
//   the rest, the score: the bucket is the group's members of that score
//   (ZRANGEBYSCORE key score score);
// - a member is the fingerprint's 8 bytes (big-endian), then the item ID;
// - time is cut into generations of half a retention (G = retention / 2,
//   generation = floor(now_ms / G)), and each generation has its own keys,
//   `<p>cg{<t>:<group hex>:<generation>}`, expiring as a whole at
//   (generation + 1) * G + retention (PEXPIREAT): an entry written at time w
//   lives until at least w + retention, at most w + retention + G, and nothing
//   needs deleting entry by entry (a sorted set has no per-member TTL);
// - a probe reads every generation whose keys may still live: from
//   OldestGeneration(now) to Generation(now), 3 of them (4 for a millisecond
//   when retention is odd).
// Thread-safe (const).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "content/block_index.h"

namespace ef::contentdb {

inline constexpr int kMaxGroupBits = 24;

struct GroupPlace {
  std::string key;    // `<p>cg{<t>:<group hex>:<generation>}`
  std::string score;  // the bucket within the group, decimal
};

class GroupLayout {
 public:
  // group_bits in 0..kMaxGroupBits, retention_ms >= 2 (checked by the caller).
  GroupLayout(std::string prefix, const content::BlockScheme& scheme, int group_bits,
              int64_t retention_ms);

  int64_t Generation(int64_t now_ms) const { return now_ms / generation_ms_; }
  // The oldest generation whose keys may still live at now_ms.
  int64_t OldestGeneration(int64_t now_ms) const;
  // When generation `gen`'s keys expire (epoch ms, for PEXPIREAT).
  int64_t ExpireAtMs(int64_t gen) const { return (gen + 1) * generation_ms_ + retention_ms_; }
  // Table t's entry of fingerprint fp in generation gen: its key and score.
  GroupPlace Place(int table, uint64_t fp, int64_t gen) const;
  int group_bits(int table) const;

  // A member: fp's 8 bytes big-endian, then the item ID. Parse: false if the
  // member has no item (fewer than 9 bytes: not ours).
  static std::string Member(uint64_t fp, std::string_view item);
  static bool ParseMember(std::string_view member, uint64_t* fp, std::string_view* item);

 private:
  std::string prefix_;
  const content::BlockScheme* scheme_;
  int group_bits_;
  int64_t retention_ms_;
  int64_t generation_ms_;
};

}  // namespace ef::contentdb
