// detail::DemandTracker: the demand the flow controller measures per band priority, for a
// UsageLimitPolicy that reads it (DemandView, policy/demand.hpp) and for the evictor's reserve
// restoration. Internal.
//
// What it holds
//   One slot per band priority seen: its DemandEstimator and the arrivals counted since the last
//   update. Slot i is band i of the owner's LeaseTable (the leases dispatched from that priority),
//   and Band::demand_slot caches a band's slot. Slots are added when a priority is first seen and
//   kept (a priority that comes back reuses its slot), so their number is bounded by the distinct
//   priorities used. The view: the estimators' figures for the cycle's domain bands, in that
//   order (the DemandView's `bands`).
//
// Invariants (hold between calls)
//   - The owner's LeaseTable has room for every slot (bandCapacity() >= the slot count).
//   - A band's cached slot is its priority's, or it is refreshed by slotOf() before it is used
//     (cachedSlotOf() answers nullptr for a stale one).
//
// Cost: slotOf is O(1) on a cached slot, O(slots) otherwise; update is O(bands). Allocation:
// adding a slot (and the lease table's room for it), and the view's capacity up to the band
// count; none in steady state.
//
// Locking: none of its own; the owner (ControllerCore) calls it only under its mutex.
//
// Thread safety: thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class DemandTracker {
 public:
  // One band priority's demand: its estimator, the arrivals since the last update.
  struct Slot {
    Priority prio = 0;
    DemandEstimator estimator;
    double arrivals = 0.0;
  };

  // The slot of `band`'s priority (caches it in Band::demand_slot). A new priority gets a slot
  // with `policy`'s smoothing and room in `leases`, allocating.
  std::uint32_t slotOf(Band* band, const UsageLimitPolicy& policy, LeaseTable& leases);
  // The slot `band` caches, when it is its priority's; nullptr otherwise (never adds one).
  [[nodiscard]] const Slot* cachedSlotOf(const Band& band) const noexcept {
    const std::uint32_t slot = band.demand_slot;
    return slot < slots_.size() && slots_[slot].prio == band.prio ? &slots_[slot] : nullptr;
  }

  // A request declaring `kvTokens` (FlowRequest::kvTokens; <= 0: none) was queued in `band`.
  void arrived(Band* band, const UsageLimitPolicy& policy, LeaseTable& leases,
               std::int64_t kvTokens = 0) {
    Slot& slot = slots_[slotOf(band, policy, leases)];
    slot.arrivals += 1.0;
    if (kvTokens > 0) slot.estimator.arrivedWithFootprint(static_cast<double>(kvTokens));
  }
  // Another replica queued a request of `prio` (the replica feed): counted as an arrival of the
  // slot of that priority, if there is one (never adds one: no allocation).
  void peerArrived(Priority prio, std::int64_t kvTokens) noexcept {
    for (Slot& slot : slots_) {
      if (slot.prio != prio) continue;
      slot.arrivals += 1.0;
      if (kvTokens > 0) slot.estimator.arrivedWithFootprint(static_cast<double>(kvTokens));
      return;
    }
  }
  // A request of slot `slot` was dispatched after waiting `waited` in its queue.
  void dispatched(std::uint32_t slot, Duration waited) noexcept {
    slots_[slot].estimator.dispatched(std::chrono::duration<double>(waited).count());
  }
  // A lease of slot `slot` was released after holding its slot `held` (an unknown slot is
  // ignored).
  void completed(std::uint32_t slot, Duration held) noexcept {
    if (slot < slots_.size()) {
      slots_[slot].estimator.completed(std::chrono::duration<double>(held).count());
    }
  }

  // Folds the arrivals since the last update into the estimators of every band of `all`, with
  // its in-flight count from `leases` and its queued count; then fills the view for `domain` (a
  // subsequence of `all`). The first update, or one whose clock did not move, updates the counts
  // only and keeps the arrivals for the next. `burstSignificance` > 0: the estimators follow
  // bursts (DemandEstimator::inBurst).
  void update(TimePoint now, std::span<Band* const> all, std::span<Band* const> domain,
              const UsageLimitPolicy& policy, LeaseTable& leases,
              double burstSignificance = 0.0) noexcept;
  // The figures of the last update's domain bands, in their order.
  [[nodiscard]] std::span<const BandDemand> view() const noexcept { return view_; }
  [[nodiscard]] std::span<const Slot> slots() const noexcept { return slots_; }
  // Every slot's completions per second (BandDemand::completionRate summed) as of the last
  // update or resmooth.
  [[nodiscard]] double completionRate() const noexcept { return completion_rate_; }

  // New smoothing constants restart the estimators whose constants differ (the counts since the
  // last update are kept).
  void resmooth(const DemandSmoothing& smoothing) noexcept;

 private:
  std::vector<Slot> slots_;
  std::vector<BandDemand> view_;
  std::optional<TimePoint> last_update_;
  double completion_rate_ = 0.0;
  void sumCompletionRates() noexcept;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
