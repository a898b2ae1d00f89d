// BitSlicer (bloom/bit_slice.h): out[p] bit r is Redis bit 8*first + p of value r,
// for every shape of input: 1 to 64 values, ranges of 1 to 700 bytes, values
// cut inside the range or shorter than its start, values not in the row mask,
// values that end at an unmapped page.
#include "bloom/bit_slice.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "support/cpu_paths.h"
#include "support/guard_page.h"

namespace ef {
namespace {

bool Bit(const std::string& v, size_t pos) {
  const size_t byte = pos >> 3;
  return byte < v.size() && ((static_cast<unsigned char>(v[byte]) >> (7 - (pos & 7))) & 1);
}

// One slicer for every call, as TestItems keeps one per thread: what a call
// leaves in its scratch buffers must not show in the next. guarded: each value
// is read from memory that ends at an unmapped page (a read past a value's end
// faults, where inside a std::string's capacity it would go unseen).
template <typename W>
void Check(std::mt19937_64& rng, size_t n_values, BitSlicer& slicer, bool guarded = false) {
  for (size_t bytes : {1u, 15u, 16u, 17u, 63u, 64u, 65u, 100u, 128u, 300u, 700u}) {
    const size_t first = rng() % 40;
    std::vector<std::string> values(n_values);
    W rows = 0;
    for (size_t r = 0; r < n_values; ++r) {
      size_t len = first + bytes + rng() % 40;                // longer than the range
      if (rng() % 4 == 0) len = rng() % (first + bytes + 1);  // cut, or before it
      for (size_t i = 0; i < len; ++i) values[r].push_back(static_cast<char>(rng()));
      if (rng() % 5 != 0) rows |= W{1} << r;
    }
    std::vector<std::string_view> views(values.begin(), values.end());
    std::vector<std::unique_ptr<test::GuardedBytes>> guards;
    for (size_t r = 0; guarded && r < n_values; ++r) {
      guards.push_back(std::make_unique<test::GuardedBytes>(values[r].size()));
      char* p = guards.back()->EndingAtGuard(values[r].size());
      std::memcpy(p, values[r].data(), values[r].size());
      views[r] = std::string_view(p, values[r].size());
    }
    std::vector<W> out(BitSlicer::Words(bytes));
    slicer.SliceRange<W>(views.data(), rows, first, bytes, out.data());
    INFO("values " << n_values << ", first " << first << ", bytes " << bytes << ", guarded "
                   << guarded);
    for (size_t p = 0; p < 8 * bytes; ++p) {
      W want = 0;
      for (size_t r = 0; r < n_values; ++r)
        if (((rows >> r) & 1) && Bit(values[r], 8 * first + p)) want |= W{1} << r;
      INFO("position " << p);
      REQUIRE(out[p] == want);
    }
  }
}

}  // namespace

TEST_CASE("BitSlicer transposes the range of each value in the row mask", "[bit_slice]") {
  std::mt19937_64 rng(11);
  using Isa = BitSlicer::Isa;
  // Each kernel forced in turn where the CPU has it (and then used, not a lower
  // one); one the CPU lacks is named in the output, not rerun as a lower one.
  struct Kernel {
    Isa isa;
    const char* name;
    bool runnable;
    const char* needs;
  };
  const Kernel kernels[] = {
      {Isa::kSse2, "BitSlicer sse2 (portable)", true, ""},
      {Isa::kAvx2, "BitSlicer avx2", test::CpuHasAvx2(), "AVX2"},
      {Isa::kAvx512Gfni, "BitSlicer avx512+gfni", test::CpuHasAvx512Gfni(),
       "AVX-512 F and BW, and GFNI"},
  };
  for (const Kernel& kernel : kernels) {
    test::ReportKernel(kernel.name, kernel.runnable, kernel.needs);
    if (!kernel.runnable) {
      CHECK(BitSlicer(kernel.isa).isa() < kernel.isa);
      continue;
    }
    const Isa isa = kernel.isa;
    INFO(kernel.name);
    REQUIRE(BitSlicer(isa).isa() == isa);
    BitSlicer slicer(isa);
    for (int round = 0; round < 3; ++round) {
      for (size_t n : {1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u})
        Check<uint32_t>(rng, n, slicer);
      for (size_t n : {1u, 33u, 48u, 63u, 64u}) Check<uint64_t>(rng, n, slicer);
    }
    for (size_t n : {5u, 32u}) Check<uint32_t>(rng, n, slicer, true);
    Check<uint64_t>(rng, 64, slicer, true);
  }
  // The default (what the read path uses) is the best this CPU has.
  CHECK(BitSlicer().isa() == (test::CpuHasAvx512Gfni() ? Isa::kAvx512Gfni
                              : test::CpuHasAvx2()     ? Isa::kAvx2
                                                       : Isa::kSse2));
}

}  // namespace ef
