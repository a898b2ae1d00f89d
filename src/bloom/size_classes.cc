#include "bloom/size_classes.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ef {

uint32_t ClassStageLimit(uint64_t m, uint32_t stages, uint32_t c) {
  const uint64_t mc = SizeClassBits(c);
  int64_t e = 0;
  if (mc < m) {
    while ((mc << e) < m) ++e;  // mc >= 376, m < 2^32: no overflow
  } else {
    while (e > -63 && (m << -(e - 1)) <= mc) --e;  // m * 2^j <= mc, the largest j
  }
  const int64_t limit = std::min<int64_t>(static_cast<int64_t>(stages) + e, 32);
  return limit < 1 ? 0 : static_cast<uint32_t>(limit);
}

StatusOr<std::vector<Stage>> ComputeClassStages(StageParams p, uint32_t c) {
  if (c >= kSizeClassLimit || SizeClassBits(c) >= (uint64_t{1} << 32))
    return InvalidArgument("size class " + std::to_string(c) + " has no stage 0 below 2^32 bits");
  const uint32_t limit = ClassStageLimit(p.m0, p.stages, c);
  if (limit == 0)
    return InvalidArgument("size class " + std::to_string(c) + " is past the stage limit's " +
                           "capacity (m " + std::to_string(p.m0) + ", " + std::to_string(p.stages) +
                           " stages)");
  p.m0 = static_cast<uint32_t>(SizeClassBits(c));
  p.stages = limit;
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

uint32_t ChooseClass(const StageParams& p, uint32_t class_count, std::optional<double> estimate,
                     std::optional<uint32_t> previous) {
  const uint32_t last = class_count == 0 ? 0 : class_count - 1;
  if (!estimate) return std::min(SmallestClassWithBits(p.m0), last);
  const double need = *estimate / kClassSplit;
  uint32_t c = 0;
  while (c < last && StageCapacity(SizeClassBits(c), p.k0, p.fill_ppm) < need) ++c;
  if (previous && *previous >= c && *previous <= c + kClassKeep && *previous <= last)
    return *previous;
  return c;
}

}  // namespace ef
