// Implementation of holdback/policy/poisson_reserve.hpp (compiled by src/policy.cpp, or included
// by the header itself in header-only mode).
#pragma once

#include "holdback/policy/poisson_reserve.hpp"

#include <cmath>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE double inverseNormal(double p) noexcept {
  // Peter Acklam's algorithm: rational approximations in a central region and two tails.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  if (!(p > 0.0)) return -INFINITY;
  if (!(p < 1.0)) return INFINITY;
  constexpr double kLow = 0.02425;
  if (p < kLow) {
    const double q = std::sqrt(-2.0 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  if (p > 1.0 - kLow) {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

HOLDBACK_INLINE double poissonReserve(double a, double epsilon, double z) noexcept {
  if (!(a > 0.0)) return 1.0;
  if (!(epsilon > 0.0)) epsilon = 1e-12;
  if (a <= 30.0) {
    // Smallest r with P(X >= r) <= eps, i.e. P(X <= r - 1) >= 1 - eps.
    const double target = 1.0 - epsilon;
    double pmf = std::exp(-a);
    double cdf = pmf;
    double k = 0.0;
    while (cdf < target && k < 200.0) {
      k += 1.0;
      pmf *= a / k;
      cdf += pmf;
    }
    return k + 1.0;
  }
  if (!std::isfinite(a)) return a;
  // Cornish-Fisher: the (1 - eps) quantile of Poisson(a), then the same "+1" as above.
  const double sa = std::sqrt(a);
  const double q = a + z * sa + (z * z - 1.0) / 6.0 + (z * z * z - 7.0 * z) / (72.0 * sa);
  return std::ceil(q - 0.5) + 1.0;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
