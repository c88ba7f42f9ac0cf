// detail::Evictor: in-flight eviction and reserve restoration (flow/eviction.hpp, whose header
// has the semantics) for one flow controller: when to revoke dispatched requests, how many,
// which, and the pacing of the revocations issued. Internal.
//
// The algorithm
//   reclaim (a head-of-line block): stop-and-wait, no decision while a revocation is outstanding
//   or cooling. The demand is the highest blocked band (from the gated one down) with queued
//   work; target = s - its ceiling, net = target - pendingReclaim; n = max(1, ceil(net / credit))
//   with credit = s / leases, less the releases expected anyway within the demand's remaining
//   tolerance (waitForReleases: from each lease's age and its band's holding time).
//   restoreReserve (any cycle, before a block): pipelined, the revocations still outstanding or
//   cooling are debited from the deficit. The deficit, in requests: the Poisson reserve for the
//   protected bands' arrivals over the lead time (their decayed peak rate when burstMemory is
//   on) less the room left, at most the requests beyond the victim band's ceiling, less the
//   releases expected within the lead time (eviction.hpp has the formula).
//   Victims: the leases strictly below the demand (or the lowest protected) band that the filter
//   accepts and whose dispatch reached the host; by the order policy, or (footprintAware, every
//   footprint known) by priority, then generated tokens per unit of credit, then the order
//   policy, with the cheapest prefix-plus-finisher that covers the deficit.
//   Restoration per endpoint: when the host reported the candidates' endpoints
//   (FlowController::setLeaseEndpoint) and the detector measures room per endpoint, restoration
//   takes its victims one at a time, preferring, in order: an endpoint where a protected request
//   of the protected bands' footprint does not fit now, one revocation makes it fit, and a
//   protected lease is held (where one waits); such an endpoint without a protected lease; an
//   endpoint where it fits already; the rest (endpoint unknown or not enough even after one
//   revocation). Ties keep the pool-wide order; each victim's slot and KV are credited to its
//   endpoint's room before the next choice. Without any known endpoint: the pool-wide choice.
//   With a replica share (setReplicaShare): the deficit is the pool's (lambda, M, P and the
//   request unit from this replica's figures plus the others'), and this replica revokes its
//   part of it (replicaPart).
//   Before the pool-wide deficit, restoration also acts where a protected request waits: an
//   endpoint the sampler sees a request waiting on (PoolPressureSampler::copyEndpointRoom) that
//   holds a protected lease younger than its band's holding time gets one revocation there,
//   sized to make a protected request fit, unless one is already outstanding or cooling there.
//
// Invariants (hold between calls)
//   - outstanding_ holds the revocations issued and not yet ended (their leases are marked
//     revoked in the owner's LeaseTable); cooling_ the ended ones within their grace.
//   - pending_reclaim_ is the sum of their credits (up to rounding; 0 when both are empty).
//   - stats_ counts every lease start and end the owner reports and every revocation issued.
//
// Host code: the Evictor calls only the pure, host-pluggable EvictionFilter and
// EvictionOrderPolicy (const, O(1), non-blocking, as eviction.hpp requires). It never holds the
// evict callback: a decision adds its revocations to the caller's RevocationBatch, which the
// owner hands to deliverRevocations() once its lock is released.
//
// Cost: a decision is O(leases) to gather the candidates plus their sort (O(c log c); the
// footprint-aware finisher search O(taken x c)); the rest O(outstanding + cooling). Allocation:
// the candidate scratch grows to the lease count and the per-priority issue counts to the
// priorities revoked, then are kept; none in steady state.
//
// Locking: none of its own; the owner (ControllerCore) calls it only under its mutex.
//
// Thread safety: thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/demand_tracker.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/detail/replica_coordinator.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/pool_pressure.hpp"
#include "holdback/flow/stats.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The revocations of one cycle, on the stack (their evict callbacks run after the lock). Only
// the slots used are constructed: a cycle usually revokes nothing, and initializing all 32
// slots was a third of a dispatch cycle's own time.
class RevocationBatch {
 public:
  static_assert(std::is_trivially_destructible_v<Revocation>);
  RevocationBatch() noexcept {}  // NOLINT: the storage is deliberately left uninitialized
  RevocationBatch(const RevocationBatch&) = delete;
  RevocationBatch& operator=(const RevocationBatch&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool full() const noexcept { return size_ == kMaxRevocationsPerDecisionLimit; }
  Revocation& add() noexcept { return *::new (&storage_[size_++]) Revocation(); }
  [[nodiscard]] const Revocation& at(std::size_t i) const noexcept {
    return *std::launder(reinterpret_cast<const Revocation*>(&storage_[i]));
  }

 private:
  struct alignas(Revocation) Slot {
    unsigned char bytes[sizeof(Revocation)];
  };
  std::array<Slot, kMaxRevocationsPerDecisionLimit> storage_;
  std::size_t size_ = 0;
};

// Calls `evict` for each revocation of `batch`, in order; one that throws loses only its own
// call (that revocation stays outstanding and times out). Host code: call it with no library
// lock held.
void deliverRevocations(const RevocationBatch& batch,
                        const std::function<void(const Revocation&)>& evict) noexcept;

class Evictor {
 public:
  // What a decision reads: the owner's settings and components, and its cycle's view. Built by
  // the owner for the call, under its lock.
  struct Cycle {
    const EvictionOptions& options;  // filter and order never null
    LeaseTable& leases;
    const DemandTracker& demand;       // its slots are the lease table's bands
    std::span<Band* const> bands;      // the policy's domain, highest first
    std::span<const double> ceilings;  // bands[i]'s ceiling this cycle
    TimePoint now;
    double saturation;
    // Where restoration reads each endpoint's room (restoration per endpoint); null: pool-wide.
    const PoolPressureSampler* sampler = nullptr;
    // The replica coordination (null: one gateway), and where restoration writes the figures
    // this replica publishes to the others (null: nowhere).
    const ReplicaCoordinator* replicas = nullptr;
    ReplicaRestoreFigures* publish = nullptr;
  };

  // Reserves room for one decision's revocations.
  Evictor();

  // A head-of-line block at domain band `gated`: revokes what the deficit needs into `out`.
  void reclaim(const Cycle& cycle, std::size_t gated, RevocationBatch& out) noexcept;
  // Reserve restoration (EvictionOptions::restoreReserve): any cycle, before a block.
  void restoreReserve(const Cycle& cycle, RevocationBatch& out) noexcept;

  // The owner recorded a lease.
  void leaseStarted() noexcept { stats_.leasesStarted += 1; }
  // The owner removed `lease` on the host's release: a revoked one confirms its revocation
  // (which starts cooling for options.confirmationGrace).
  void leaseReleased(const LeaseTable::Lease& lease, TimePoint now,
                     const EvictionOptions& options) noexcept;
  // Ends every lease of `leases` held `leaseTimeout` or longer (a revoked one: its revocation
  // timed out).
  void reapLeases(LeaseTable& leases, TimePoint now, Duration leaseTimeout,
                  const EvictionOptions& options) noexcept;
  // Retires timed-out outstanding revocations (their leases end) and expired cooling debits.
  void retireRevocations(TimePoint now, const EvictionOptions& options,
                         LeaseTable& leases) noexcept;

  // The counters, with the pending debit and the outstanding and cooling counts (`enabled` and
  // `leases` are the owner's). Allocates (the per-priority counts).
  [[nodiscard]] EvictionStats stats() const;

 private:
  // A revocation issued and not yet confirmed, and a confirmed one within its grace.
  struct Outstanding {
    RequestId id = 0;
    TimePoint issuedAt{};
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;  // the victim's
  };
  struct Cooling {
    TimePoint expiresAt{};
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;
  };
  // A victim candidate with its credit (saturation units it frees), its endpoint and the KV
  // tokens it holds there (its footprint, else its declared KV tokens).
  struct Candidate {
    EvictionCandidate lease;
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;
    double kvTokens = 0.0;
  };

  // A revocation's lead time in seconds: `configured` when > 0, else the measured mean
  // issue-to-confirmation latency (0 before the first) + `grace`.
  [[nodiscard]] double leadSeconds(Duration configured, Duration grace) const noexcept;
  // The protected arrival rate restoration sizes for: `lambda`, or the decayed peak of the
  // earlier ones when `memory` > 0 (and larger); updates the peak.
  double rememberBurst(TimePoint now, double lambda, Duration memory) noexcept;
  // This replica's own victims into `own` (the youngest kVictims of the leases below
  // `protectedPrio` that restoration may revoke).
  static void publishVictims(const Cycle& cycle, Priority protectedPrio,
                             ReplicaRestoreFigures& own) noexcept;
  // Keeps in candidates_ the ones among the pool's `need` youngest victims
  // (ReplicaCoordinator::ownAmongPoolYoungest), youngest first, and returns how many.
  std::size_t ownAmongPoolYoungest(const ReplicaCoordinator& replicas, std::size_t need) noexcept;
  // Fills candidates_ (leases strictly below `demandPrio` the filter accepts) with their credits;
  // false when there is none (or the credit is not finite).
  bool gatherCandidates(const Cycle& cycle, Priority demandPrio, bool& byFootprint,
                        double& totalFootprint) noexcept;
  // Revokes `need` candidates (by footprint: enough to cover `net`), at most the cap.
  void issueRevocations(const Cycle& cycle, Priority demandPrio, std::size_t need, double net,
                        bool byFootprint, bool restored, RevocationBatch& out) noexcept;
  // Restoration per endpoint (evictor_endpoints-inl.hpp): orders the first candidates so that
  // each revocation makes a protected request of the protected bands' footprint fit where one
  // waits or would; returns how many to revoke (as issueRevocations counts them), 0 when no
  // candidate's endpoint is known or there is no room per endpoint (the pool-wide choice then).
  std::size_t choosePerEndpoint(const Cycle& cycle, std::size_t victimBand, std::size_t need,
                                double net, bool byFootprint) noexcept;
  // Restoration where a protected request waits: on each endpoint the sampler marks as having a
  // request waiting that holds a protected lease younger than its band's holding time, and
  // where no revocation is outstanding or cooling, revokes one victim (the first in the
  // pool-wide order that makes a protected request fit there, else the one holding the most KV).
  // False when it revoked nothing.
  bool restoreWhereWaiting(const Cycle& cycle, std::size_t victimBand, bool byFootprint,
                           RevocationBatch& out) noexcept;
  // Copies the sampler's room and waits per endpoint; false without them.
  bool readEndpoints(const Cycle& cycle) noexcept;
  // Marks in protected_here_ the endpoints holding a lease of a band at or above `prio`; with
  // `waiting` only leases younger than their band's holding time (any while unmeasured) that no
  // revocation was issued for yet, and then `serve` marks those on the endpoints
  // protected_here_ holds as served (restoredFor).
  void markProtected(const Cycle& cycle, Priority prio, bool waiting, bool serve) noexcept;
  // The KV footprint of a protected request: the protected bands' (domain bands [0, victimBand))
  // mean declared footprint, weighted by their arrival rates (equally while none has a rate).
  [[nodiscard]] static double protectedFootprint(const Cycle& cycle,
                                                 std::size_t victimBand) noexcept;
  // How useful revoking `c` is for a protected request of `footprint` (smaller is better).
  [[nodiscard]] int endpointClass(const Candidate& c, double footprint) const noexcept;
  // Sorts the candidates in the pool-wide preference (by footprint, or the order policy).
  void sortCandidates(const EvictionOptions& ev, bool byFootprint) noexcept;
  // Revokes the first `take` candidates into `out`.
  void revokeFirst(const Cycle& cycle, Priority demandPrio, std::size_t take, bool restored,
                   RevocationBatch& out) noexcept;
  // Moves outstanding revocation `i` to cooling until now + `grace` (confirmed or timed out).
  void endOutstanding(std::size_t i, TimePoint now, Duration grace, bool timedOut) noexcept;
  // endOutstanding for the revocation of lease `id`, if it is outstanding.
  void endOutstandingOf(RequestId id, TimePoint now, Duration grace, bool timedOut) noexcept;
  // The chance (0..1) that a lease of age `age` in a band holding `hold` seconds on average
  // ends on its own within `horizon` seconds (wait-vs-evict); 0 when `hold` is not measured.
  [[nodiscard]] static double releaseChance(double hold, double age, double horizon) noexcept;
  void issuedFor(Priority victim);
  void countLeaseEnd(LeaseEnd end) noexcept {
    stats_.leaseEnds[static_cast<std::size_t>(end)] += 1;
  }
  // Appends band `band`'s revocable leases the filter accepts (when `below`: the band is under
  // the demand) and sums every lease's footprint (footprintsKnown: none is 0).
  static void collectCandidates(const LeaseTable& leases, std::uint32_t band, bool below,
                                const EvictionFilter& filter, std::vector<Candidate>& out,
                                double& totalFootprint, bool& footprintsKnown);

  std::vector<Outstanding> outstanding_;
  std::vector<Cooling> cooling_;
  double pending_reclaim_ = 0.0;
  // Reserve restoration's burst memory: the highest protected arrival rate and when it was seen.
  double restore_peak_rate_ = 0.0;
  TimePoint restore_peak_time_{};
  EvictionStats stats_;
  std::vector<Candidate> candidates_;  // a decision's scratch
  // Restoration per endpoint's scratch (grow with the pool only): each endpoint's room, and
  // whether it holds a protected lease.
  std::vector<EndpointRoom> endpoint_room_;
  std::vector<std::uint8_t> endpoint_waits_;
  std::vector<std::uint8_t> protected_here_;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
