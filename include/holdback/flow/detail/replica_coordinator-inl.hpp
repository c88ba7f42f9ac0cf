// Implementation of holdback/flow/detail/replica_coordinator.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/replica_coordinator.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE double ReplicaCoordinator::finiteOrZero(double x) noexcept {
  return x > 0.0 && x < std::numeric_limits<double>::infinity() ? x : 0.0;
}

HOLDBACK_INLINE ReplicaCoordinator::PastThresholdSetting ReplicaCoordinator::install(
    const std::optional<ReplicaShare>& share) noexcept {
  ++installs_;
  if (share && share->replicas > 1 && share->rank >= 0 && share->rank < share->replicas) {
    share_ = share;
  } else {
    share_.reset();
  }
  using Past = PoolPressureSampler::PastThreshold;
  if (share && share->replicas >= 2) {
    had_replicas_ = true;
    if (share->pooledArrivals) return {Past::kTurn, share->turn()};
    return {Past::kNone, {}};
  }
  if (!share && had_replicas_) return {Past::kNone, {}};
  had_replicas_ = false;
  return {Past::kDetector, {}};
}

HOLDBACK_INLINE std::size_t ReplicaCoordinator::restorationPart(std::size_t need,
                                                                TimePoint now) const noexcept {
  if (!share_) return need;
  return static_cast<std::size_t>(share_->turn().part(need, 0, now));
}

HOLDBACK_INLINE bool ReplicaCoordinator::poolVictims() const noexcept {
  // Each replica sizes the pool's deficit from its own demand estimate; the pool-wide choice needs
  // those to agree, which they do when every replica counts the pool's arrivals (the replica
  // feed). From its own 1/R of them one replica may size many times another's deficit, and it
  // would then take that much of the pool's youngest (docs/design/eviction.md, "Across replicas").
  if (!share_ || !share_->pooledArrivals) return false;
  const double others = finiteOrZero(share_->others.victimLists);
  return others + 0.5 >= static_cast<double>(share_->replicas - 1);
}

HOLDBACK_INLINE bool ReplicaCoordinator::yieldsTo(Priority priority,
                                                  TimePoint headEnqueued) const noexcept {
  if (!share_ || !share_->pooledArrivals || share_->headTolerance == Duration::max()) {
    return false;
  }
  const std::optional<double> theirs = share_->others.headOf(priority);
  if (!theirs) return false;
  const double tolerance =
      std::max(0.0, std::chrono::duration<double>(share_->headTolerance).count());
  return *theirs < ReplicaRestoreFigures::secondsOf(headEnqueued) - tolerance;
}

HOLDBACK_INLINE std::optional<double> ReplicaCoordinator::poolCompletionRate(
    double own) const noexcept {
  if (!share_) return std::nullopt;
  return (own + finiteOrZero(share_->others.completionRate)) /
         (share_->pooledArrivals ? 1.0 : static_cast<double>(share_->replicas));
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
