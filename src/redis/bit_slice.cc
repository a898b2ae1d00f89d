#include "redis/bit_slice.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EF_SLICE_AVX2 1  // compiled for AVX2 by attribute, used if the CPU has it
#endif

namespace ef {

namespace {

constexpr size_t kBlock = 16;  // bytes of a row per step (one SSE2 register)

#if defined(__SSE2__)
// r[j] byte i = (before) r[i] byte j: a 16 x 16 byte transpose in four rounds of
// unpacks (bytes, 16-bit, 32-bit and 64-bit units).
inline void Transpose16x16(__m128i r[16]) {
  __m128i a[16], b[16];
  for (int p = 0; p < 8; ++p) {  // a[p]: j 0-7, a[8+p]: j 8-15; rows 2p, 2p+1
    a[p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    a[8 + p] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  for (int h = 0; h < 2; ++h) {    // h: j 0-7 or 8-15
    for (int q = 0; q < 4; ++q) {  // rows 4q..4q+3; b[8h+q]: 4 j's, b[8h+4+q]: the next 4
      b[8 * h + q] = _mm_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
      b[8 * h + 4 + q] = _mm_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
    }
  }
  // b[base + q], base = 8h + 4 * half: the 4 j's from `base` on, rows 4q..4q+3.
  for (int base = 0; base < 16; base += 4) {
    a[base + 0] = _mm_unpacklo_epi32(b[base + 0], b[base + 1]);  // j base, +1; rows 0-7
    a[base + 1] = _mm_unpackhi_epi32(b[base + 0], b[base + 1]);  // j base+2, +3; rows 0-7
    a[base + 2] = _mm_unpacklo_epi32(b[base + 2], b[base + 3]);  // j base, +1; rows 8-15
    a[base + 3] = _mm_unpackhi_epi32(b[base + 2], b[base + 3]);  // j base+2, +3; rows 8-15
    r[base + 0] = _mm_unpacklo_epi64(a[base + 0], a[base + 2]);
    r[base + 1] = _mm_unpackhi_epi64(a[base + 0], a[base + 2]);
    r[base + 2] = _mm_unpacklo_epi64(a[base + 1], a[base + 3]);
    r[base + 3] = _mm_unpackhi_epi64(a[base + 1], a[base + 3]);
  }
}
#endif

// One block of 16 bytes of up to 16 rows: o[8 * j + t] |= (bit t of byte j of
// row i) << (shift + i).
template <typename W>
inline void SliceBlock(const unsigned char* const* rows, unsigned shift, bool first_group, W* o) {
#if defined(__SSE2__)
  __m128i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]));
  Transpose16x16(r);
  for (int j = 0; j < 16; ++j) {
    __m128i v = r[j];
    for (int t = 0; t < 8; ++t) {
      // Bit i of the mask: the top bit of byte j of row i, i.e. bit t before t doublings.
      const W m = static_cast<W>(static_cast<unsigned>(_mm_movemask_epi8(v))) << shift;
      o[8 * j + t] = first_group ? m : (o[8 * j + t] | m);
      v = _mm_add_epi8(v, v);
    }
  }
#else
  for (int j = 0; j < 16; ++j) {
    for (int t = 0; t < 8; ++t) {
      W m = 0;
      for (int i = 0; i < 16; ++i) m |= static_cast<W>((rows[i][j] >> (7 - t)) & 1) << (shift + i);
      o[8 * j + t] = first_group ? m : (o[8 * j + t] | m);
    }
  }
#endif
}

#if defined(EF_SLICE_AVX2)
// SliceBlock for 32 rows at once: the same transpose on 256-bit registers (AVX2
// unpacks work within each 128-bit half: rows 0-15 in the low half, 16-31 in the
// high one), so one movemask gives the bits of all 32 rows.
template <typename W>
__attribute__((target("avx2"))) void SliceBlock32(const unsigned char* const* rows, unsigned shift,
                                                  bool first_group, W* o) {
  __m256i r[16], a[16], b[16];
  for (int i = 0; i < 16; ++i) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[16 + i]));
    r[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  for (int p = 0; p < 8; ++p) {
    a[p] = _mm256_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    a[8 + p] = _mm256_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    for (int q = 0; q < 4; ++q) {
      b[8 * h + q] = _mm256_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
      b[8 * h + 4 + q] = _mm256_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
    }
  }
  for (int base = 0; base < 16; base += 4) {
    a[base + 0] = _mm256_unpacklo_epi32(b[base + 0], b[base + 1]);
    a[base + 1] = _mm256_unpackhi_epi32(b[base + 0], b[base + 1]);
    a[base + 2] = _mm256_unpacklo_epi32(b[base + 2], b[base + 3]);
    a[base + 3] = _mm256_unpackhi_epi32(b[base + 2], b[base + 3]);
    r[base + 0] = _mm256_unpacklo_epi64(a[base + 0], a[base + 2]);
    r[base + 1] = _mm256_unpackhi_epi64(a[base + 0], a[base + 2]);
    r[base + 2] = _mm256_unpacklo_epi64(a[base + 1], a[base + 3]);
    r[base + 3] = _mm256_unpackhi_epi64(a[base + 1], a[base + 3]);
  }
  for (int j = 0; j < 16; ++j) {
    __m256i v = r[j];
    for (int t = 0; t < 8; ++t) {
      const W m = static_cast<W>(static_cast<uint32_t>(_mm256_movemask_epi8(v))) << shift;
      o[8 * j + t] = first_group ? m : (o[8 * j + t] | m);
      v = _mm256_add_epi8(v, v);
    }
  }
}
#endif

}  // namespace

template <typename W>
void BitSlicer::SliceRange(const std::string_view* values, W rows, size_t first, size_t bytes,
                           W* out) {
  constexpr size_t kMaxRows = 8 * sizeof(W);
  const size_t span = (bytes + kBlock - 1) / kBlock * kBlock;  // readable bytes per row
  if (zeros_.size() < span) zeros_.assign(span, 0);
  // Rows shorter than `span` from `first` are copied, zero-padded, into padded_.
  size_t n_padded = 0;
  for (W a = rows; a != 0; a &= a - 1) {
    const std::string_view v = values[std::countr_zero(a)];
    n_padded += v.size() < first + span;
  }
  if (padded_.size() < n_padded * span) padded_.resize(n_padded * span);
  std::array<const unsigned char*, kMaxRows> row{};
  size_t next_pad = 0;
  for (size_t r = 0; r < kMaxRows; ++r) {
    row[r] = zeros_.data();
    if (((rows >> r) & 1) == 0) continue;
    const std::string_view v = values[r];
    if (v.size() >= first + span) {
      row[r] = reinterpret_cast<const unsigned char*>(v.data()) + first;
      continue;
    }
    unsigned char* p = padded_.data() + span * next_pad++;
    const size_t have = v.size() > first ? std::min(v.size() - first, bytes) : 0;
    std::memcpy(p, v.data() + first, have);
    std::memset(p + have, 0, span - have);
    row[r] = p;
  }
#if defined(EF_SLICE_AVX2)
  if (use_avx2_) {
    const int groups = std::max(1, static_cast<int>((std::bit_width(rows) + 31) / 32));
    for (size_t j0 = 0; j0 < span; j0 += kBlock) {
      std::array<const unsigned char*, 32> block;
      for (int g = 0; g < groups; ++g) {
        for (int i = 0; i < 32; ++i) block[i] = row[32 * g + i] + j0;
        SliceBlock32<W>(block.data(), static_cast<unsigned>(32 * g), g == 0, out + 8 * j0);
      }
    }
    return;
  }
#endif
  const int groups = static_cast<int>((std::bit_width(rows) + 15) / 16);
  for (size_t j0 = 0; j0 < span; j0 += kBlock) {
    std::array<const unsigned char*, 16> block;
    for (int g = 0; g < std::max(groups, 1); ++g) {
      for (int i = 0; i < 16; ++i) block[i] = row[16 * g + i] + j0;
      SliceBlock<W>(block.data(), static_cast<unsigned>(16 * g), g == 0, out + 8 * j0);
    }
  }
}

BitSlicer::BitSlicer(bool allow_avx2) {
#if defined(EF_SLICE_AVX2)
  use_avx2_ = allow_avx2 && __builtin_cpu_supports("avx2");
#else
  (void)allow_avx2;
#endif
}

template void BitSlicer::SliceRange<uint32_t>(const std::string_view*, uint32_t, size_t, size_t,
                                              uint32_t*);
template void BitSlicer::SliceRange<uint64_t>(const std::string_view*, uint64_t, size_t, size_t,
                                              uint64_t*);

}  // namespace ef
