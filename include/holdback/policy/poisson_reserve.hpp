// The Poisson reserve: how many requests' worth of room to keep so that the arrivals of a
// Poisson stream find it full with probability at most eps. Used by the reservation policy's
// occupancy sizing (policy/reservation.hpp) and by reserve restoration (flow/eviction.hpp).
//
// The algorithm
//   r(a, eps) is the smallest r with P(Poisson(a) >= r) <= eps, a the expected arrivals (or
//   occupancy); r(a <= 0 or NaN, eps) = 1. For a <= 30 it sums the Poisson probabilities (at
//   most ~60 terms); above, the Cornish-Fisher expansion of the (1 - eps) quantile,
//   a + z sqrt(a) + (z^2 - 1) / 6 + (z^3 - 7z) / (72 sqrt(a)) with z = Phi^-1(1 - eps) computed
//   once per epsilon by the caller, rounded, plus one (within one request of the exact quantile
//   there). Phi^-1 is Acklam's rational approximation (relative error < 1.2e-9).
//
// Cost: O(1) (at most ~60 terms); no allocation.
//
// Thread safety: pure functions.
#pragma once

#include "holdback/abi.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// r(a, eps) with z = inverseNormal(1 - eps) precomputed. a <= 0 or NaN -> 1; a = +inf -> +inf;
// eps <= 0 counts as 1e-12.
[[nodiscard]] HOLDBACK_API double poissonReserve(double a, double epsilon, double z) noexcept;
// Phi^-1(p) for p in (0, 1); -inf at p <= 0 (or NaN), +inf at p >= 1.
[[nodiscard]] HOLDBACK_API double inverseNormal(double p) noexcept;

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/policy/poisson_reserve-inl.hpp"
#endif
