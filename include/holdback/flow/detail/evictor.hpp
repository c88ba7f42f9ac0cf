// detail::Evictor: in-flight eviction and reserve restoration (flow/eviction.hpp, whose header
// has the semantics) for one flow controller. Internal.
//
// It composes three parts and decides nothing of its own:
//   - RevocationPacer (revocation_pacer.hpp): when a decision may be taken and how many it
//     revokes, and the revocations in flight;
//   - the deficit functions (eviction_deficit.hpp): how much room to bring back, head-of-line
//     and reserve, from a value snapshot of the cycle;
//   - VictimSelector (victim_selector.hpp): which leases are revoked.
// reclaim (a head-of-line block at the gated band): stop-and-wait; the demand is the highest
// blocked band from the gated one down with queued work; the head-of-line deficit, its count,
// less the releases expected anyway within the demand's remaining tolerance (waitForReleases);
// the pool-wide choice. restoreReserve (any cycle, before a block): first one victim where a
// protected request waits; else the reserve deficit of the pool (with replicas: the pool's
// figures from the replica coordination, and this replica's part of the revocations), chosen
// per endpoint when the endpoints are known, else pool-wide. A replica that leaves the pool's
// revocations to the others (their victims are the pool's youngest) waits for them until the
// next share install at most: short still with their fresh figures, it leaves their youngest
// out and takes its own among the next of the pool's youngest. Restoration's revocations stop
// where its budgets (RestorationBudget) run out; head-of-line ones are paid from the budgets
// but never held back by them.
//
// Host code: only the pure, host-pluggable EvictionFilter and EvictionOrderPolicy. It never
// holds the evict callback: a decision adds its revocations to the caller's RevocationBatch,
// which the owner hands to deliverRevocations() once its lock is released.
//
// Cost and allocation: its parts'; none in steady state.
//
// Thread safety: thread-compatible; the owner (ControllerCore) calls it only under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/eviction_cycle.hpp"
#include "holdback/flow/detail/eviction_deficit.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/detail/restoration_budget.hpp"
#include "holdback/flow/detail/revocation_pacer.hpp"
#include "holdback/flow/detail/victim_selector.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/stats.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class Evictor {
 public:
  using Cycle = EvictionCycle;

  // A head-of-line block at domain band `gated`: revokes what the deficit needs into `out`.
  void reclaim(const Cycle& cycle, std::size_t gated, RevocationBatch& out) noexcept;
  // Reserve restoration (EvictionOptions::restoreReserve): any cycle, before a block.
  void restoreReserve(const Cycle& cycle, RevocationBatch& out) noexcept;

  // The lease bookkeeping (RevocationPacer), and what the restoration budgets earn
  // (RestorationBudget): a lease of priority `prio` started, a lease ended on the host's release.
  void leaseStarted(Priority prio, const EvictionOptions& options) noexcept {
    pacer_.leaseStarted();
    if (budgeted(options) && !options.filter->mayAccept(prio)) {
      budget_.protectedStarted(options.restoreReserve);
    }
  }
  void leaseReleased(const LeaseTable::Lease& lease, TimePoint now,
                     const EvictionOptions& options) noexcept {
    pacer_.leaseReleased(lease, now, options);
    if (!lease.revoked && budgeted(options) && options.filter->mayAccept(lease.priority)) {
      budget_.victimBandCompleted(options.restoreReserve, now - lease.dispatchedAt);
    }
  }
  void reapLeases(LeaseTable& leases, TimePoint now, Duration leaseTimeout,
                  const EvictionOptions& options) noexcept {
    pacer_.reapLeases(leases, now, leaseTimeout, options);
  }
  void retireRevocations(TimePoint now, const EvictionOptions& options,
                         LeaseTable& leases) noexcept {
    pacer_.retire(now, options, leases);
  }
  // The counters (RevocationPacer::stats). Allocates.
  [[nodiscard]] EvictionStats stats() const { return pacer_.stats(); }

 private:
  // Revokes the selector's first `take` candidates into `out` (marked revoked in the lease
  // table, recorded by the pacer).
  void revokeFirst(const Cycle& cycle, Priority demandPrio, std::size_t take, bool restored,
                   RevocationBatch& out) noexcept;

  // Restoration with a budget on (and a filter to tell protected from victim bands).
  [[nodiscard]] static bool budgeted(const EvictionOptions& o) noexcept {
    return o.enabled && o.restoreReserve.enabled && RestorationBudget::on(o.restoreReserve) &&
           o.filter != nullptr;
  }

  RevocationPacer pacer_;
  RestorationBudget budget_;
  VictimSelector selector_;
  BurstMemory burst_;
  // Restoration with the pool's victims (ReplicaCoordinator::poolVictims): this replica left the
  // pool's revocations to the others (its own were not among the pool's youngest) since the
  // share install deferred_at_ counts (ReplicaCoordinator::installs), and leaves out the
  // others' skipped_ youngest victims (not revoked a sync round after it deferred to them).
  bool deferred_ = false;
  std::uint64_t deferred_at_ = 0;
  std::size_t skipped_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
