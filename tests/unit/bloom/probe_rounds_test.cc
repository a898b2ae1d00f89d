// ProbeRounds (src/bloom/probe_rounds.h): both paths, by both position rules,
// against a plain reference, entry by entry.
#include "bloom/probe_rounds.h"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "support/cpu_paths.h"

namespace ef {
namespace {

struct Entry {
  uint64_t x, h2;
  uint64_t alive;
  uint32_t item;
  bool operator==(const Entry&) const = default;
};

// The positions written out: rule 2 is x mod m; rule 9 (FORMAT.md) remixes x
// with xorshift-multiply and takes the high word of the 128-bit product with m.
uint64_t PositionWrittenOut(PositionRule rule, uint64_t x, uint32_t m) {
  if (rule == PositionRule::kModulo) return x % m;
  const uint64_t y = (x ^ (x >> 32)) * 0xff51afd7ed558ccdULL;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(y) * m) >> 64);
}

// The rule, one entry at a time: k rounds, out at the first round that leaves
// no bucket.
template <typename W>
std::vector<Entry> Reference(const std::vector<W>& sliced, PositionRule rule, uint32_t m,
                             uint32_t k, const std::vector<Entry>& in) {
  std::vector<Entry> out;
  for (Entry e : in) {
    W a = static_cast<W>(e.alive);
    for (uint32_t p = 0; p < k && a != 0; ++p) {
      a &= sliced[PositionWrittenOut(rule, e.x, m)];
      e.x += e.h2;
    }
    e.alive = a;
    if (a != 0) out.push_back(e);
  }
  return out;
}

// Each kernel forced in turn: scalar everywhere, AVX-512 where the CPU has it
// (where it has, ProbeRounds must use it, not fall back).
std::vector<ProbeRounds> Paths() {
  std::vector<ProbeRounds> out{ProbeRounds(ProbeRounds::Isa::kScalar)};
  REQUIRE(out.front().isa() == ProbeRounds::Isa::kScalar);
  test::ReportKernel("ProbeRounds scalar", true);
  const ProbeRounds avx512(ProbeRounds::Isa::kAvx512);
  const bool has_avx512 = test::CpuHasAvx512Probe();
  REQUIRE(avx512.isa() == (has_avx512 ? ProbeRounds::Isa::kAvx512 : ProbeRounds::Isa::kScalar));
  if (has_avx512) out.push_back(avx512);
  test::ReportKernel("ProbeRounds avx512", has_avx512, "AVX-512 F, VL and DQ, and POPCNT");
  return out;
}

template <typename W>
std::vector<Entry> RunRounds(const ProbeRounds& rounds, const std::vector<W>& sliced,
                             PositionRule rule, uint32_t m, uint32_t k,
                             const std::vector<Entry>& in) {
  ProbeList<W> list;
  list.Resize(in.size());
  for (size_t j = 0; j < in.size(); ++j) {
    list.x[j] = in[j].x;
    list.h2[j] = in[j].h2;
    list.alive[j] = static_cast<W>(in[j].alive);
    list.item[j] = in[j].item;
  }
  const FastMod mod(m);
  const size_t n = rounds.Run(sliced.data(), mod, rule, k, in.size(), &list);
  std::vector<Entry> out;
  for (size_t j = 0; j < n; ++j)
    out.push_back({list.x[j], list.h2[j], list.alive[j], list.item[j]});
  return out;
}

template <typename W>
void CheckPaths(std::mt19937_64& rng, size_t* checked) {
  const std::vector<ProbeRounds> paths = Paths();
  for (int trial = 0; trial < 800; ++trial) {
    const PositionRule rule = trial % 2 ? PositionRule::kRemix : PositionRule::kModulo;
    const uint32_t m =
        trial % 5 == 0 ? 1u << (trial % 13) : 1 + static_cast<uint32_t>(rng() % 5000);
    const uint32_t k = 1 + static_cast<uint32_t>(rng() % 16);
    // Bits set with probability 1/2 .. 15/16, so entries leave at every round.
    const int density = 1 + trial % 4;
    std::vector<W> sliced(m);
    for (W& w : sliced) {
      W v = static_cast<W>(rng());
      for (int d = 0; d < density; ++d) v |= static_cast<W>(rng());
      w = v;
    }
    const size_t n = static_cast<size_t>(rng() % 67);  // every length mod 8
    std::vector<Entry> in(n);
    for (size_t j = 0; j < n; ++j) {
      W alive = static_cast<W>(rng());
      if (alive == 0) alive = 1;
      in[j] = Entry{rng(), rng(), alive, static_cast<uint32_t>(j * 3 + 1)};
    }
    const std::vector<Entry> want = Reference(sliced, rule, m, k, in);
    INFO("rule " << (trial % 2 ? 9 : 2) << ", m " << m << ", k " << k << ", n " << n);
    for (const ProbeRounds& rounds : paths) {
      INFO("isa " << static_cast<int>(rounds.isa()));
      CHECK(RunRounds(rounds, sliced, rule, m, k, in) == want);
    }
    *checked += want.size();
  }
}

TEST_CASE("ProbeRounds: both paths keep exactly the entries the rule keeps", "[probe_rounds]") {
  std::mt19937_64 rng(11);
  size_t kept = 0;
  CheckPaths<uint32_t>(rng, &kept);
  CheckPaths<uint64_t>(rng, &kept);
  CHECK(kept > 1000);  // the trials are not all empty
  // The default (what the read path uses) is the best this CPU has.
  CHECK(ProbeRounds().isa() ==
        (test::CpuHasAvx512Probe() ? ProbeRounds::Isa::kAvx512 : ProbeRounds::Isa::kScalar));
}

TEST_CASE(
    "ProbeRounds::ReduceEach: rule 2 is x % m, rule 9 the 128-bit product, for edge and "
    "random divisors",
    "[probe_rounds]") {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> divisors = {
      1,    2,    3,     7,          8,          31,         32,         33,        1023,
      1024, 1025, 65537, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 0xffffffffu));
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 100000));
  const std::vector<ProbeRounds> paths = Paths();
  std::vector<uint64_t> x;
  for (uint64_t v = 0; v < 70; ++v) x.push_back(v);
  for (uint64_t v = 0; v < 70; ++v) x.push_back(~uint64_t{0} - v);
  for (int j = 0; j < 1500; ++j) x.push_back(rng());
  std::vector<uint32_t> out(x.size() * 3 + 2);
  size_t checked = 0;
  for (const uint32_t m : divisors) {
    std::vector<uint64_t> xs = x;
    for (uint64_t v : x) {  // multiples of m and their neighbours
      const uint64_t q = v / m;
      xs.push_back(q * m);
      xs.push_back(q * m + m - 1);
    }
    xs.push_back(0);  // odd lengths: the scalar tail too
    out.resize(xs.size());
    for (const ProbeRounds& rounds : paths) {
      for (PositionRule rule : {PositionRule::kModulo, PositionRule::kRemix}) {
        rounds.ReduceEach(FastMod(m), rule, xs.data(), xs.size(), out.data());
        for (size_t i = 0; i < xs.size(); ++i) {
          const uint64_t want = PositionWrittenOut(rule, xs[i], m);
          if (out[i] != want) {
            INFO("isa " << static_cast<int>(rounds.isa()) << ", rule "
                        << (rule == PositionRule::kRemix ? 9 : 2) << ", m " << m << ", x "
                        << xs[i]);
            CHECK(out[i] == want);
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 2'000'000 * paths.size());
}

}  // namespace
}  // namespace ef

namespace ef {
namespace {

// Fill against the rule written out, for both paths and both widths.
template <typename W>
void CheckFill(std::mt19937_64& rng, size_t* kept_total) {
  constexpr int kWidth = 8 * sizeof(W);
  const std::vector<ProbeRounds> paths = Paths();
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = static_cast<size_t>(rng() % 75);  // every length mod 8
    std::vector<Hash128> hashes(n);
    std::vector<int8_t> best(n);
    for (size_t i = 0; i < n; ++i) {
      hashes[i] = Hash128{rng(), rng()};
      // Every bucket index and -1, the newest bucket included.
      best[i] = static_cast<int8_t>(static_cast<int>(rng() % (kWidth + 1)) - 1);
    }
    W has = static_cast<W>(rng());
    if (trial % 7 == 0) has = ~W{0};
    if (trial % 11 == 0) has = W{1} << (kWidth - 1);
    std::vector<Entry> want;
    for (size_t i = 0; i < n; ++i) {
      W alive = has;
      for (int b = 0; b <= best[i]; ++b) alive &= static_cast<W>(~(W{1} << b));
      if (alive != 0)
        want.push_back(Entry{hashes[i].h1, hashes[i].h2, alive, static_cast<uint32_t>(i)});
    }
    for (const ProbeRounds* rounds = paths.data(); rounds != paths.data() + paths.size();
         ++rounds) {
      ProbeList<W> list;
      list.Resize(n);
      const size_t got_n = rounds->Fill(hashes.data(), best.data(), n, has, &list);
      std::vector<Entry> got;
      for (size_t j = 0; j < got_n; ++j)
        got.push_back(Entry{list.x[j], list.h2[j], list.alive[j], list.item[j]});
      INFO("isa " << static_cast<int>(rounds->isa()) << " n " << n << " has " << has);
      CHECK(got == want);
    }
    *kept_total += want.size();
  }
}

TEST_CASE("ProbeRounds::Fill: both paths list exactly the items with a newer bucket in the stage",
          "[probe_rounds]") {
  std::mt19937_64 rng(23);
  size_t kept = 0;
  CheckFill<uint32_t>(rng, &kept);
  CheckFill<uint64_t>(rng, &kept);
  CHECK(kept > 1000);
}

}  // namespace
}  // namespace ef
