#include "bloom/stages.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "bloom/positions.h"

namespace ef {

StageStats& StageStats::operator+=(const StageStats& o) {
  for (size_t s = 0; s < kTrackedStages; ++s) items[s] += o.items[s];
  advances += o.advances;
  limit_items += o.limit_items;
  limit_keys += o.limit_keys;
  stage0_advances += o.stage0_advances;
  stage0_fill_ppm_sum += o.stage0_fill_ppm_sum;
  return *this;
}

StatusOr<std::vector<Stage>> ComputeStages(const StageParams& p) {
  if (p.m0 == 0) return InvalidArgument("m must be at least 1");
  if (p.k0 == 0) return InvalidArgument("k must be at least 1");
  if (p.growth < 1 || p.growth > 16)
    return InvalidArgument("growth must be 1..16, got " + std::to_string(p.growth));
  if (p.k_step > 64)
    return InvalidArgument("k_step must be 0..64, got " + std::to_string(p.k_step));
  if (p.stages < 1 || p.stages > 32)
    return InvalidArgument("stages must be 1..32, got " + std::to_string(p.stages));
  if (p.fill_ppm < 1 || p.fill_ppm > 999999)
    return InvalidArgument("fill_ppm must be 1..999999, got " + std::to_string(p.fill_ppm));
  constexpr unsigned __int128 kLimit = static_cast<unsigned __int128>(1) << 32;
  std::vector<Stage> out;
  out.reserve(p.stages);
  if (p.first_bit % 8 != 0 || p.first_bit >= kLimit)
    return InvalidArgument("first bit must be a multiple of 8 below 2^32, got " +
                           std::to_string(p.first_bit));
  uint64_t offset = p.first_bit;
  unsigned __int128 scale = 1;  // growth^s
  for (uint32_t s = 0; s < p.stages; ++s) {
    Stage st;
    st.k = p.k0 + s * p.k_step;
    const unsigned __int128 num = static_cast<unsigned __int128>(p.m0) * scale * st.k;
    const unsigned __int128 m = (num + p.k0 - 1) / p.k0;
    if (m >= kLimit || offset + m > kLimit) {
      return InvalidArgument("stage " + std::to_string(s) +
                             " would end past Redis's 2^32-bit string limit: lower "
                             "filter.stages or filter.growth");
    }
    st.m = static_cast<uint32_t>(m);
    st.offset = offset;
    st.fill = static_cast<uint32_t>((static_cast<uint64_t>(st.m) * p.fill_ppm + 999999) / 1000000);
    out.push_back(st);
    offset += (static_cast<uint64_t>(st.m) + 7) / 8 * 8;
    scale *= p.growth;
  }
  return out;
}

uint32_t DesignFillPpm(uint32_t m0, uint32_t k0, int64_t n0) {
  const double fill = -std::expm1(-static_cast<double>(k0) * static_cast<double>(n0) / m0);
  double ppm = std::ceil(fill * 1e6);
  if (ppm < 1) ppm = 1;
  if (ppm > 999999) ppm = 999999;
  return static_cast<uint32_t>(ppm);
}

namespace {

// Set bits of d[0, n), a word at a time.
__attribute__((always_inline)) inline uint64_t CountBits(const unsigned char* d, size_t n) {
  uint64_t count = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, d + i, 8);
    count += static_cast<uint64_t>(std::popcount(w));
  }
  for (; i < n; ++i) count += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(d[i])));
  return count;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same loop compiled for POPCNT: one instruction per word. The build targets
// any x86-64, where std::popcount is a call to libgcc's __popcountdi2 per word
// (ef_microbench BM_StagePopcount, a 5 KiB stage: see docs/PERFORMANCE.md).
__attribute__((target("popcnt"))) uint64_t CountBitsPopcnt(const unsigned char* d, size_t n) {
  return CountBits(d, n);
}
#endif

uint64_t CountBitsBest(const unsigned char* d, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool popcnt = __builtin_cpu_supports("popcnt");
  if (popcnt) return CountBitsPopcnt(d, n);
#endif
  return CountBits(d, n);
}

}  // namespace

uint32_t StagePopcount(std::string_view value, const Stage& stage) {
  // Stages are byte-aligned; the last byte may hold padding, never set by writers,
  // but mask it anyway so a stray bit is not counted.
  const size_t first = stage.offset / 8;
  if (value.size() <= first) return 0;
  const size_t bytes = (static_cast<size_t>(stage.m) + 7) / 8;
  const size_t end = std::min(value.size(), first + bytes);
  const auto* d = reinterpret_cast<const unsigned char*>(value.data());
  uint64_t n = CountBitsBest(d + first, end - first);
  if (end == first + bytes && (stage.m & 7) != 0) {
    // Bits of the last byte past m (the low bits: bit 0 is the MSB).
    const unsigned pad = static_cast<unsigned>(d[end - 1]) & ((1u << (8 - (stage.m & 7))) - 1);
    n -= static_cast<uint64_t>(std::popcount(pad));
  }
  return static_cast<uint32_t>(n);
}

bool StageContains(std::string_view value, const Stage& stage, PositionRule rule, Hash128 h) {
  uint64_t x = h.h1;
  for (uint32_t i = 0; i < stage.k; ++i) {
    const uint64_t pos = stage.offset + PositionOf(rule, x, stage.m);
    if (!TestBit(value.data(), value.size(), static_cast<uint32_t>(pos))) return false;
    x += h.h2;
  }
  return true;
}

bool ValueContains(std::string_view value, const std::vector<Stage>& stages, PositionRule rule,
                   Hash128 h) {
  const size_t present = StagesPresent(stages, value.size());
  for (size_t s = 0; s < present; ++s) {
    if (StageContains(value, stages[s], rule, h)) return true;
  }
  return false;
}

}  // namespace ef
