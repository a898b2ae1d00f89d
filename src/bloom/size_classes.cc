#include "bloom/size_classes.h"

#include <algorithm>
#include <cmath>

namespace ef {

StatusOr<std::vector<Stage>> ComputeClassStages(StageParams p, uint32_t c) {
  const uint64_t m = SizeClassBits(c);
  if (c >= kSizeClassLimit || m >= (uint64_t{1} << 32))
    return InvalidArgument("size class " + std::to_string(c) + " has no stage 0 below 2^32 bits");
  p.m0 = static_cast<uint32_t>(m);
  p.first_bit = kSizeClassHeaderBits;
  return ComputeStages(p);
}

uint32_t SizeClassCount(const StageParams& p) {
  uint32_t n = 0;
  while (n < kSizeClassLimit && ComputeClassStages(p, n).ok()) ++n;
  return n;
}

uint32_t SmallestClassWithBits(uint64_t bits) {
  uint32_t c = 0;
  while (c + 1 < kSizeClassLimit && SizeClassBits(c) < bits) ++c;
  return c;
}

double ItemsForSetBits(double m, uint32_t k, double set_bits) {
  return -(m / k) * std::log1p(-set_bits / m);
}

double StageCapacity(uint64_t m, uint32_t k, uint32_t fill_ppm) {
  return ItemsForSetBits(static_cast<double>(m), k, static_cast<double>(m) * fill_ppm / 1e6);
}

double EstimateItems(std::string_view value, const std::vector<Stage>& stages) {
  if (value.empty()) return 0;
  const size_t present = StagesPresent(stages, value.size());
  double n = 0;
  for (size_t s = 0; s < present; ++s) {
    const Stage& st = stages[s];
    const double x = std::min<double>(StagePopcount(value, st), st.m - 1.0);
    n += ItemsForSetBits(st.m, st.k, x);
  }
  return n;
}

}  // namespace ef
