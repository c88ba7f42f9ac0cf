// Implementation of holdback/flow/fairness.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/flow/fairness.hpp"

#include <string>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE TimePoint EdfOrderingPolicy::deadlineOf(const QueuedRequestView& r) noexcept {
  if (r.effectiveTtl <= Duration::zero()) return TimePoint::max();
  if (r.enqueueTime > TimePoint::max() - r.effectiveTtl) return TimePoint::max();
  return r.enqueueTime + r.effectiveTtl;
}

HOLDBACK_INLINE bool EdfOrderingPolicy::less(const QueuedRequestView& a,
                                             const QueuedRequestView& b) const noexcept {
  const TimePoint da = deadlineOf(a);
  const TimePoint db = deadlineOf(b);
  if (da != db) return da < db;
  return a.enqueueTime < b.enqueueTime;
}

HOLDBACK_INLINE const FlowQueueView* GlobalStrictFairnessPolicy::pick(
    const BandView& band, FairnessState* /*state*/) const noexcept {
  return band.bestHeadFlow();
}

namespace detail {

struct RoundRobinState final : FairnessState {
  std::string cursor;  // the last picked flow id; capacity only grows, so steady state is free
  bool hasCursor = false;
};

}  // namespace detail

HOLDBACK_INLINE std::unique_ptr<FairnessState> RoundRobinFairnessPolicy::newState() const {
  auto state = std::make_unique<detail::RoundRobinState>();
  state->cursor.reserve(64);
  return state;
}

HOLDBACK_INLINE const FlowQueueView* RoundRobinFairnessPolicy::pick(
    const BandView& band, FairnessState* state) const noexcept {
  auto* rr = dynamic_cast<detail::RoundRobinState*>(state);
  const FlowQueueView* next = nullptr;
  if (rr != nullptr && rr->hasCursor) next = band.nextActiveFlowAfter(rr->cursor);
  if (next == nullptr) next = band.firstActiveFlow();  // wrap around
  if (rr != nullptr) {
    if (next == nullptr) {
      rr->hasCursor = false;
    } else {
      // assign() reuses the capacity; it can only allocate for an id longer than any seen.
      HOLDBACK_TRY {
        rr->cursor.assign(next->flowId());
        rr->hasCursor = true;
      }
      HOLDBACK_CATCH_ALL {
        rr->hasCursor = false;
      }
    }
  }
  return next;
}

HOLDBACK_INLINE std::shared_ptr<const OrderingPolicy> fcfsOrdering() {
  static const auto instance = std::make_shared<const FcfsOrderingPolicy>();
  return instance;
}
HOLDBACK_INLINE std::shared_ptr<const OrderingPolicy> edfOrdering() {
  static const auto instance = std::make_shared<const EdfOrderingPolicy>();
  return instance;
}
HOLDBACK_INLINE std::shared_ptr<const FairnessPolicy> globalStrictFairness() {
  static const auto instance = std::make_shared<const GlobalStrictFairnessPolicy>();
  return instance;
}
HOLDBACK_INLINE std::shared_ptr<const FairnessPolicy> roundRobinFairness() {
  static const auto instance = std::make_shared<const RoundRobinFairnessPolicy>();
  return instance;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
