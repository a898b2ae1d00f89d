#include "bloom/probe_rounds.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EF_PROBE_AVX512 1  // compiled for AVX-512 by attribute, used if the CPU has it
#endif

namespace ef {

namespace {

// Rule 2's position in [0, m): x mod m, by FastMod.
struct ModuloOf {
  const FastMod& mod;
  uint32_t operator()(uint64_t x) const { return mod.Mod(x); }
};
// Rule 9's (version 3): mulhi(remix(x), m).
struct RemixOf {
  uint32_t m;
  uint32_t operator()(uint64_t x) const { return ReduceV3(RemixV3(x), m); }
};

template <typename W, typename Reduce>
size_t RunScalar(const W* sliced, Reduce reduce, uint32_t k, size_t n, ProbeList<W>* list) {
  uint64_t* xs = list->x.data();
  uint64_t* h2s = list->h2.data();
  W* alive = list->alive.data();
  uint32_t* item = list->item.data();
  for (uint32_t p = 0; p < k && n != 0; ++p) {
    size_t kept = 0;
    for (size_t j = 0; j < n; ++j) {
      const W a = alive[j] & sliced[reduce(xs[j])];
      xs[kept] = xs[j] + h2s[j];  // kept <= j: compaction in place
      h2s[kept] = h2s[j];
      alive[kept] = a;
      item[kept] = item[j];
      kept += a != 0;
    }
    n = kept;
  }
  return n;
}

template <typename W>
size_t FillScalar(const Hash128* hashes, const int8_t* best, size_t first, size_t n, W has,
                  size_t kept, ProbeList<W>* list) {
  for (size_t i = first; i < n; ++i) {
    const W alive = has & ProbeRounds::NewerThan<W>(best[i]);
    list->x[kept] = hashes[i].h1;
    list->h2[kept] = hashes[i].h2;
    list->alive[kept] = alive;
    list->item[kept] = static_cast<uint32_t>(i);
    kept += alive != 0;
  }
  return kept;
}

#if defined(EF_PROBE_AVX512)
#define EF_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,popcnt")))

// FastMod::Mod on eight 64-bit lanes: the same steps, with the high half of the
// 64 x 64-bit product (t = mulhi(x, magic)) from four 32 x 32-bit products.
// Shifts, adds and masks are written with GCC's vector operators (GCC 12's
// shift intrinsics warn about their own undefined source operand).
typedef uint64_t U64x8 __attribute__((vector_size(64)));

struct ModX8 {
  U64x8 magic_lo, magic_hi, m, mask;
  uint64_t shift;
};

EF_AVX512 inline U64x8 Splat(uint64_t v) { return U64x8{v, v, v, v, v, v, v, v}; }

EF_AVX512 inline ModX8 MakeModX8(const FastMod& mod) {
  return ModX8{Splat(mod.magic() & 0xffffffffu), Splat(mod.magic() >> 32), Splat(mod.m()),
               Splat(mod.mask()), static_cast<uint64_t>(mod.shift())};
}

// Low 32 bits of each lane times low 32 bits of each lane: 64-bit products.
// (The zero-masked form with every lane on: the plain one warns the same way.)
EF_AVX512 inline U64x8 Mul32(U64x8 a, U64x8 b) {
  return reinterpret_cast<U64x8>(_mm512_maskz_mul_epu32(
      __mmask8{0xff}, reinterpret_cast<__m512i>(a), reinterpret_cast<__m512i>(b)));
}

EF_AVX512 inline U64x8 Mod8(U64x8 x, const ModX8& c) {
  const U64x8 x_hi = x >> 32;
  const U64x8 ll = Mul32(x, c.magic_lo);
  const U64x8 lh = Mul32(x, c.magic_hi);
  const U64x8 hl = Mul32(x_hi, c.magic_lo);
  const U64x8 hh = Mul32(x_hi, c.magic_hi);
  // x * magic = hh 2^64 + (lh + hl) 2^32 + ll: the carry into bit 64 comes from
  // the sum of the middle 32-bit columns (< 3 * 2^32, no overflow).
  const U64x8 mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  const U64x8 t = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
  const U64x8 q = (((x - t) >> 1) + t) >> c.shift;
  // x - q * m (mod 2^64), m < 2^32: q m = q_lo m + (q_hi m) 2^32
  const U64x8 qm = Mul32(q, c.m) + (Mul32(q >> 32, c.m) << 32);
  return (x - qm) & c.mask;
}

// Rule 9 on eight lanes: y = (x ^ (x >> 32)) * kV3Remix (mod 2^64: AVX-512 DQ's
// 64-bit multiply), then mulhi(y, m) for m < 2^32 from two 32 x 32-bit products:
// (y_hi m + (y_lo m >> 32)) >> 32, which stays below 2^64.
struct RemixX8 {
  U64x8 c, m;
};

EF_AVX512 inline RemixX8 MakeRemixX8(uint32_t m) { return RemixX8{Splat(kV3Remix), Splat(m)}; }

EF_AVX512 inline U64x8 Remix8(U64x8 x, const RemixX8& c) {
  const U64x8 y = (x ^ (x >> 32)) * c.c;
  return (Mul32(y >> 32, c.m) + (Mul32(y, c.m) >> 32)) >> 32;
}

struct ModLanes {
  ModX8 c;
  EF_AVX512 U64x8 operator()(U64x8 x) const { return Mod8(x, c); }
};
struct RemixLanes {
  RemixX8 c;
  EF_AVX512 U64x8 operator()(U64x8 x) const { return Remix8(x, c); }
};

// ef_microbench BM_TestItems light/heavy/top, 2026-11-25 (medians of 2): one round
// per pass 26.8/44.6/64.5 µs, two 25.6/42.2/62.1, three 26.0/41.0/60.1, four
// 25.9/40.8/59.6, five 26.5/40.8/60.1.
constexpr uint32_t kFirstPass = 3;

template <typename Lanes>
EF_AVX512 size_t RunAvx512(const uint32_t* sliced, Lanes reduce, uint32_t k, size_t n,
                           ProbeList<uint32_t>* list) {
  uint64_t* xs = list->x.data();
  uint64_t* h2s = list->h2.data();
  uint32_t* alive = list->alive.data();
  uint32_t* item = list->item.data();
  for (uint32_t p = 0; p < k && n != 0;) {
    // The first kFirstPass rounds run in one pass, without compaction between
    // them: few entries leave that early (an unseen item stays in the running
    // while any of ~31 buckets has its bit set).
    const uint32_t r = p == 0 ? std::min(k, kFirstPass) : 1;
    p += r;
    size_t kept = 0;
    // Eight entries per step. The last step reads up to 7 entries past n (the
    // padding; masked out), and each step writes 8 entries from `kept` on:
    // kept <= j, so only entries this or an earlier step has read are overwritten.
    for (size_t j = 0; j < n; j += 8) {
      const __mmask8 valid =
          n - j >= 8 ? __mmask8{0xff} : static_cast<__mmask8>((1u << (n - j)) - 1);
      U64x8 x, h2;
      std::memcpy(&x, xs + j, sizeof x);
      std::memcpy(&h2, h2s + j, sizeof h2);
      __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(alive + j));
      const __m256i it = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(item + j));
      for (uint32_t q = 0; q < r; ++q) {
        // Eight loads, not a gather (vpgatherqd): the same words, and on the
        // machine of docs/perf-history.md ("Eight loads instead of a gather")
        // BM_TestItems took 11-21% less. Every lane's position is below m, so
        // the padding's lanes (masked out below) read inside `sliced` too.
        const U64x8 pos = reduce(x);
        const __m256i words =
            _mm256_setr_epi32(static_cast<int>(sliced[pos[0]]), static_cast<int>(sliced[pos[1]]),
                              static_cast<int>(sliced[pos[2]]), static_cast<int>(sliced[pos[3]]),
                              static_cast<int>(sliced[pos[4]]), static_cast<int>(sliced[pos[5]]),
                              static_cast<int>(sliced[pos[6]]), static_cast<int>(sliced[pos[7]]));
        a = _mm256_and_si256(a, words);
        x += h2;
      }
      const __mmask8 keep = _mm256_test_epi32_mask(a, a) & valid;
      _mm512_storeu_si512(xs + kept,
                          _mm512_maskz_compress_epi64(keep, reinterpret_cast<__m512i>(x)));
      _mm512_storeu_si512(h2s + kept,
                          _mm512_maskz_compress_epi64(keep, reinterpret_cast<__m512i>(h2)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(alive + kept),
                          _mm256_maskz_compress_epi32(keep, a));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(item + kept),
                          _mm256_maskz_compress_epi32(keep, it));
      kept += static_cast<size_t>(_mm_popcnt_u32(keep));
    }
    n = kept;
  }
  return n;
}

constexpr uint64_t kEven[8] = {0, 2, 4, 6, 8, 10, 12, 14};
constexpr uint64_t kOdd[8] = {1, 3, 5, 7, 9, 11, 13, 15};

// FillScalar, eight items per step: NewerThan(b) is ~0 << (b + 1) for b in
// [-1, 31] (a shift by 32 gives 0), and the entries kept are compress-stored
// as RunAvx512 stores them.
EF_AVX512 size_t FillAvx512(const Hash128* hashes, const int8_t* best, size_t n, uint32_t has,
                            ProbeList<uint32_t>* list) {
  uint64_t* xs = list->x.data();
  uint64_t* h2s = list->h2.data();
  uint32_t* alive = list->alive.data();
  uint32_t* item = list->item.data();
  const __m256i ones = _mm256_set1_epi32(-1);
  const __m256i has8 = _mm256_set1_epi32(static_cast<int>(has));
  const __m512i even = _mm512_loadu_si512(kEven);
  const __m512i odd = _mm512_loadu_si512(kOdd);
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  size_t kept = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8, index = _mm256_add_epi32(index, _mm256_set1_epi32(8))) {
    int64_t b8;
    std::memcpy(&b8, best + i, sizeof b8);
    const __m256i shift =
        _mm256_add_epi32(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b8)), _mm256_set1_epi32(1));
    const __m256i a = _mm256_and_si256(has8, _mm256_sllv_epi32(ones, shift));
    const __mmask8 keep = _mm256_test_epi32_mask(a, a);
    const __m512i lo = _mm512_loadu_si512(hashes + i);
    const __m512i hi = _mm512_loadu_si512(hashes + i + 4);
    _mm512_storeu_si512(xs + kept,
                        _mm512_maskz_compress_epi64(keep, _mm512_permutex2var_epi64(lo, even, hi)));
    _mm512_storeu_si512(h2s + kept,
                        _mm512_maskz_compress_epi64(keep, _mm512_permutex2var_epi64(lo, odd, hi)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(alive + kept),
                        _mm256_maskz_compress_epi32(keep, a));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(item + kept),
                        _mm256_maskz_compress_epi32(keep, index));
    kept += static_cast<size_t>(_mm_popcnt_u32(keep));
  }
  return FillScalar(hashes, best, i, n, has, kept, list);
}

template <typename Lanes, typename Reduce>
EF_AVX512 void ReduceEachAvx512(Lanes lanes, Reduce reduce, const uint64_t* x, size_t n,
                                uint32_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    U64x8 v;
    std::memcpy(&v, x + i, sizeof v);
    v = lanes(v);
    for (int l = 0; l < 8; ++l) out[i + l] = static_cast<uint32_t>(v[l]);
  }
  for (; i < n; ++i) out[i] = reduce(x[i]);
}
#endif

}  // namespace

ProbeRounds::ProbeRounds(Isa max_isa) {
#if defined(EF_PROBE_AVX512)
  if (max_isa >= Isa::kAvx512 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("popcnt")) {
    isa_ = Isa::kAvx512;
  }
#else
  (void)max_isa;
#endif
}

template <typename W>
size_t ProbeRounds::Run(const W* sliced, const FastMod& mod, PositionRule rule, uint32_t k,
                        size_t n, ProbeList<W>* list) const {
  const bool remix = rule == PositionRule::kRemix;
#if defined(EF_PROBE_AVX512)
  if constexpr (sizeof(W) == sizeof(uint32_t)) {
    if (isa_ == Isa::kAvx512) {
      return remix ? RunAvx512(sliced, RemixLanes{MakeRemixX8(mod.m())}, k, n, list)
                   : RunAvx512(sliced, ModLanes{MakeModX8(mod)}, k, n, list);
    }
  }
#endif
  return remix ? RunScalar(sliced, RemixOf{mod.m()}, k, n, list)
               : RunScalar(sliced, ModuloOf{mod}, k, n, list);
}

template <typename W>
size_t ProbeRounds::Fill(const Hash128* hashes, const int8_t* best, size_t n, W has,
                         ProbeList<W>* list) const {
#if defined(EF_PROBE_AVX512)
  if constexpr (sizeof(W) == sizeof(uint32_t)) {
    if (isa_ == Isa::kAvx512) return FillAvx512(hashes, best, n, has, list);
  }
#endif
  return FillScalar(hashes, best, 0, n, has, 0, list);
}

void ProbeRounds::ReduceEach(const FastMod& mod, PositionRule rule, const uint64_t* x, size_t n,
                             uint32_t* out) const {
  const bool remix = rule == PositionRule::kRemix;
#if defined(EF_PROBE_AVX512)
  if (isa_ == Isa::kAvx512) {
    if (remix)
      return ReduceEachAvx512(RemixLanes{MakeRemixX8(mod.m())}, RemixOf{mod.m()}, x, n, out);
    return ReduceEachAvx512(ModLanes{MakeModX8(mod)}, ModuloOf{mod}, x, n, out);
  }
#endif
  for (size_t i = 0; i < n; ++i) out[i] = remix ? RemixOf{mod.m()}(x[i]) : mod.Mod(x[i]);
}

template size_t ProbeRounds::Run<uint32_t>(const uint32_t*, const FastMod&, PositionRule, uint32_t,
                                           size_t, ProbeList<uint32_t>*) const;
template size_t ProbeRounds::Run<uint64_t>(const uint64_t*, const FastMod&, PositionRule, uint32_t,
                                           size_t, ProbeList<uint64_t>*) const;

template size_t ProbeRounds::Fill<uint32_t>(const Hash128*, const int8_t*, size_t, uint32_t,
                                            ProbeList<uint32_t>*) const;
template size_t ProbeRounds::Fill<uint64_t>(const Hash128*, const int8_t*, size_t, uint64_t,
                                            ProbeList<uint64_t>*) const;

}  // namespace ef
