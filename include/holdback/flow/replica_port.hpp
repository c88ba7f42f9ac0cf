// ReplicaPort: reserve restoration and admission across gateway replicas (flow/eviction.hpp,
// "Restoration across replicas"): what a host's replica exchange (detector/replica_sync.hpp) reads
// from one controller and installs in it, apart from the request path.
// FlowController::replicaPort() returns it; it may outlive the controller (then restoreFigures() is
// empty and the rest does nothing). Each call takes the controller's lock briefly; none allocates
// or calls host code. Thread safety: thread-safe (every method is const and may be called from any
// thread).
//
// Included by flow/flow_controller.hpp, which also brings its implementation in header-only mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "holdback/core/replica_share.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {
class ControllerCore;
}  // namespace detail
class FlowController;

class HOLDBACK_API ReplicaPort {
 public:
  ReplicaPort() = default;  // detached: as after the controller is gone

  // This replica's own figures as of its last restoration decision, for the host to publish to
  // the others (ReplicaSyncer::syncOnce). They also carry the head of each band with queued
  // requests. O(bands).
  [[nodiscard]] ReplicaRestoreFigures restoreFigures() const noexcept;
  // The other live replicas' sum, their count and this replica's rank (ReplicaSyncer::share);
  // std::nullopt (the default, or after a failed exchange) = this replica restores alone. With
  // a share of replicas on the replica feed (ReplicaShare::pooledArrivals) a dispatch cycle
  // leaves a band (and the bands below it) to the others while one of them published a head of
  // that band enqueued more than ReplicaShare::headTolerance before this replica's (the cycle
  // returns kGated; FlowControllerStats::yieldedCycles). The share also decides who may start a
  // request past the detector's KV threshold (flow/pool_pressure.hpp, "Room past the KV
  // threshold across replicas"): with two replicas or more on the feed, one replica at a time
  // per endpoint (ReplicaTurn::hasTurn); without the feed, or with no share after one of several
  // replicas (the store failed), none. O(1).
  void setShare(const std::optional<ReplicaShare>& share) const noexcept;
  // The replica feed (detector/replica_sync.hpp, "The replica feed"): another replica queued a
  // request of `priority` declaring `kvTokens` (<= 0: none). Counted into this replica's demand
  // estimate for that priority, as its own arrivals are, once this replica has a band of that
  // priority (before that it is dropped). With the feed live on every replica, set
  // ReplicaShare::pooledArrivals. O(priorities seen).
  void recordPeerArrival(Priority priority, std::int64_t kvTokens = 0) const noexcept;

 private:
  friend class FlowController;
  explicit ReplicaPort(std::weak_ptr<detail::ControllerCore> core) : core_(std::move(core)) {}
  std::weak_ptr<detail::ControllerCore> core_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
