// Bit slicing for the read side (read/bloom_reader.h TestItems): the same byte
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
  // The instruction sets SliceRange can use, slowest first. Each gives the same
  // results; the best the CPU has (up to the constructor's limit) is used.
  //   kSse2:       16 values per 16-byte step (byte transpose, movemask per bit).
  //   kAvx2:       32 values per step, the same way on 256-bit registers.
  //   kAvx512Gfni: for up to 32 values (W = uint32_t), 64 bytes per step: a byte
  //                transpose into 8 x 8 bit matrices, each transposed by one
  //                GF2P8AFFINEQB (about a fifth of the instructions per word of
  //                kAvx2); the tail of a range and W = uint64_t use kAvx2.
  enum class Isa { kSse2, kAvx2, kAvx512Gfni };

  // max_isa: the most SliceRange may use (tests pass lower ones to check every path).
  explicit BitSlicer(Isa max_isa = Isa::kAvx512Gfni);
  Isa isa() const { return isa_; }

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
  Isa isa_ = Isa::kSse2;
  std::vector<unsigned char> zeros_;
  std::vector<unsigned char> padded_;
};

}  // namespace ef
