// Contract rule 10 (docs/FORMAT.md "10. Served items"): the served ring of a
// user, the items a recall service returned recently ("pseudo-exposures"), so the
// next page does not repeat them before their exposure events arrive.
//
// Key `<prefix>{<user>}:served` (the user's hash tag: same slot as its buckets,
// read by the same MGET). Value, all integers little-endian:
//   byte 0      0x53 ('S'), byte 1: revision 1, byte 2: w (fingerprint bytes,
//               2..8), byte 3: 0
//   bytes 4-7   capacity C (1 .. 2^20)
//   bytes 8-11  next: the slot the next item goes to (< C)
//   bytes 12-15 filled: how many slots hold an item (<= C); they are slots
//               [0, filled)
//   then C slots of w bytes: 16 + C * w bytes in all.
// Fingerprint of an item: the top 8w bits of h1 (rule 1, the filter's seed),
// 1 if those are 0. An item is served iff its fingerprint is in slots
// [0, filled). A write appends the items in order at `next` (wrapping: the
// oldest are overwritten, never the newest; of more than C items only the last C
// are kept) and sets the key's TTL. A string that is not such a ring (another
// size or header) reads as no ring; a write replaces it with a new one. A key of
// another type reads as no ring, and a write fails with WRONGTYPE, leaving it.
// False positives: an item never served reads served with probability at most
// filled * 2^-8w; ServedWidth picks the smallest w that keeps C * 2^-8w <= fpr.
// Pure and thread-safe, except ServedSet (one per thread or call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"

namespace ef {

inline constexpr size_t kServedHeaderBytes = 16;
inline constexpr uint32_t kServedMaxCapacity = 1u << 20;

// `<prefix>{<user>}:served`.
std::string ServedKey(std::string_view prefix, std::string_view user);

// The fingerprint width in bytes for a ring of `capacity` items and a target
// false-positive rate `fpr` (0 < fpr < 1): the smallest w in [2, 8] with
// capacity * 2^-8w <= fpr (8 if none).
uint32_t ServedWidth(uint32_t capacity, double fpr);

// The fingerprint of an item with hash h, `width` bytes wide (never 0).
inline uint64_t ServedFingerprint(Hash128 h, uint32_t width) {
  const uint64_t fp = h.h1 >> (64 - 8 * width);
  return fp == 0 ? 1 : fp;
}

// The fingerprints of items, `width` bytes each, little-endian, in order: the
// script's fingerprint argument (ServedScript).
void AppendServedFingerprints(const Hash128* items, size_t n, uint32_t width, std::string* out);

// The ring after appending the fingerprints `fps` (AppendServedFingerprints) to
// `value` ("" for a missing key) with capacity C and width w: what the script does
// to the key, for tests and other writers. A value that is not a ring of (C, w)
// starts a new ring.
std::string ApplyServed(std::string_view value, uint32_t capacity, uint32_t width,
                        std::string_view fps);

// The Lua script that writes a ring (EVAL/EVALSHA): KEYS[1] the served key;
// ARGV capacity, width, TTL in milliseconds, fingerprints. Atomic (one script).
// Returns the number of filled slots after the write.
const std::string& ServedScript();

// A ring as read: the set of its fingerprints, for testing many items.
class ServedSet {
 public:
  // Reads `value` (a GET/MGET result; "" = missing). False, and empty, if the
  // value is not a ring (missing, or another size or header).
  bool Parse(std::string_view value);
  bool empty() const { return filled_ == 0; }
  uint32_t width() const { return width_; }
  uint32_t filled() const { return filled_; }
  // True iff the ring holds the fingerprint of h.
  bool Contains(Hash128 h) const;

 private:
  uint32_t width_ = 0, filled_ = 0;
  uint64_t mask_ = 0;
  std::vector<uint64_t> table_;  // open addressing; 0 = empty (fingerprints are never 0)
};

}  // namespace ef
