// Bit slicing for the read side (redis/bloom_reader.h TestItems): the same byte
// range of up to 64 Redis string values, transposed into one word per bit
// position, so that one load tests a Bloom filter position in every bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ef {

class BitSlicer {
 public:
  // allow_avx2: use AVX2 (32 values per step) when the CPU has it, else SSE2 (16
  // per step; tests use false to check that path too). The results are the same.
  explicit BitSlicer(bool allow_avx2 = true);
  bool uses_avx2() const { return use_avx2_; }

  // Words SliceRange writes for `bytes` bytes (a multiple of 128: whole blocks).
  static size_t Words(size_t bytes) { return 8 * ((bytes + 15) / 16 * 16); }

  // For each bit position p < 8 * bytes of the range [first, first + bytes) of
  // the values: out[p] bit r = Redis bit `8 * first + p` of values[r] (bit 0 is
  // the MSB of byte 0; bits past a value's end are 0), for r in `rows` (a mask of
  // value indices; bits of other values are 0). W is uint32_t (up to 32 values)
  // or uint64_t (up to 64). out must hold Words(bytes) words; the words past
  // 8 * bytes are written with unspecified bits. Keeps scratch buffers between
  // calls: thread-compatible, one slicer per thread.
  template <typename W>
  void SliceRange(const std::string_view* values, W rows, size_t first, size_t bytes, W* out);

 private:
  bool use_avx2_ = false;
  std::vector<unsigned char> zeros_;
  std::vector<unsigned char> padded_;
};

}  // namespace ef
