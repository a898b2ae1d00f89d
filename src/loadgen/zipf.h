// ZipfSampler: ranks 1..n with P(k) ∝ 1/k^s, O(1) memory and time per sample
// (rejection-inversion, W. Hörmann and G. Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", 1996). s > 0.
#pragma once

#include <cstdint>
#include <random>

namespace ef {

class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s);
  // A rank in [1, n].
  uint64_t Sample(std::mt19937_64& rng) const;
  uint64_t n() const { return n_; }

 private:
  double H(double x) const;          // h(x) = x^-s
  double HIntegral(double x) const;  // ∫ h
  double HIntegralInverse(double x) const;
  uint64_t n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double threshold_;
};

}  // namespace ef
