#include "content/block_index.h"

#include <algorithm>
#include <string>

namespace ef::content {

int64_t BlockScheme::Combinations(int n, int k) {
  if (k < 0 || k > n) return 0;
  int64_t c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

Status BlockScheme::Check(int blocks, int max_distance) {
  if (max_distance < 0 || blocks <= max_distance || blocks > kMaxBlocks) {
    return InvalidArgument("content.index_blocks (" + std::to_string(blocks) +
                           ") must be > content.max_distance (" + std::to_string(max_distance) +
                           ") and <= " + std::to_string(kMaxBlocks));
  }
  int64_t tables = Combinations(blocks, max_distance);
  if (tables > kMaxTables) {
    return InvalidArgument("content.index_blocks (" + std::to_string(blocks) +
                           ") with content.max_distance (" + std::to_string(max_distance) +
                           ") makes " + std::to_string(tables) + " tables, more than " +
                           std::to_string(kMaxTables));
  }
  return Status::Ok();
}

StatusOr<BlockScheme> BlockScheme::Make(int blocks, int max_distance) {
  if (Status s = Check(blocks, max_distance); !s.ok()) return s;
  BlockScheme scheme;
  scheme.blocks_ = blocks;
  scheme.max_distance_ = max_distance;
  int start = 0;
  for (int i = 0; i < blocks; ++i) {
    int len = 64 / blocks + (i < 64 % blocks ? 1 : 0);
    scheme.block_.push_back({start, len});
    start += len;
  }
  // Combinations of blocks - max_distance kept blocks, lexicographic.
  int keep = blocks - max_distance;
  std::vector<int> comb(static_cast<size_t>(keep));
  for (int i = 0; i < keep; ++i) comb[static_cast<size_t>(i)] = i;
  while (true) {
    Table t;
    t.kept = comb;
    for (int b : comb) t.bits += scheme.block_[static_cast<size_t>(b)].len;
    scheme.tables_.push_back(std::move(t));
    int i = keep - 1;
    while (i >= 0 && comb[static_cast<size_t>(i)] == blocks - keep + i) --i;
    if (i < 0) break;
    ++comb[static_cast<size_t>(i)];
    for (int j = i + 1; j < keep; ++j) {
      comb[static_cast<size_t>(j)] = comb[static_cast<size_t>(j - 1)] + 1;
    }
  }
  return scheme;
}

uint64_t BlockScheme::Key(int t, uint64_t fp) const {
  uint64_t key = 0;
  for (int b : tables_[static_cast<size_t>(t)].kept) {
    const Block& block = block_[static_cast<size_t>(b)];
    uint64_t mask = block.len == 64 ? ~uint64_t{0} : (uint64_t{1} << block.len) - 1;
    key = (block.len == 64 ? 0 : key << block.len) | ((fp >> block.start) & mask);
  }
  return key;
}

void MemoryIndex::Add(uint64_t fp, uint32_t index) {
  for (int t = 0; t < scheme_.tables(); ++t) {
    tables_[static_cast<size_t>(t)].push_back({scheme_.Key(t, fp), index, fp});
  }
}

void MemoryIndex::Seal() {
  for (auto& table : tables_) {
    std::sort(table.begin(), table.end(),
              [](const Entry& a, const Entry& b) { return a.key < b.key; });
  }
}

std::vector<uint32_t> MemoryIndex::Probe(uint64_t fp, size_t* candidates) const {
  std::vector<uint32_t> out;
  for (int t = 0; t < scheme_.tables(); ++t) {
    const auto& table = tables_[static_cast<size_t>(t)];
    uint64_t key = scheme_.Key(t, fp);
    auto lo = std::lower_bound(table.begin(), table.end(), key,
                               [](const Entry& e, uint64_t k) { return e.key < k; });
    for (auto it = lo; it != table.end() && it->key == key; ++it) {
      if (candidates != nullptr) ++*candidates;
      if (__builtin_popcountll(it->fp ^ fp) <= scheme_.max_distance()) out.push_back(it->index);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t MemoryIndex::EntryBytes() const {
  size_t n = 0;
  for (const auto& table : tables_) n += table.size() * sizeof(Entry);
  return n;
}

}  // namespace ef::content
