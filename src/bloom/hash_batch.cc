#include "bloom/hash_batch.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EF_HASH_AVX512 1  // compiled for AVX-512 by attribute, used if the CPU has it
#endif

namespace ef {

static_assert(sizeof(Hash128) == 16, "HashX8Avx512 stores h1, h2 pairs as 16 bytes");
static_assert(sizeof(const char*) == sizeof(uint64_t), "HashX8Avx512 loads addresses as lanes");

namespace {

#if defined(EF_HASH_AVX512)
#define EF_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

// MurmurHash3_x64_128 (the reference algorithm libmurmurhash implements) on
// eight 64-bit lanes, one item per lane. Arithmetic is written with GCC's vector
// operators (64-bit lane products: VPMULLQ of AVX-512 DQ).
typedef uint64_t U64x8 __attribute__((vector_size(64)));

constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;

EF_AVX512 inline U64x8 Splat(uint64_t v) { return U64x8{v, v, v, v, v, v, v, v}; }

template <int R>
EF_AVX512 inline U64x8 Rotl(U64x8 x) {
  return (x << R) | (x >> (64 - R));
}

// One 8-byte half of a block or tail mixed before it enters h1 (a = c1, b = c2,
// R = 31) or h2 (a = c2, b = c1, R = 33).
template <int R>
EF_AVX512 inline U64x8 MixK(U64x8 k, U64x8 a, U64x8 b) {
  k *= a;
  k = Rotl<R>(k);
  return k * b;
}

EF_AVX512 inline U64x8 Fmix(U64x8 k) {
  k ^= k >> 33;
  k *= Splat(0xff51afd7ed558ccdULL);
  k ^= k >> 33;
  k *= Splat(0xc4ceb9fe1a85ec53ULL);
  k ^= k >> 33;
  return k;
}

EF_AVX512 inline U64x8 Blend(__mmask8 take_b, U64x8 a, U64x8 b) {
  return reinterpret_cast<U64x8>(
      _mm512_mask_blend_epi64(take_b, reinterpret_cast<__m512i>(a), reinterpret_cast<__m512i>(b)));
}

EF_AVX512 inline U64x8 Permute(U64x8 a, const uint64_t (&index)[8], U64x8 b) {
  U64x8 idx;
  std::memcpy(&idx, index, sizeof idx);
  return reinterpret_cast<U64x8>(_mm512_permutex2var_epi64(
      reinterpret_cast<__m512i>(a), reinterpret_cast<__m512i>(idx), reinterpret_cast<__m512i>(b)));
}

constexpr uint64_t kEven[8] = {0, 2, 4, 6, 8, 10, 12, 14};
constexpr uint64_t kOdd[8] = {1, 3, 5, 7, 9, 11, 13, 15};
constexpr uint64_t kPairsLow[8] = {0, 8, 1, 9, 2, 10, 3, 11};
constexpr uint64_t kPairsHigh[8] = {4, 12, 5, 13, 6, 14, 7, 15};

// The tail (len & 15 bytes after the last whole block) of the item, zero-padded
// to 16 bytes: a byte-masked load, which reads (and can fault on) no byte
// outside the mask.
EF_AVX512 inline __m128i LoadTail(const char* p, uint32_t len) {
  const uint32_t tail = len & 15u;
  if (tail == 0) return _mm_setzero_si128();
  return _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << tail) - 1), p + (len & ~15u));
}

// Items [0, 8) of ptr / len into out.
EF_AVX512 void HashX8Avx512(const char* const* ptr, const uint32_t* len, uint32_t seed,
                            Hash128* out) {
  const U64x8 c1 = Splat(kC1);
  const U64x8 c2 = Splat(kC2);
  U64x8 h1 = Splat(seed);
  U64x8 h2 = h1;
  const U64x8 lens = reinterpret_cast<U64x8>(
      _mm512_maskz_cvtepu32_epi64(0xff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(len))));
  const U64x8 blocks = lens >> 4;
  U64x8 addr;
  std::memcpy(&addr, ptr, sizeof addr);
  // Whole 16-byte blocks: lane j takes part while b < its block count.
  for (uint64_t b = 0;; ++b, addr += 16) {
    const __mmask8 active = _mm512_cmpgt_epu64_mask(reinterpret_cast<__m512i>(blocks),
                                                    reinterpret_cast<__m512i>(Splat(b)));
    if (active == 0) break;
    const U64x8 k1 = reinterpret_cast<U64x8>(_mm512_mask_i64gather_epi64(
        _mm512_setzero_si512(), active, reinterpret_cast<__m512i>(addr), nullptr, 1));
    const U64x8 k2 = reinterpret_cast<U64x8>(_mm512_mask_i64gather_epi64(
        _mm512_setzero_si512(), active, reinterpret_cast<__m512i>(addr + 8), nullptr, 1));
    U64x8 n1 = Rotl<27>(h1 ^ MixK<31>(k1, c1, c2)) + h2;
    n1 = n1 * 5 + 0x52dce729;
    U64x8 n2 = Rotl<31>(h2 ^ MixK<33>(k2, c2, c1)) + n1;
    n2 = n2 * 5 + 0x38495ab5;
    h1 = Blend(active, h1, n1);
    h2 = Blend(active, h2, n2);
  }
  // The tail: k1 from its bytes 0-7, k2 from 8-14, little-endian. A lane with
  // fewer bytes has zeros there, and mixing a zero k changes nothing (0 * c = 0,
  // rotl 0 = 0, h ^ 0 = h), as the reference's skipped cases.
  __m512i lo = _mm512_castsi128_si512(LoadTail(ptr[0], len[0]));
  lo = _mm512_inserti32x4(lo, LoadTail(ptr[1], len[1]), 1);
  lo = _mm512_inserti32x4(lo, LoadTail(ptr[2], len[2]), 2);
  lo = _mm512_inserti32x4(lo, LoadTail(ptr[3], len[3]), 3);
  __m512i hi = _mm512_castsi128_si512(LoadTail(ptr[4], len[4]));
  hi = _mm512_inserti32x4(hi, LoadTail(ptr[5], len[5]), 1);
  hi = _mm512_inserti32x4(hi, LoadTail(ptr[6], len[6]), 2);
  hi = _mm512_inserti32x4(hi, LoadTail(ptr[7], len[7]), 3);
  const U64x8 k1 = Permute(reinterpret_cast<U64x8>(lo), kEven, reinterpret_cast<U64x8>(hi));
  const U64x8 k2 = Permute(reinterpret_cast<U64x8>(lo), kOdd, reinterpret_cast<U64x8>(hi));
  h2 ^= MixK<33>(k2, c2, c1);
  h1 ^= MixK<31>(k1, c1, c2);
  // Finalization.
  h1 ^= lens;
  h2 ^= lens;
  h1 += h2;
  h2 += h1;
  h1 = Fmix(h1);
  h2 = Fmix(h2);
  h1 += h2;
  h2 += h1;
  const U64x8 first = Permute(h1, kPairsLow, h2);    // h1[0], h2[0], ..., h2[3]
  const U64x8 second = Permute(h1, kPairsHigh, h2);  // h1[4], h2[4], ..., h2[7]
  std::memcpy(out, &first, sizeof first);
  std::memcpy(out + 4, &second, sizeof second);
}
#endif

}  // namespace

ItemHasher::ItemHasher(Isa max_isa) {
#if defined(EF_HASH_AVX512)
  if (max_isa >= Isa::kAvx512 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    isa_ = Isa::kAvx512;
  }
#else
  (void)max_isa;
#endif
}

void ItemHasher::HashArrays(const char* const* ptr, const uint32_t* len, size_t n, uint32_t seed,
                            Hash128* out) const {
  size_t i = 0;
#if defined(EF_HASH_AVX512)
  if (isa_ == Isa::kAvx512) {
    for (; i + kLanes <= n; i += kLanes) HashX8Avx512(ptr + i, len + i, seed, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = HashItem(std::string_view(ptr[i], len[i]), seed);
}

const ItemHasher& DefaultItemHasher() {
  static const ItemHasher hasher;
  return hasher;
}

}  // namespace ef
