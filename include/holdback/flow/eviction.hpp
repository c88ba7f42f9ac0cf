// In-flight eviction: when higher-priority work is blocked at the head of the line, revoke a few
// dispatched sheddable requests so that their capacity comes back (the Go reference's
// reclamation: pkg/epp/flowcontrol/controller/internal/reclamation.go of llm-d-router, PR #2093,
// https://github.com/llm-d/llm-d-router; holdback adds wait-vs-evict and reserve restoration).
// docs/guide/eviction.md has the full semantics and the host contract.
//
// The pieces
//   - Leases: every request the FlowController dispatches holds a lease
//   (flow/detail/lease_table.hpp)
//     while eviction is enabled or the policy reads demand, until the host calls
//     FlowController::release(id, now). The host may tell the lease its tokens
//     (Ticket::updateLease: footprint and tokens generated so far).
//   - The trigger: a dispatch cycle stops at a gated band (head-of-line block). Scanning from that
//     band down, the first band with queued work, a ceiling > 0 and saturation >= its ceiling is
//     the eligible demand. Only leases of a priority strictly below it are candidates, and only
//     those the EvictionFilter accepts.
//   - Sizing (upstream's deficit / credit): target = s - ceiling(demand band); credit = s / leases
//     (mean lease footprint in saturation units); net = target - pendingReclaim; nothing when
//     net < 0 or (net == 0 and something is pending); else n = max(1, ceil(net / credit)),
//     capped at maxRevocationsPerDecision and the candidates.
//   - Pacing (stop-and-wait): a revocation is outstanding until the host confirms its end
//     (release(id) of a revoked lease), then cooling for confirmationGrace (the time the sensor
//     needs to see the slot free), then its debit expires. A new decision is taken only when
//     nothing is outstanding or cooling. An outstanding revocation older than
//     confirmationTimeout is treated as confirmed (outcome timed_out; its lease ends).
//   - Actuation: the victims are chosen under the controller's lock (marked revoked there, so a
//     lease is revoked at most once); EvictionOptions::evict(revocation) is called for each after
//     every library lock is released, on the thread that ran the cycle.
//   Better than upstream v1 (both off by default):
//   - waitForReleases: before revoking, count the releases expected anyway within the demand
//     band's remaining tolerance (tolerance minus the wait of the band's head request), from every
//     lease's age and its band's measured holding time; evict only the shortfall.
//   - footprintAware: when every lease has a footprint (updateLease), a lease's credit is its
//     share of the footprint (s * footprint / total), and the victims are those that cover the
//     deficit destroying the fewest generated tokens (lowest priority first, then fewest
//     generated tokens per unit of credit).
//
// The victim's client is answered HTTP 429 with drop reason "evicted" (kEvictedHttp): the host
// owns that reply; the request's queue outcome stays kDispatched (it was dispatched, exactly
// once), its lease ends kRevoked.
//
// Thread safety: the policies must be thread-safe (const, called under the controller's lock:
// O(1), no blocking, no controller calls); the value types are thread-compatible.
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/replica_share.hpp"
#include "holdback/core/types.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/outcome.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// Defaults (the Go reference's where it has the setting, PR #2093)

inline constexpr std::size_t kDefaultMaxRevocationsPerDecision = 2;
// The largest cap a configuration may ask for (the cycle keeps its victims on the stack).
inline constexpr std::size_t kMaxRevocationsPerDecisionLimit = 32;
inline constexpr Duration kDefaultEvictionConfirmationTimeout = std::chrono::seconds(10);
// Upstream's library default; hosts derive it from the detector (deriveEvictionGrace).
inline constexpr Duration kDefaultEvictionConfirmationGrace = std::chrono::milliseconds(500);
// Grace for sensors that see a slot free in the same event as the confirmation (in-flight counts).
inline constexpr Duration kInFlightSensorEvictionGrace = std::chrono::milliseconds(10);
// Engine budget to reclaim an aborted request's memory (added for scraped sensors).
inline constexpr Duration kDefaultEngineReclaimBudget = std::chrono::milliseconds(250);
inline constexpr Duration kDefaultScrapeInterval = std::chrono::milliseconds(50);
inline constexpr Duration kDefaultWaitTolerance = std::chrono::milliseconds(100);

inline constexpr std::string_view kSheddableEvictionFilterType = "sheddable-eviction-filter";
inline constexpr std::string_view kPriorityThenTimeEvictionOrderType =
    "priority-then-time-eviction-order-policy";

// What the victim's client is answered (upstream: 429, x-llm-d-request-dropped-reason: evicted).
inline constexpr HttpDisposition kEvictedHttp{429, "evicted"};

// ---------------------------------------------------------------------------------------------
// Victim policies

// One in-flight request as the filter and the order see it.
struct EvictionCandidate {
  RequestId id = 0;
  Priority priority = 0;  // the band it was dispatched from
  TimePoint dispatchedAt{};
  std::uint64_t footprintTokens = 0;  // updateLease; 0 = unknown
  std::uint64_t generatedTokens = 0;  // updateLease; work destroyed when it is revoked
};

// Which in-flight requests may be revoked at all.
// Thread safety: implementations must be thread-safe (called under the controller's lock).
class HOLDBACK_API EvictionFilter {
 public:
  virtual ~EvictionFilter() = default;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  [[nodiscard]] virtual bool accept(const EvictionCandidate& candidate) const noexcept = 0;
  // False when no lease of band `priority` can be accepted: the band is not walked at all (a
  // cycle then costs O(bands), not O(leases)). The default walks every band.
  [[nodiscard]] virtual bool mayAccept(Priority priority) const noexcept {
    (void)priority;
    return true;
  }
};

// Which candidates go first: a strict weak order, `less(a, b)` = a is revoked before b.
// Thread safety: implementations must be thread-safe (called under the controller's lock).
class HOLDBACK_API EvictionOrderPolicy {
 public:
  virtual ~EvictionOrderPolicy() = default;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  [[nodiscard]] virtual bool less(const EvictionCandidate& a,
                                  const EvictionCandidate& b) const noexcept = 0;
};

// sheddable-eviction-filter: priority < 0 only (the user-facing contract "may be killed").
// Thread safety: thread-safe (stateless).
class HOLDBACK_API SheddableEvictionFilter final : public EvictionFilter {
 public:
  [[nodiscard]] std::string_view name() const noexcept override {
    return kSheddableEvictionFilterType;
  }
  [[nodiscard]] bool accept(const EvictionCandidate& c) const noexcept override {
    return c.priority < 0;
  }
  [[nodiscard]] bool mayAccept(Priority priority) const noexcept override { return priority < 0; }
};

// priority-then-time-eviction-order-policy: lowest priority first; equal priority, the most
// recently dispatched first (least invested work); then the higher id (deterministic).
// Thread safety: thread-safe (stateless).
class HOLDBACK_API PriorityThenTimeEvictionOrder final : public EvictionOrderPolicy {
 public:
  [[nodiscard]] std::string_view name() const noexcept override {
    return kPriorityThenTimeEvictionOrderType;
  }
  [[nodiscard]] bool less(const EvictionCandidate& a,
                          const EvictionCandidate& b) const noexcept override {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.dispatchedAt != b.dispatchedAt) return a.dispatchedAt > b.dispatchedAt;
    return a.id > b.id;
  }
};

// ---------------------------------------------------------------------------------------------
// Host actuation

// What EvictionOptions::evict receives: the host aborts request `id` upstream (the model server
// frees the slot), answers its client `disposition` (429 "evicted"; streaming: an error event),
// and calls FlowController::release(id, now) once the request has ended (the confirmation).
struct Revocation {
  RequestId id = 0;
  Priority priority = 0;        // the victim's band
  Priority demandPriority = 0;  // the blocked band it makes room for
  TimePoint dispatchedAt{};
  TimePoint issuedAt{};  // the `now` of the cycle that decided it
  std::uint64_t footprintTokens = 0;
  std::uint64_t generatedTokens = 0;
  // Saturation units this revocation is expected to free (its debit).
  double credit = 0.0;
  HttpDisposition disposition = kEvictedHttp;
};

// How a lease ended.
enum class LeaseEnd : std::uint8_t {
  kReleased,          // the host released it (the request ended on its own)
  kRevokedConfirmed,  // revoked, and the host confirmed its end (release of a revoked lease)
  kRevokedTimedOut,   // revoked, and not confirmed within confirmationTimeout
  kReaped,            // never released within FlowControllerOptions::leaseTimeout
};
// "released", "revoked-confirmed", "revoked-timed-out", "reaped".
[[nodiscard]] HOLDBACK_API std::string_view toString(LeaseEnd end) noexcept;

// Wait-vs-evict (better than upstream v1).
struct WaitForReleasesOptions {
  bool enabled = false;
  // How long the blocked band may wait (e.g. its TTFT budget); > 0.
  Duration tolerance = kDefaultWaitTolerance;
};

// Reserve restoration (holdback extension, off by default): revoke before the higher bands block.
// Upstream revokes only at a head-of-line block, so a request of the blocked band always waits
// at least the revocation's actuation time (abort, slot free, sensor). With this on, every cycle
// (not only a blocked one) also checks the room the policy keeps free for the protected bands
// (those the filter never accepts): when the highest victim band is over its ceiling, the
// missing room is restored up to what the protected bands' arrivals need during the actuation
// time, less the releases expected in it:
//
//     deficit = min((s - c_victim) / u,  r(lambda T, epsilon) - (c_top - s) / u) - M T - P
//
// in requests (u = s / leases), r(a, eps) the Poisson quantile of ReservationPolicy, lambda the
// protected bands' measured arrival rate, M the measured completion rate of every band, T the
// lead time, P the revocations still outstanding or cooling; floor(deficit) revocations (at most
// maxRevocationsPerDecision). Pipelined, not stop-and-wait: the pending revocations are debited
// instead of closing the gate, so a later cycle may add to them (a head-of-line decision still
// waits for all of them). Measures the controller's demand figures while on.
//
// Restoration across replicas: gateway replicas that share a pool each see their own arrivals
// and leases only. Sized from those, every replica restores the whole pool's missing room for a
// fraction of its arrivals (R replicas together about R x r(lambda T / R), several times what
// the pool needs). With the others' figures installed (ReplicaPort::setShare, from
// ReplicaSyncer::share), every replica computes the deficit above for the pool: lambda, M, P
// and the leases in u are this replica's plus the others' sum (at most one sync interval old),
// and it revokes its part of n = floor(deficit). Every replica also publishes the dispatch times
// of its 16 youngest victims (ReplicaRestoreFigures::victimDispatchTimes); when every other live
// replica does and every replica's demand counts the pool's arrivals (ReplicaShare::
// pooledArrivals: the replica feed, so that the replicas size the same deficit), a replica's part
// is its own victims among the pool's n youngest (its candidates ranked with the others'
// published times, a tie counting as its own), so that the replicas together revoke what one
// gateway would: the n youngest, not each replica's youngest (a replica's youngest is about R
// times older than the pool's, and the work lost with it). A replica whose part is none there
// (the pool's youngest are the others') waits for them until the next share is installed at
// most: if the pool is still short then, it leaves the others' n youngest out (more each round)
// and takes its own among the next of the pool's youngest (the others may size less, or their
// published list may name victims they revoked since). Else its part is floor(n / R), plus
// one when its position on the turn (ReplicaTurn, core/replica_share.hpp: rank + the time on the
// replicas' shared clock in 100 ms steps, modulo R) is below n mod R. Without a share (one
// gateway, no store, or the store failed) a replica restores alone, as above.
struct ReserveRestoreOptions {
  bool enabled = false;
  // The tail probability the protected bands' arrivals during T outrun the restored room;
  // (0, 0.5].
  double epsilon = 0.01;
  // leadTime and burstMemory are experiment switches, no configuration keys (deprecated in
  // files, still applied); epsilon follows the reservation policy's in a file.
  // T: from revocation to a slot the sensor sees free. 0 = measured (the mean issue-to-
  // confirmation latency of the confirmed revocations, 0 before the first) + confirmationGrace.
  Duration leadTime{0};
  // Burst memory: > 0 sizes the room by the larger of the protected bands' current arrival rate
  // and the highest rate measured before, decayed with this time constant
  // (lambda' = max(lambda, peak * exp(-age / burstMemory))), so that the room is restored as
  // for the last burst from the first arrivals of the next one on, instead of after the arrival
  // estimate has risen. 0 (the default) = the current estimate only. >= 0.
  Duration burstMemory{0};
  // Budgets (detail/restoration_budget.hpp): restoration revokes only while both allow it, and
  // otherwise waits (the policy's ceiling still holds the sheddable bands back). Each is a token
  // bucket that starts full.
  // Eviction budget: revocations per lease started in a protected band (the bands the filter
  // never accepts), at most evictionBurst saved up; 0 = none. [0, 1].
  double evictionBudget = 0.0;
  // The eviction budget's bucket size in revocations; [1, 1000].
  double evictionBurst = 4.0;
  // Waste budget: the slot time (dispatch to revocation) of revoked requests, as a share of the
  // slot time (dispatch to release) of the requests of the victim bands that ended on their
  // own, at most wasteBurst saved up; 0 = none. [0, 1).
  double wasteBudget = 0.0;
  // The waste budget's bucket size in slot time; > 0.
  Duration wasteBurst = std::chrono::seconds(30);
  // Burst trigger: > 0 restores only while a protected band is in a burst
  // (DemandEstimator::inBurst: its arrivals' short average rose this many standard deviations
  // above the long one, with the reservation policy's riseTime and decayTime, until both are back
  // near the rate before it), and the head-of-line trigger (revokeOnBlock) then revokes for the
  // highest band only; restoration still revokes where a protected request waits on an
  // endpoint. Steady traffic is served by the head-of-line trigger, a burst gets restoration's
  // head start. 0 (the default) = restore at any time. [0, 100].
  double burstSignificance = 0.0;
};

struct EvictionOptions {
  // Reloadable. Requires `evict` (given at create()).
  bool enabled = false;
  // At most this many revocations per decision; 1 .. kMaxRevocationsPerDecisionLimit.
  std::size_t maxRevocationsPerDecision = kDefaultMaxRevocationsPerDecision;
  // An unconfirmed revocation counts as confirmed after this long; > 0.
  Duration confirmationTimeout = kDefaultEvictionConfirmationTimeout;
  // How long a confirmed revocation still debits (the sensor's lag); >= 0. Derive it from the
  // detector with deriveEvictionGrace().
  Duration confirmationGrace = kDefaultEvictionConfirmationGrace;
  // nullptr = SheddableEvictionFilter / PriorityThenTimeEvictionOrder.
  std::shared_ptr<const EvictionFilter> filter;
  std::shared_ptr<const EvictionOrderPolicy> order;
  // Experiment switches, no configuration keys (deprecated in files, still applied): the
  // eviction benchmark and the simulator set them.
  WaitForReleasesOptions waitForReleases;
  bool footprintAware = false;
  // Upstream's trigger: revoke at a head-of-line block. false (holdback) = reserve restoration
  // only (requires restoreReserve.enabled).
  bool revokeOnBlock = true;
  // Reserve restoration (holdback extension, off by default).
  ReserveRestoreOptions restoreReserve;
  // Create-only (reconfigure keeps the first one). Called with no library lock held, once per
  // revoked lease, on the thread whose dispatch cycle decided it; may call any controller method.
  // Only leases whose kDispatched outcome callback has returned are revoked (never before it).
  // It may arrive after the request ended on its own (the host then just ignores it). Exceptions
  // are swallowed (the revocation then times out).
  std::function<void(const Revocation&)> evict;
};

// Checks every field (paths under `path`, e.g. "/eviction"); `requireEvict` = false skips the
// callback check (a reconfigure keeps the create-time callback).
HOLDBACK_API void validateEvictionOptions(const EvictionOptions& options, std::string_view path,
                                          bool requireEvict, Diagnostics& diagnostics);

// The grace upstream wires from the detector: kInFlightSensorEvictionGrace for the concurrency
// detector (its counts drop with the confirmation); for the utilization detector (scraped
// metrics) scrapeInterval + its metricsStalenessThreshold + engineBudget (500 ms with the
// defaults); kDefaultEvictionConfirmationGrace for any other detector (or nullptr).
[[nodiscard]] HOLDBACK_API Duration deriveEvictionGrace(
    const SaturationDetector* detector, Duration scrapeInterval = kDefaultScrapeInterval,
    Duration engineBudget = kDefaultEngineReclaimBudget) noexcept;

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/eviction-inl.hpp"
#endif
