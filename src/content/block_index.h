// The permuted-block index of Simhash fingerprints (docs/CONTENT.md "3. Index"),
// after Manku, Jain and Das Sarma (WWW 2007), the pigeonhole form:
// - the 64 bits are split into `blocks` contiguous blocks (b > k = max_distance),
//   as even as possible: block i is bits [start_i, start_i + len_i), counted from
//   bit 0 (the least significant), the first 64 % b blocks one bit longer;
// - two fingerprints within distance k differ in at most k blocks, so they agree
//   exactly on at least b - k blocks: on every block of at least one combination
//   of b - k blocks out of b;
// - so there is one table per such combination, C(b, k) tables, numbered in the
//   lexicographic order of the combinations (table 0 keeps blocks 0 .. b-k-1);
//   table t files a fingerprint under its key: the bits of the kept blocks,
//   concatenated, lowest block in the most significant place (Key()).
// A probe reads the one bucket of each table that the fingerprint's keys name;
// every stored fingerprint within k is in at least one of them (recall 100% by
// construction), the others in them are the candidates to drop by distance.
// BlockScheme is the arithmetic shared by the in-memory index below and the
// Redis index (src/contentdb); pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"

namespace ef::content {

inline constexpr int kMaxBlocks = 16;
inline constexpr int kMaxTables = 128;

class BlockScheme {
 public:
  // kInvalidArgument unless 0 <= max_distance < blocks <= kMaxBlocks and
  // C(blocks, max_distance) <= kMaxTables; the message names content.index_blocks.
  static StatusOr<BlockScheme> Make(int blocks, int max_distance);
  static Status Check(int blocks, int max_distance);
  // C(n, k) (small n).
  static int64_t Combinations(int n, int k);

  int blocks() const { return blocks_; }
  int max_distance() const { return max_distance_; }
  int tables() const { return static_cast<int>(tables_.size()); }
  // Bits in table t's key (the sum of its kept blocks' lengths).
  int key_bits(int t) const { return tables_[static_cast<size_t>(t)].bits; }
  // Table t's key of fingerprint fp: the kept blocks' bits, concatenated.
  uint64_t Key(int t, uint64_t fp) const;

 private:
  struct Block {
    int start = 0;
    int len = 0;
  };
  struct Table {
    std::vector<int> kept;  // block indexes, ascending
    int bits = 0;
  };
  BlockScheme() = default;
  int blocks_ = 0;
  int max_distance_ = 0;
  std::vector<Block> block_;
  std::vector<Table> tables_;
};

// The same tables in memory: per table a sorted array of (key, item index).
// For the recall test (against a brute-force scan) and the measurement of
// candidates per probe (docs/CONTENT.md). Add everything, Seal(), then Probe.
class MemoryIndex {
 public:
  explicit MemoryIndex(BlockScheme scheme)
      : scheme_(std::move(scheme)), tables_(scheme_.tables()) {}
  // Stores fp as item `index` (indexes need not be dense or unique).
  void Add(uint64_t fp, uint32_t index);
  void Seal();  // sorts the tables; Probe needs it after the last Add
  // The stored items within max_distance of fp (each once, ascending index);
  // *candidates (if given) += the entries read from the probed buckets.
  std::vector<uint32_t> Probe(uint64_t fp, size_t* candidates = nullptr) const;
  const BlockScheme& scheme() const { return scheme_; }
  // Bytes of the tables' entries (sizeof(Entry) = 24 per item per table).
  size_t EntryBytes() const;

 private:
  struct Entry {
    uint64_t key;
    uint32_t index;
    uint64_t fp;
  };
  BlockScheme scheme_;
  std::vector<std::vector<Entry>> tables_;
};

}  // namespace ef::content
