// What gateway replicas share for reserve restoration: each replica's own figures, published
// through the host's store (ReplicaSync, detector/replica_sync.hpp), and the others' sum with
// the replicas' count and this replica's rank, installed into its FlowController
// (FlowController::setReplicaShare). With them the replicas take one restoration decision for
// the pool and each revokes its part of it (flow/eviction.hpp, "Restoration across replicas").
//
// Thread safety: plain data.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// One replica's reserve-restoration figures (or several replicas' sum).
struct ReplicaRestoreFigures {
  // How many of the youngest victims a publication carries (victimDispatchTimes).
  static constexpr std::size_t kVictims = 16;

  double protectedArrivalRate = 0.0;  // the protected bands' arrivals per second
  double completionRate = 0.0;        // every band's releases per second
  double pendingRevocations = 0.0;    // revocations outstanding or cooling
  double leases = 0.0;                // requests dispatched and not ended
  // The replicas whose victim lists these figures carry (1 in a replica's own figures once it
  // has taken a restoration decision; the sum in the others'). Restoration chooses its victims
  // pool-wide only when every other live replica publishes its list.
  double victimLists = 0.0;
  // When the youngest requests restoration may revoke there were dispatched, youngest first, in
  // seconds on the controller's clock (TimePoint::time_since_epoch()): the first victimCount
  // entries are used. Merged, the youngest kVictims of all the lists. Replicas compare them
  // across processes: a store that crosses hosts converts them to a shared clock and back (the
  // gateway's Redis store does, through the wall clock).
  std::array<double, kVictims> victimDispatchTimes{};
  std::size_t victimCount = 0;

  // Adds another replica's figures (a store summing the others' publications): the figures
  // summed, the victim lists merged. Survives any input: a non-finite time counts as the oldest
  // possible, a count above kVictims as kVictims.
  ReplicaRestoreFigures& operator+=(const ReplicaRestoreFigures& o) noexcept {
    protectedArrivalRate += o.protectedArrivalRate;
    completionRate += o.completionRate;
    pendingRevocations += o.pendingRevocations;
    leases += o.leases;
    victimLists += o.victimLists;
    const std::size_t mine = victimsUsed();
    const std::size_t theirs = o.victimsUsed();
    std::array<double, kVictims> merged{};
    std::size_t n = 0;
    std::size_t i = 0;
    std::size_t j = 0;
    while (n < kVictims && (i < mine || j < theirs)) {
      const bool takeMine = j >= theirs || (i < mine && sane(victimDispatchTimes[i]) >=
                                                            sane(o.victimDispatchTimes[j]));
      merged[n++] = takeMine ? sane(victimDispatchTimes[i++]) : sane(o.victimDispatchTimes[j++]);
    }
    victimDispatchTimes = merged;
    victimCount = n;
    return *this;
  }

  // Adds a victim dispatched at `seconds` to this replica's own list, keeping the kVictims
  // youngest, youngest first.
  void addVictim(double seconds) noexcept {
    const double t = sane(seconds);
    std::size_t k = victimsUsed();
    if (k == kVictims) {
      if (!(t > victimDispatchTimes[k - 1])) return;
      --k;
    }
    while (k > 0 && victimDispatchTimes[k - 1] < t) {
      victimDispatchTimes[k] = victimDispatchTimes[k - 1];
      --k;
    }
    victimDispatchTimes[k] = t;
    if (victimCount < kVictims) ++victimCount;
  }

  // The entries of victimDispatchTimes in use: the first victimCount, at most kVictims.
  [[nodiscard]] std::size_t victimsUsed() const noexcept {
    return victimCount < kVictims ? victimCount : kVictims;
  }

  // A dispatch time as the lists order it: a non-finite one as the oldest possible.
  [[nodiscard]] static double sane(double seconds) noexcept {
    return seconds >= -1e300 && seconds <= 1e300 ? seconds : -1e300;
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
