// Implementation of holdback/flow/detail/demand_tracker.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/demand_tracker.hpp"

#include <chrono>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE std::uint32_t DemandTracker::slotOf(Band* band, const UsageLimitPolicy& policy,
                                                    LeaseTable& leases) {
  const std::uint32_t cached = band->demand_slot;
  if (cached < slots_.size() && slots_[cached].prio == band->prio) return cached;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].prio == band->prio) {
      band->demand_slot = static_cast<std::uint32_t>(i);
      return band->demand_slot;
    }
  }
  Slot slot;
  slot.prio = band->prio;
  slot.estimator = DemandEstimator(policy.demandSmoothing());
  slots_.push_back(slot);
  leases.reserveBands(slots_.size());
  band->demand_slot = static_cast<std::uint32_t>(slots_.size() - 1);
  return band->demand_slot;
}

HOLDBACK_INLINE void DemandTracker::update(TimePoint now, std::span<Band* const> all,
                                           std::span<Band* const> domain,
                                           const UsageLimitPolicy& policy, LeaseTable& leases,
                                           double burstSignificance) noexcept {
  double dt = 0.0;
  if (last_update_) dt = std::chrono::duration<double>(now - *last_update_).count();
  const bool advance = !last_update_ || dt > 0.0;
  if (advance) last_update_ = now;
  for (Band* band : all) {
    Slot& slot = slots_[slotOf(band, policy, leases)];
    // dt <= 0 (the first update, or a clock that did not move): counts only, arrivals kept.
    slot.estimator.update(dt, slot.arrivals,
                          static_cast<double>(leases.inFlight(band->demand_slot)),
                          static_cast<double>(band->queued_requests), burstSignificance);
    if (dt > 0.0) slot.arrivals = 0.0;
  }
  view_.reserve(all.size());
  view_.clear();
  for (Band* band : domain) view_.push_back(slots_[band->demand_slot].estimator.demand());
  sumCompletionRates();
}

HOLDBACK_INLINE void DemandTracker::sumCompletionRates() noexcept {
  completion_rate_ = 0.0;
  for (const Slot& slot : slots_) completion_rate_ += slot.estimator.demand().completionRate;
}

HOLDBACK_INLINE void DemandTracker::resmooth(const DemandSmoothing& smoothing) noexcept {
  for (Slot& slot : slots_) {
    const DemandSmoothing& old = slot.estimator.smoothing();
    if (!(old == smoothing)) slot.estimator = DemandEstimator(smoothing);
  }
  sumCompletionRates();
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
