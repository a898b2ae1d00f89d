// The kernels that src/bloom chooses at run time by the CPU (bit_slice.cc,
// hash_batch.cc, probe_rounds.cc), and whether this machine can run each one:
// compiled in (x86-64 with GCC or Clang, as in src/bloom) and the CPU has the
// instructions. Written out here, apart from the code under test, so that a
// dispatch which falls back to a lower kernel where a higher one could run
// fails, and a kernel that cannot run here is named in the test's output
// (README.md, "Tests": which machines cover which kernel).
#pragma once

#include <catch2/catch.hpp>
#include <string>

namespace ef::test {

#if defined(__x86_64__) && defined(__GNUC__)
inline bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }
// BitSlicer::Isa::kAvx512Gfni.
inline bool CpuHasAvx512Gfni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("gfni");
}
// ItemHasher::Isa::kAvx512.
inline bool CpuHasAvx512Hash() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
// ProbeRounds::Isa::kAvx512.
inline bool CpuHasAvx512Probe() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("popcnt");
}
#else
inline bool CpuHasAvx2() { return false; }
inline bool CpuHasAvx512Gfni() { return false; }
inline bool CpuHasAvx512Hash() { return false; }
inline bool CpuHasAvx512Probe() { return false; }
#endif

// One line in the test's output (Catch's WARN is printed whatever the result):
// "<kernel>: checked" or "<kernel>: NOT checked on this machine (needs ...)".
inline void ReportKernel(const std::string& kernel, bool checked, const std::string& needs = "") {
  if (checked) {
    WARN(kernel << ": checked");
  } else {
    WARN(kernel << ": NOT checked on this machine (needs " << needs
                << "; README.md, Tests, says which machines cover it)");
  }
}

}  // namespace ef::test
