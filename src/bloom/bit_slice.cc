#include "bloom/bit_slice.h"

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

// Every loop of the block transposes below runs a fixed number of times over
// register arrays. GCC 12 at -O2 (the default build type, RelWithDebInfo) kept
// them as loops, so every array lived on the stack and each shuffle loaded and
// stored its operands: SliceBlock64x32 took ~300 ns a 64-byte block of 32 rows;
// unrolled, the arrays are registers and it takes ~130 (docs/perf-history.md
// "Unrolled transposes").
#define EF_UNROLL _Pragma("GCC unroll 16")

constexpr size_t kBlock = 16;  // bytes of a row per step (one SSE2 register)

#if defined(__SSE2__)
// r[j] byte i = (before) r[i] byte j: a 16 x 16 byte transpose in four rounds of
// unpacks (bytes, 16-bit, 32-bit and 64-bit units).
inline void Transpose16x16(__m128i r[16]) {
  __m128i a[16], b[16];
  EF_UNROLL for (int p = 0; p < 8; ++p) {  // a[p]: j 0-7, a[8+p]: j 8-15; rows 2p, 2p+1
    a[p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    a[8 + p] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  EF_UNROLL for (int h = 0; h < 2; ++h) {    // h: j 0-7 or 8-15
    EF_UNROLL for (int q = 0; q < 4; ++q) {  // rows 4q..4q+3; b[8h+q]: 4 j's, b[8h+4+q]: the next 4
      b[8 * h + q] = _mm_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
      b[8 * h + 4 + q] = _mm_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
    }
  }
  // b[base + q], base = 8h + 4 * half: the 4 j's from `base` on, rows 4q..4q+3.
  EF_UNROLL for (int base = 0; base < 16; base += 4) {
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
  EF_UNROLL for (int i = 0; i < 16; ++i) {
    r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]));
  }
  Transpose16x16(r);
  EF_UNROLL for (int j = 0; j < 16; ++j) {
    __m128i v = r[j];
    EF_UNROLL for (int t = 0; t < 8; ++t) {
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
  EF_UNROLL for (int i = 0; i < 16; ++i) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[16 + i]));
    r[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  EF_UNROLL for (int p = 0; p < 8; ++p) {
    a[p] = _mm256_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    a[8 + p] = _mm256_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  EF_UNROLL for (int h = 0; h < 2; ++h) {
    EF_UNROLL for (int q = 0; q < 4; ++q) {
      b[8 * h + q] = _mm256_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
      b[8 * h + 4 + q] = _mm256_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
    }
  }
  EF_UNROLL for (int base = 0; base < 16; base += 4) {
    a[base + 0] = _mm256_unpacklo_epi32(b[base + 0], b[base + 1]);
    a[base + 1] = _mm256_unpackhi_epi32(b[base + 0], b[base + 1]);
    a[base + 2] = _mm256_unpacklo_epi32(b[base + 2], b[base + 3]);
    a[base + 3] = _mm256_unpackhi_epi32(b[base + 2], b[base + 3]);
    r[base + 0] = _mm256_unpacklo_epi64(a[base + 0], a[base + 2]);
    r[base + 1] = _mm256_unpackhi_epi64(a[base + 0], a[base + 2]);
    r[base + 2] = _mm256_unpacklo_epi64(a[base + 1], a[base + 3]);
    r[base + 3] = _mm256_unpackhi_epi64(a[base + 1], a[base + 3]);
  }
  EF_UNROLL for (int j = 0; j < 16; ++j) {
    __m256i v = r[j];
    EF_UNROLL for (int t = 0; t < 8; ++t) {
      const W m = static_cast<W>(static_cast<uint32_t>(_mm256_movemask_epi8(v))) << shift;
      o[8 * j + t] = first_group ? m : (o[8 * j + t] | m);
      v = _mm256_add_epi8(v, v);
    }
  }
}

// Full-mask forms of _mm512_unpack{lo,hi}_epi32 and _mm512_shuffle_i64x2: the
// plain ones pass GCC 12's _mm512_undefined_epi32(), which -Wuninitialized
// reports (GCC bug 105593); with an all-ones mask the instruction is the same.
#define EF_UNPACKLO32(a, b) _mm512_maskz_unpacklo_epi32(__mmask16(0xFFFF), (a), (b))
#define EF_UNPACKHI32(a, b) _mm512_maskz_unpackhi_epi32(__mmask16(0xFFFF), (a), (b))
#define EF_SHUFFLE128(a, b, imm) _mm512_maskz_shuffle_i64x2(__mmask8(0xFF), (a), (b), (imm))

// 32 rows x 64 bytes (one zmm per row) at a time: out[8 * j + t] bit r = Redis
// bit t (MSB first) of byte j of row r, for j < 64, written whole (rows not in
// use point at zeros). Per group of 8 rows, a byte transpose (three rounds of
// unpacks, as Transpose16x16 less its last round) leaves in each qword the byte j
// of the 8 rows; GF2P8AFFINEQB then transposes that 8 x 8 bit matrix: result
// byte t, bit i = bit i' of matrix byte 7 - i for x byte t = 1 << i' (Intel SDM,
// GF2P8AFFINEQB), so the rows go in reversed (qword byte q = row 7 - q) and x
// byte t selects bit 7 - t (the Redis bit t). The four groups' bytes are then
// interleaved into 32-bit words and the 128-bit lanes put in column order.
//
// After the unpacks, zmm z = 4h + 2a + b (h, a, b the lo/hi choices of rounds 1
// to 3) holds in lane L the columns 16L + 8h + 4a + 2b + {0, 1}.
__attribute__((target("avx512f,avx512bw,gfni"))) void SliceBlock64x32(
    const unsigned char* const* rows, uint32_t* o) {
  const __m512i select = _mm512_set1_epi64(0x0102040810204080LL);
  __m512i g[4][8];  // [group][z]: per column qword, byte t = the group's 8 bits
  EF_UNROLL for (int grp = 0; grp < 4; ++grp) {
    __m512i r[8], a[8], b[8];
    EF_UNROLL for (int q = 0; q < 8; ++q) r[q] = _mm512_loadu_si512(rows[8 * grp + 7 - q]);
    EF_UNROLL for (int p = 0; p < 4; ++p) {
      a[p] = _mm512_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
      a[4 + p] = _mm512_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
    }
    EF_UNROLL for (int h = 0; h < 2; ++h) {
      EF_UNROLL for (int q = 0; q < 2; ++q) {
        b[4 * h + q] = _mm512_unpacklo_epi16(a[4 * h + 2 * q], a[4 * h + 2 * q + 1]);
        b[4 * h + 2 + q] = _mm512_unpackhi_epi16(a[4 * h + 2 * q], a[4 * h + 2 * q + 1]);
      }
    }
    EF_UNROLL for (int ha = 0; ha < 4; ++ha) {  // b[2 * ha + q]: q = rows 0-3 or 4-7
      const __m512i lo = EF_UNPACKLO32(b[2 * ha], b[2 * ha + 1]);
      const __m512i hi = EF_UNPACKHI32(b[2 * ha], b[2 * ha + 1]);
      g[grp][2 * ha] = _mm512_gf2p8affine_epi64_epi8(select, lo, 0);
      g[grp][2 * ha + 1] = _mm512_gf2p8affine_epi64_epi8(select, hi, 0);
    }
  }
  EF_UNROLL for (int z = 0; z < 8; ++z) {
    // x[0..3] lane L: column c = 16L + 2z, bits 0-3 / 4-7; column c + 1, bits 0-3 / 4-7.
    const __m512i lo01 = _mm512_unpacklo_epi8(g[0][z], g[1][z]);
    const __m512i hi01 = _mm512_unpackhi_epi8(g[0][z], g[1][z]);
    const __m512i lo23 = _mm512_unpacklo_epi8(g[2][z], g[3][z]);
    const __m512i hi23 = _mm512_unpackhi_epi8(g[2][z], g[3][z]);
    const __m512i x0 = _mm512_unpacklo_epi16(lo01, lo23);
    const __m512i x1 = _mm512_unpackhi_epi16(lo01, lo23);
    const __m512i x2 = _mm512_unpacklo_epi16(hi01, hi23);
    const __m512i x3 = _mm512_unpackhi_epi16(hi01, hi23);
    // y[L] = lanes L of x0..x3: the 16 words of columns 16L + 2z and 16L + 2z + 1.
    const __m512i t0 = EF_SHUFFLE128(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i t1 = EF_SHUFFLE128(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i t2 = EF_SHUFFLE128(x2, x3, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i t3 = EF_SHUFFLE128(x2, x3, _MM_SHUFFLE(3, 1, 3, 1));
    const int c = 2 * z;
    _mm512_storeu_si512(o + 8 * c, EF_SHUFFLE128(t0, t2, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(o + 8 * (16 + c), EF_SHUFFLE128(t1, t3, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(o + 8 * (32 + c), EF_SHUFFLE128(t0, t2, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(o + 8 * (48 + c), EF_SHUFFLE128(t1, t3, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}
#undef EF_UNPACKLO32
#undef EF_UNPACKHI32
#undef EF_SHUFFLE128
#endif
#undef EF_UNROLL

}  // namespace

template <typename W>
void BitSlicer::SliceRange(const std::string_view* values, W rows, size_t first, size_t bytes,
                           W* out) {
  constexpr size_t kMaxRows = 8 * sizeof(W);
  const size_t span = (bytes + kBlock - 1) / kBlock * kBlock;  // readable bytes per row
  if (zeros_.size() < span) zeros_.assign(span, 0);
  // Row r reads its value (from `first` on) for the blocks wholly inside it,
  // zeros_ for the blocks past its end, and for the block it ends in a
  // zero-padded copy of that block's bytes: the 64-byte-aligned piece
  // [tail_at[r], tail_at[r] + 64) of the row, in padded_. (Blocks are 16 or 64
  // bytes at multiples of their size, so a block that straddles the end lies
  // inside that piece.) Rows not in `rows` read zeros_ throughout.
  constexpr size_t kTail = 64;
  if (padded_.size() < kMaxRows * kTail) padded_.resize(kMaxRows * kTail);
  std::array<const unsigned char*, kMaxRows> row;
  std::array<size_t, kMaxRows> valid;  // bytes the row has from `first` on
  std::array<size_t, kMaxRows> tail_at{};
  size_t direct_until = span;  // blocks ending here or before read rows directly
  for (size_t r = 0; r < kMaxRows; ++r) {
    row[r] = zeros_.data();
    valid[r] = span;
    if (((rows >> r) & 1) == 0) continue;
    const std::string_view v = values[r];
    if (v.size() > first) row[r] = reinterpret_cast<const unsigned char*>(v.data()) + first;
    if (v.size() >= first + span) continue;
    valid[r] = v.size() > first ? v.size() - first : 0;  // 0: zeros_ throughout
    direct_until = std::min(direct_until, valid[r]);
    tail_at[r] = valid[r] / kTail * kTail;
    unsigned char* p = padded_.data() + kTail * r;
    const size_t have = valid[r] - tail_at[r];
    if (have > 0) std::memcpy(p, row[r] + tail_at[r], have);
    std::memset(p + have, 0, kTail - have);
  }
  // The rows [base, base + count) of the block at j0 of `size` bytes.
  auto block_rows = [&](size_t j0, size_t size, int base, int count, const unsigned char** out) {
    if (j0 + size <= direct_until) {
      for (int i = 0; i < count; ++i) out[i] = row[base + i] + j0;
      return;
    }
    for (int i = 0; i < count; ++i) {
      const size_t r = static_cast<size_t>(base + i);
      out[i] = j0 + size <= valid[r] ? row[r] + j0
               : j0 >= valid[r]      ? zeros_.data()
                                     : padded_.data() + kTail * r + (j0 - tail_at[r]);
    }
  };
#if defined(EF_SLICE_AVX2)
  size_t j0 = 0;
  if constexpr (sizeof(W) == 4) {
    if (isa_ == Isa::kAvx512Gfni) {
      for (; j0 + 64 <= span; j0 += 64) {
        std::array<const unsigned char*, 32> block;
        block_rows(j0, 64, 0, 32, block.data());
        SliceBlock64x32(block.data(), out + 8 * j0);
      }
    }
  }
  if (isa_ != Isa::kSse2) {
    const int groups = std::max(1, static_cast<int>((std::bit_width(rows) + 31) / 32));
    for (; j0 < span; j0 += kBlock) {
      std::array<const unsigned char*, 32> block;
      for (int g = 0; g < groups; ++g) {
        block_rows(j0, kBlock, 32 * g, 32, block.data());
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
      block_rows(j0, kBlock, 16 * g, 16, block.data());
      SliceBlock<W>(block.data(), static_cast<unsigned>(16 * g), g == 0, out + 8 * j0);
    }
  }
}

BitSlicer::BitSlicer(Isa max_isa) {
#if defined(EF_SLICE_AVX2)
  if (max_isa >= Isa::kAvx2 && __builtin_cpu_supports("avx2")) isa_ = Isa::kAvx2;
  if (max_isa >= Isa::kAvx512Gfni && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("gfni")) {
    isa_ = Isa::kAvx512Gfni;
  }
#else
  (void)max_isa;
#endif
}

template void BitSlicer::SliceRange<uint32_t>(const std::string_view*, uint32_t, size_t, size_t,
                                              uint32_t*);
template void BitSlicer::SliceRange<uint64_t>(const std::string_view*, uint64_t, size_t, size_t,
                                              uint64_t*);

}  // namespace ef
