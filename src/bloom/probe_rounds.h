// The probe rounds of one bit-sliced stage, for TestItems (read/bloom_reader.cc).
//
// A stage's candidates still in the running are a work list; round p probes
// position p of every entry: entry.alive &= sliced[position(entry.x)], then
// entry.x += entry.h2, and the entries whose alive mask became 0 leave the list
// (the others keep their order). The loads of a round do not depend on each
// other, and no branch waits on one.
//
// Two implementations give the same results: a scalar loop, and (for up to 32
// buckets, W = uint32_t, on a CPU with AVX-512 F, VL and DQ) eight entries per step:
// the position on 64-bit lanes (rule 2: the exact x mod m of bloom/fast_mod.h;
// rule 9: the remix and multiply-shift of bloom/positions.h), eight loads of the
// sliced words (not a gather: cheaper, docs/perf-history.md) and a compress-store of
// the entries kept. Chosen at run time, so the
// binary still runs on any x86-64; tests/unit/bloom/probe_rounds_test.cc checks both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bloom/fast_mod.h"
#include "bloom/hash.h"
#include "bloom/positions.h"

namespace ef {

// The work list, as a structure of arrays. Entry j (j < the count the caller
// keeps) is an item still in the running in the stage.
template <typename W>
struct ProbeList {
  std::vector<uint64_t> x;     // the next position's progression value, h1 + p * h2 (mod 2^64)
  std::vector<uint64_t> h2;    // the item's h2
  std::vector<W> alive;        // the buckets it may still be in (not 0)
  std::vector<uint32_t> item;  // its index in the candidates

  // Room for n entries and the padding the vector path reads and writes past them.
  void Resize(size_t n) {
    x.resize(n + kPad);
    h2.resize(n + kPad);
    alive.resize(n + kPad);
    item.resize(n + kPad);
  }
  static constexpr size_t kPad = 8;
};

class ProbeRounds {
 public:
  enum class Isa { kScalar, kAvx512 };

  // max_isa: the most Run may use (tests pass kScalar to check that path too).
  explicit ProbeRounds(Isa max_isa = Isa::kAvx512);
  Isa isa() const { return isa_; }

  // Rounds 0 .. k-1 over entries [0, n) of *list (stopping early once none is
  // left), positions in [0, mod.m()) by `rule`; `sliced` holds a word for every
  // position below mod.m(). Returns how
  // many entries are left: [0, returned) of *list, in their former order, with
  // x advanced by one h2 per round run. *list must have been Resize()d for n.
  // Thread-safe (no state but the ISA).
  template <typename W>
  size_t Run(const W* sliced, const FastMod& mod, PositionRule rule, uint32_t k, size_t n,
             ProbeList<W>* list) const;

  // The work list of a stage: for each item i < n, alive = has & NewerThan(best[i])
  // (the buckets of `has` newer than best[i]; best[i] < 0: all of them), and the
  // items with alive != 0, in item order, become entries [0, returned) of *list
  // with x = hashes[i].h1, h2 = hashes[i].h2, item = i. best[i] is in
  // [-1, 8 * sizeof(W)). *list must have been Resize()d for n. Thread-safe.
  template <typename W>
  size_t Fill(const Hash128* hashes, const int8_t* best, size_t n, W has, ProbeList<W>* list) const;

  // The buckets newer than bucket b (b < 0: every bucket).
  template <typename W>
  static W NewerThan(int b) {
    constexpr int kWidth = 8 * sizeof(W);
    return b < 0 ? ~W{0} : b == kWidth - 1 ? W{0} : static_cast<W>(~((W{2} << b) - 1));
  }

  // out[i] = the position of x[i] in [0, mod.m()) by `rule`, for i < n, by the
  // path Run uses (for the test).
  void ReduceEach(const FastMod& mod, PositionRule rule, const uint64_t* x, size_t n,
                  uint32_t* out) const;

 private:
  Isa isa_ = Isa::kScalar;
};

}  // namespace ef
