#include "bloom/size_classes.h"

#include <cmath>

namespace ef {

StatusOr<std::vector<Stage>> ComputeClassStages(StageParams p, uint32_t c) {
  const uint64_t m = SizeClassBits(c);
  if (c >= 112 || m >= (uint64_t{1} << 32))
    return InvalidArgument("size class " + std::to_string(c) + " has no stage 0 below 2^32 bits");
  p.m0 = static_cast<uint32_t>(m);
  p.first_bit = kSizeClassHeaderBits;
  return ComputeStages(p);
}

uint32_t SizeClassCount(const StageParams& p) {
  uint32_t n = 0;
  while (n < 112 && ComputeClassStages(p, n).ok()) ++n;
  return n;
}

uint32_t SmallestClassWithBits(uint64_t bits) {
  uint32_t c = 0;
  while (c < 111 && SizeClassBits(c) < bits) ++c;
  return c;
}

double StageCapacity(uint64_t m, uint32_t k, uint32_t fill_ppm) {
  return -(static_cast<double>(m) / k) * std::log1p(-static_cast<double>(fill_ppm) / 1e6);
}

double EstimateItems(std::string_view value, const std::vector<Stage>& stages) {
  if (value.empty()) return 0;
  const size_t present = StagesPresent(stages, value.size());
  double n = 0;
  for (size_t s = 0; s < present; ++s) {
    const Stage& st = stages[s];
    double x = StagePopcount(value, st);
    if (x >= st.m) x = st.m - 1.0;
    n += -(static_cast<double>(st.m) / st.k) * std::log1p(-x / st.m);
  }
  return n;
}

}  // namespace ef
