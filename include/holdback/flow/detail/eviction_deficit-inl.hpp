// Implementation of holdback/flow/detail/eviction_deficit.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/eviction_deficit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "holdback/policy/poisson_reserve.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE HeadOfLineDeficit headOfLineDeficit(double saturation, double ceiling,
                                                    double pendingReclaim) noexcept {
  const double target = saturation - ceiling;
  return {target, target - pendingReclaim};
}

HOLDBACK_INLINE std::optional<ReserveDeficit> reserveDeficit(const ReserveSnapshot& in) noexcept {
  const double s = in.saturation;
  const double over = (s - in.victimCeiling) / in.unit;
  if (!(over > 0.0)) return std::nullopt;  // the policy's reserve is intact
  const double lead = in.leadSeconds;
  const double wanted =
      poissonReserve(in.arrivalRate * lead, in.epsilon, inverseNormal(1.0 - in.epsilon));
  const double room = (in.topCeiling - s) / in.unit;  // free for the top band, in requests
  const double target = std::min(over, wanted - room) - in.completionRate * lead;
  return ReserveDeficit{target, target - in.pending};
}

HOLDBACK_INLINE double releaseChance(double hold, double age, double horizon) noexcept {
  if (!(hold > 0.0) || !std::isfinite(hold)) return 0.0;  // not measured: expect nothing
  age = std::max(0.0, age);
  // Younger than the band's holding time: it ends within the horizon iff it is due by then.
  if (age < hold) return age + horizon >= hold ? 1.0 : 0.0;
  // Overdue: memoryless beyond the mean.
  return 1.0 - std::exp(-horizon / hold);
}

HOLDBACK_INLINE double expectedReleases(const LeaseTable& leases,
                                        std::span<const DemandTracker::Slot> slots, TimePoint now,
                                        double horizon, bool byFootprint, double saturation,
                                        double totalFootprint) noexcept {
  double expected = 0.0;
  for (std::uint32_t b = 0; b < slots.size(); ++b) {
    const double hold = slots[b].estimator.demand().holdingTime;
    leases.newestFirst(b, [&](const LeaseTable::Lease& l) {
      if (l.revoked) return true;
      const double age = std::chrono::duration<double>(now - l.dispatchedAt).count();
      const double p = releaseChance(hold, age, horizon);
      expected += byFootprint ? p * saturation * static_cast<double>(l.tokens) / totalFootprint : p;
      return true;
    });
  }
  return expected;
}

HOLDBACK_INLINE double BurstMemory::remember(TimePoint now, double lambda,
                                             Duration memory) noexcept {
  if (!(memory > Duration::zero()) || !std::isfinite(lambda)) return lambda;
  const double age = std::max(0.0, std::chrono::duration<double>(elapsed(peak_time_, now)).count());
  const double tau = std::chrono::duration<double>(memory).count();
  const double remembered = peak_rate_ > 0.0 ? peak_rate_ * std::exp(-age / tau) : 0.0;
  if (lambda >= remembered) {
    peak_rate_ = lambda;
    peak_time_ = now;
    return lambda;
  }
  return remembered;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
