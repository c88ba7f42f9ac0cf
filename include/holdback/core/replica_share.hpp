// What gateway replicas share for reserve restoration: each replica's own figures, published
// through the host's store (ReplicaSync, detector/replica_sync.hpp), and the others' sum with
// the replicas' count and this replica's rank, installed into its FlowController
// (FlowController::setReplicaShare). With them the replicas take one restoration decision for
// the pool and each revokes its part of it (flow/eviction.hpp, "Restoration across replicas").
//
// Thread safety: plain data.
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// One replica's reserve-restoration figures (or several replicas' sum).
struct ReplicaRestoreFigures {
  double protectedArrivalRate = 0.0;  // the protected bands' arrivals per second
  double completionRate = 0.0;        // every band's releases per second
  double pendingRevocations = 0.0;    // revocations outstanding or cooling
  double leases = 0.0;                // requests dispatched and not ended

  // Adds another replica's figures (a store summing the others' publications).
  ReplicaRestoreFigures& operator+=(const ReplicaRestoreFigures& o) noexcept {
    protectedArrivalRate += o.protectedArrivalRate;
    completionRate += o.completionRate;
    pendingRevocations += o.pendingRevocations;
    leases += o.leases;
    return *this;
  }
};

// The other live replicas' figures (their sum), how many replicas are live (this one included)
// and this replica's rank among them: in [0, replicas), distinct per replica, in an order all of
// them agree on.
struct ReplicaShare {
  ReplicaRestoreFigures others;
  std::int64_t replicas = 1;
  std::int64_t rank = 0;
  // Every replica's demand estimates count the pool's arrivals (the host's replica feed hands
  // each replica the others' with FlowController::recordPeerArrival): the policies then size
  // from the pool's turnover rather than a replica's part of it, and restoration does not add
  // the others' published arrival rates (they are in its own). Set it on every replica or none.
  bool pooledArrivals = false;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
