// detail::VictimSelector: which dispatched requests eviction revokes. Internal.
//
// The algorithm
//   Candidates: the leases strictly below the demand band (or the lowest protected band) that
//   the EvictionFilter accepts and whose dispatch reached the host (gather). Each carries its
//   credit, the saturation units it frees: s / leases, or (footprintAware, every footprint
//   known) s x its footprint / the leases' total footprint.
//   Pool-wide (chooseCovering): by the order policy, the first `need`; or by footprint: by
//   priority, then generated tokens per unit of credit, then the order policy, until the net
//   deficit is covered, then the cheapest prefix of that set completed by one finisher that
//   still covers it.
//   Per endpoint (choosePerEndpoint; the host reported the candidates' endpoints and the
//   detector measures room per endpoint): one victim at a time, preferring, in order: an
//   endpoint where a protected request of the protected bands' footprint does not fit now, one
//   revocation makes it fit and a protected lease is held (where one waits); such an endpoint
//   without a protected lease; an endpoint where it fits already; the rest (endpoint unknown or
//   not enough even after one revocation). Ties keep the pool-wide order; each victim's slot
//   and KV, and those of the revocations outstanding, are credited to its endpoint's room
//   before the next choice.
//   Where a protected request waits (chooseWhereWaiting): on each endpoint the sampler marks as
//   having a request waiting, that holds a protected lease younger than its band's holding time
//   and where no revocation is outstanding or cooling, one victim: the first in the pool-wide
//   order that makes a protected request fit there, else the one holding the most KV there.
//   Across replicas (ownAmongPoolYoungest): this replica's own among the pool's youngest
//   (ReplicaCoordinator), and the youngest victims it publishes for the others.
//
// Host code: only the pure, host-pluggable EvictionFilter and EvictionOrderPolicy (const, O(1),
// non-blocking, as flow/eviction.hpp requires).
//
// Cost: O(leases) to gather plus the sort (O(c log c)); the footprint finisher search
// O(taken x c); per endpoint O(taken x c + endpoints). Allocation: the candidate scratch grows
// to the lease count and the endpoint scratch to the pool, then are kept; none in steady state.
//
// Thread safety: thread-compatible; the owner calls it under the controller's mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "holdback/core/replica_share.hpp"
#include "holdback/flow/detail/eviction_cycle.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/detail/replica_coordinator.hpp"
#include "holdback/flow/detail/revocation_pacer.hpp"
#include "holdback/flow/eviction.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class VictimSelector {
 public:
  // A victim candidate with its credit (saturation units it frees), its endpoint and the KV
  // tokens it holds there (its footprint, else its declared KV tokens).
  struct Candidate {
    EvictionCandidate lease;
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;
    double kvTokens = 0.0;
  };

  // Fills the candidates (leases strictly below `demandPrio` the filter accepts) with their
  // credits; false when there is none (or the credit is not finite).
  bool gather(const EvictionCycle& cycle, Priority demandPrio, bool& byFootprint,
              double& totalFootprint) noexcept;
  // Pool-wide: orders the candidates so that the first ones are `need` victims (by footprint:
  // enough to cover `net`), at most the cap; returns how many.
  std::size_t chooseCovering(const EvictionOptions& options, std::size_t need, double net,
                             bool byFootprint) noexcept;
  // Per endpoint: orders the first candidates so that each revocation makes a protected request
  // of the protected bands' (domain bands [0, victimBand)) footprint fit where one waits or
  // would; returns how many to revoke (as chooseCovering counts them), 0 when no candidate's
  // endpoint is known or there is no room per endpoint (the pool-wide choice then).
  std::size_t choosePerEndpoint(const EvictionCycle& cycle, const RevocationPacer& pacer,
                                std::size_t victimBand, std::size_t need, double net,
                                bool byFootprint) noexcept;
  // Where a protected request waits: gathers and orders the victims (one per endpoint acted
  // on) and marks the waiting protected leases there as served; returns how many to revoke
  // (0: nothing to do there).
  std::size_t chooseWhereWaiting(const EvictionCycle& cycle, const RevocationPacer& pacer,
                                 std::size_t victimBand, bool byFootprint) noexcept;
  // Keeps the ones among the pool's `need` youngest victims (ReplicaCoordinator::
  // ownAmongPoolYoungest), youngest first, and returns how many.
  std::size_t ownAmongPoolYoungest(const ReplicaCoordinator& replicas, std::size_t need,
                                   std::size_t skipOthers = 0) noexcept;
  // This replica's own victims into `own` (the youngest kVictims of the leases below
  // `protectedPrio` that restoration may revoke).
  static void publishVictims(const EvictionCycle& cycle, Priority protectedPrio,
                             ReplicaRestoreFigures& own) noexcept;

  // The candidates in their chosen order (the first ones returned by a choice are revoked).
  [[nodiscard]] std::span<const Candidate> candidates() const noexcept { return candidates_; }

 private:
  // Appends band `band`'s revocable leases the filter accepts (when `below`: the band is under
  // the demand) and sums every lease's footprint (footprintsKnown: none is 0).
  static void collect(const LeaseTable& leases, std::uint32_t band, bool below,
                      const EvictionFilter& filter, std::vector<Candidate>& out,
                      double& totalFootprint, bool& footprintsKnown);
  // Sorts the candidates in the pool-wide preference (by footprint, or the order policy).
  void sortCandidates(const EvictionOptions& ev, bool byFootprint) noexcept;
  // Copies the sampler's room and waits per endpoint; false without them.
  bool readEndpoints(const EvictionCycle& cycle) noexcept;
  // Marks in protected_here_ the endpoints holding a lease of a band at or above `prio`; with
  // `waiting` only leases younger than their band's holding time (any while unmeasured) that no
  // revocation was issued for yet, and then `serve` marks those on the endpoints
  // protected_here_ holds as served (restoredFor).
  void markProtected(const EvictionCycle& cycle, Priority prio, bool waiting, bool serve) noexcept;
  // The KV footprint of a protected request: the protected bands' (domain bands [0, victimBand))
  // mean declared footprint, weighted by their arrival rates (equally while none has a rate).
  [[nodiscard]] static double protectedFootprint(const EvictionCycle& cycle,
                                                 std::size_t victimBand) noexcept;
  // How useful revoking `c` is for a protected request of `footprint` (smaller is better).
  [[nodiscard]] int endpointClass(const Candidate& c, double footprint) const noexcept;

  std::vector<Candidate> candidates_;  // a decision's scratch
  // Per endpoint's scratch (grow with the pool only): each endpoint's room, whether a request
  // waits there, and whether it holds a protected lease.
  std::vector<EndpointRoom> endpoint_room_;
  std::vector<std::uint8_t> endpoint_waits_;
  std::vector<std::uint8_t> protected_here_;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
