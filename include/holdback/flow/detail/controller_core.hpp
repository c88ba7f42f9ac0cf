// detail::ControllerCore: the state behind a FlowController and its Tickets. Internal.
//
// Components
//   - PoolPressureSampler (flow/pool_pressure.hpp): calls the host's endpoint source and detector,
//     under its own mutex and under no controller lock;
//   - BandTable (flow/detail/band_table.hpp): bands, flows, queues, the request index, counters;
//   - LeaseTable (flow/lease_table.hpp): the dispatched requests still holding a slot, while the
//     policy reads demand or eviction is on;
//   - DemandTracker (flow/detail/demand_tracker.hpp): the per-priority demand figures and the
//     cycle's DemandView;
//   - Evictor (flow/detail/evictor.hpp): in-flight eviction and reserve restoration, their
//     pacing and counters;
//   - ReplicaCoordinator (flow/detail/replica_coordinator.hpp): the other replicas' share, the
//     turn and the figures this replica publishes;
//   - the reloadable settings (policy, global limits, TTLs, priority domain, eviction);
//   - the pool regime, the last pressure, the cycle's scratch buffers.
//
// The cycle (dispatchImpl): named steps over one CycleView on its stack.
//   1. sample the pool (host code: the endpoint source and the detector; no lock);
//   under mu_:
//   2. beginCycle: apply the pressure (regime, saturation, room), count the cycle; stop here
//      when shut down (kStopped);
//   3. selectDomain: the bands the policy sees (provisioned, or active), highest first;
//   4. computeCeilings: the demand update and the policy's computeLimit, once;
//   5. restoreReserve: reserve restoration (the evictor), whether or not anything is queued;
//   6. serveBands: the bands in the scheduler's order; the first gated one ends the cycle
//      (blockAt: the evictor's reclaim), else a band's fairness pick is served (serveBand: dead
//      heads finalized, a yield to an older head of another replica, or dispatchHead: a lease
//      and at most one dispatch);
//   after mu_:
//   7. finishCycle: the outcomes, the lease marked delivered, the revocations.
//
// Locking
//   One mutex, mu_, guards the table, the leases, the demand tracker, the evictor, the settings
//   and the regime (HOLDBACK_GUARDED_BY); the components have no lock of their own. Under mu_ run
//   only the library's own bookkeeping plus host-pluggable pieces of pure computation:
//   UsageLimitPolicy::computeLimit (once per cycle), FairnessPolicy::pick, the OrderingPolicy
//   comparators and the EvictionFilter and EvictionOrderPolicy. They must be O(bands) /
//   O(log n), must not block and must not call the controller. Never under mu_: the endpoint
//   source, the detector (the sampler runs before mu_ is taken), the clock (read before mu_),
//   the outcome callback (completions are collected under mu_ and delivered after it is
//   released), the evict callback (revocations are collected in a RevocationBatch under mu_ and
//   delivered after it is released) and, in steady state, heap allocation for a request: its
//   memory comes from the table's bounded pool under mu_ (a heap allocation only while the
//   queues grow past the pool) and memory the pool does not keep is freed after mu_ is released
//   (Retired). Create-only collaborators (endpoints, onOutcome, evict, clock, timings) are const
//   members, read without a lock.
//
// Thread safety: thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <vector>

#include "holdback/core/thread_annotations.hpp"
#include "holdback/flow/detail/band_scheduler.hpp"
#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/demand_tracker.hpp"
#include "holdback/flow/detail/evictor.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/detail/replica_coordinator.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/pool_pressure.hpp"
#include "holdback/policy/demand.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Dead heads a single cycle may evict before giving up on dispatching in that cycle (bounds the
// cycle's work and the completions it holds on its stack).
inline constexpr std::size_t kMaxFinalizedPerCycle = 32;

// FlowController::validate; `create` = false skips the create-only fields (reconfigure keeps them).
void validateFlowOptions(const FlowControllerOptions& options, Diagnostics& diagnostics,
                         bool create);

// The completions of one cycle and the memory of their requests, on the stack: only the slots
// used are constructed (a cycle usually finalizes one request). Destroying the batch frees the
// requests' memory, so it must outlive the lock.
class FinalizedBatch {
 public:
  struct Entry {
    // Finalizes `item` into the entry: its completion, and its memory (guaranteed elision: no
    // temporary is moved or destroyed).
    Entry(BandTable& table, Item* item, Outcome outcome, TimePoint now) noexcept
        : retired(table.finalize(item, outcome, now, completion)) {}
    Completion completion;
    Retired retired;
  };
  FinalizedBatch() noexcept {}  // NOLINT: the storage is deliberately left uninitialized
  ~FinalizedBatch() {
    for (std::size_t i = 0; i < size_; ++i) at(i).~Entry();
  }
  FinalizedBatch(const FinalizedBatch&) = delete;
  FinalizedBatch& operator=(const FinalizedBatch&) = delete;

  [[nodiscard]] bool full() const noexcept { return size_ == kMaxFinalizedPerCycle; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Finalizes `item` (BandTable::finalize) into the next entry.
  Entry& add(BandTable& table, Item* item, Outcome outcome, TimePoint now) noexcept {
    return *::new (&storage_[size_++]) Entry(table, item, outcome, now);
  }
  Entry& at(std::size_t i) noexcept {
    return *std::launder(reinterpret_cast<Entry*>(&storage_[i]));
  }

 private:
  struct alignas(Entry) Slot {
    unsigned char bytes[sizeof(Entry)];
  };
  std::array<Slot, kMaxFinalizedPerCycle> storage_;
  std::size_t size_ = 0;
};

// A request of `kvTokens` can never start on a pool whose largest endpoint holds `largestKv`
// tokens of KV (0: unknown, nothing is too large).
[[nodiscard]] constexpr bool exceedsEveryEndpoint(std::int64_t kvTokens,
                                                  std::int64_t largestKv) noexcept {
  return largestKv > 0 && kvTokens > largestKv;
}

class ControllerCore {
 public:
  // `options` must be valid (FlowController::validate) and have a clock.
  explicit ControllerCore(FlowControllerOptions options);
  ControllerCore(const ControllerCore&) = delete;
  ControllerCore& operator=(const ControllerCore&) = delete;

  // Returns the request's id; `queued` tells whether it was queued (false: rejected, and its
  // outcome has been delivered).
  RequestId enqueue(FlowRequest&& request, TimePoint now, bool& queued) noexcept
      HOLDBACK_EXCLUDES(mu_);
  bool cancel(RequestId id) noexcept HOLDBACK_EXCLUDES(mu_);
  bool release(RequestId id, TimePoint now) noexcept HOLDBACK_EXCLUDES(mu_);
  bool updateLease(RequestId id, std::uint64_t footprint, std::uint64_t generated) noexcept
      HOLDBACK_EXCLUDES(mu_);
  bool setLeaseEndpoint(RequestId id, std::size_t endpoint) noexcept HOLDBACK_EXCLUDES(mu_);
  bool markLeaseStarted(RequestId id) noexcept HOLDBACK_EXCLUDES(mu_);
  bool setLeaseParked(RequestId id, bool parked) noexcept HOLDBACK_EXCLUDES(mu_);
  ReplicaRestoreFigures replicaRestoreFigures() const noexcept HOLDBACK_EXCLUDES(mu_);
  // Another replica's head of `band` waited longer (only with a share that pools arrivals).
  bool yieldsToPeer(const Band& band, const Item& head) const noexcept HOLDBACK_REQUIRES(mu_) {
    return replicas_.pooledArrivals() && replicas_.yieldsTo(band.prio, head.enqueueTime);
  }
  void setReplicaShare(const std::optional<ReplicaShare>& share) noexcept HOLDBACK_EXCLUDES(mu_);
  void recordPeerArrival(Priority priority, std::int64_t kvTokens) noexcept HOLDBACK_EXCLUDES(mu_);
  DispatchResult dispatchCycle(TimePoint now) noexcept HOLDBACK_EXCLUDES(mu_) {
    return dispatchImpl(now, nullptr, /*sample=*/true);
  }
  DispatchResult dispatch(TimePoint now, const PoolPressure& pressure) noexcept
      HOLDBACK_EXCLUDES(mu_);
  std::size_t expire(TimePoint now) noexcept HOLDBACK_EXCLUDES(mu_);
  std::size_t expire(TimePoint now, const PoolPressure& pressure) noexcept HOLDBACK_EXCLUDES(mu_);
  void setDesiredPriorities(std::span<const Priority> priorities) noexcept HOLDBACK_EXCLUDES(mu_);
  Diagnostics reconfigure(FlowControllerOptions options) noexcept HOLDBACK_EXCLUDES(mu_);
  // Finalizes every queued request and stops admission. Never waits for host code.
  void shutdown(TimePoint now) noexcept HOLDBACK_EXCLUDES(mu_);

  [[nodiscard]] FlowControllerStats stats() const HOLDBACK_EXCLUDES(mu_);
  [[nodiscard]] std::vector<Priority> bandPriorities() const HOLDBACK_EXCLUDES(mu_);
  [[nodiscard]] std::optional<BandHeadroom> bandHeadroom(Priority requested) const noexcept
      HOLDBACK_EXCLUDES(mu_);
  [[nodiscard]] PoolRegime poolRegime() const noexcept HOLDBACK_EXCLUDES(mu_);

  // The host clock (never called under mu_).
  [[nodiscard]] TimePoint now() const { return clock_(); }

 private:
  struct Settings {
    std::shared_ptr<UsageLimitPolicy> policy;
    std::uint64_t maxRequests = 0;
    std::uint64_t maxBytes = 0;
    Duration defaultTtl{};
    Duration noEndpointTtl{};
    PriorityDomain priorityDomain = PriorityDomain::kProvisioned;
    Duration activityWindow{};
    Duration leaseTimeout{};
    std::size_t fairnessIdLabelLimit = 0;
    EvictionOptions eviction;  // filter and order never null; evict is evict_
    BandScheduler::Config bandScheduling;
  };
  static Settings settingsOf(FlowControllerOptions& options);
  static BandTopology topologyOf(FlowControllerOptions& options);

  // One dispatch cycle: what its steps read (set by the first ones) and what they hand over to
  // be delivered after the lock. Lives on dispatchImpl's stack; its spans point into the core's
  // scratch and are valid until the lock is released.
  struct CycleView {
    explicit CycleView(TimePoint at) noexcept : now(at) {}
    CycleView(const CycleView&) = delete;
    CycleView& operator=(const CycleView&) = delete;

    TimePoint now;
    double saturation = 0.0;
    std::span<Band* const> ordered;    // every band, highest first
    std::span<Band* const> domain;     // the bands the policy sees, highest first
    std::span<const double> ceilings;  // domain[i]'s ceiling this cycle
    bool leasesOn = false;             // dispatched requests hold a lease
    bool restores = false;             // reserve restoration is on
    DispatchResult result;
    FinalizedBatch finalized;     // destroyed (the requests' memory freed) after the lock
    RevocationBatch revocations;  // their evict callbacks run after the lock
    bool leased = false;          // a lease to mark delivered after the outcome callback
  };

  // `sample`: the pressure is this cycle's sample (`given` is null), else `given`; null (or a
  // re-entrant call from the host's sampler code): the last one.
  DispatchResult dispatchImpl(TimePoint now, const PressureSample* given, bool sample) noexcept
      HOLDBACK_EXCLUDES(mu_);
  // The cycle's steps (the file comment), in order; always inlined into dispatchImpl (the hot
  // path: the cycle costs what one function does). beginCycle returns false when stopped.
  [[gnu::always_inline]] bool beginCycle(CycleView& cycle, const PressureSample* pressure) noexcept
      HOLDBACK_REQUIRES(mu_);
  [[gnu::always_inline]] void selectDomain(CycleView& cycle) noexcept HOLDBACK_REQUIRES(mu_);
  [[gnu::always_inline]] void computeCeilings(CycleView& cycle) noexcept HOLDBACK_REQUIRES(mu_);
  [[gnu::always_inline]] void restoreReserve(CycleView& cycle) noexcept HOLDBACK_REQUIRES(mu_);
  [[gnu::always_inline]] void serveBands(CycleView& cycle) noexcept HOLDBACK_REQUIRES(mu_);
  // The gated domain band `i` ends the cycle (kGated), reclaiming when eviction revokes on a block.
  [[gnu::always_inline]] void blockAt(CycleView& cycle, std::size_t i) noexcept
      HOLDBACK_REQUIRES(mu_);
  // Serves domain band `i`: true when the cycle ends there (a dispatch, a yield to another
  // replica, too many dead heads), false to go on to the next band.
  [[gnu::always_inline]] bool serveBand(CycleView& cycle, std::size_t i) noexcept
      HOLDBACK_REQUIRES(mu_);
  // Dispatches `head`, domain band `i`'s pick: its lease (when kept), its outcome.
  [[gnu::always_inline]] void dispatchHead(CycleView& cycle, std::size_t i, Item* head) noexcept
      HOLDBACK_REQUIRES(mu_);
  [[gnu::always_inline]] void finishCycle(CycleView& cycle) noexcept HOLDBACK_EXCLUDES(mu_);
  std::size_t expireImpl(TimePoint now, const PressureSample* pressure) noexcept
      HOLDBACK_EXCLUDES(mu_);
  void applyPressure(TimePoint now, const PressureSample& pressure, bool with_saturation) noexcept
      HOLDBACK_REQUIRES(mu_);
  // The last sample's room per domain band (NaN where the sample had none); empty when it had
  // none at all.
  [[nodiscard]] std::span<const BandRoom> roomView() noexcept HOLDBACK_REQUIRES(mu_);
  // Declares each domain band's protected and own footprint to the sampler (from `demand`,
  // aligned with the domain), so the next samples compute their room.
  void declareFootprints(std::span<const BandDemand> demand) noexcept HOLDBACK_REQUIRES(mu_);
  // Why a queued request is dead at `now`, if it is: too large for every endpoint (`largestKv`),
  // else deadOutcome(). Pure: the dispatch cycle and the expiry sweep pass the state they read.
  [[nodiscard]] static std::optional<Outcome> deadOutcomeOf(const Item& item, TimePoint now,
                                                            std::int64_t largestKv,
                                                            Duration noEndpointTtl,
                                                            const PoolRegime& regime) noexcept {
    if (exceedsEveryEndpoint(item.kvTokens, largestKv)) {
      return Outcome{QueueOutcome::kEvictedOther, OutcomeCause::kTooLarge};
    }
    return detail::deadOutcomeAt(item.deadline(), item.enqueueTime, item.effectiveTtl,
                                 noEndpointTtl, regime, now);
  }
  void deliver(Completion&& c) const noexcept;
  // Capacity in the cycle's scratch for `bands` bands (the cycle grows it when the table did).
  void reserveScratch(std::size_t bands) HOLDBACK_REQUIRES(mu_);
  [[nodiscard]] bool demandOn() const noexcept HOLDBACK_REQUIRES(mu_) {
    return settings_.policy != nullptr && settings_.policy->usesDemand();
  }
  // The demand figures are measured for the policy or for reserve restoration.
  [[nodiscard]] bool measuresDemand() const noexcept HOLDBACK_REQUIRES(mu_) {
    return demandOn() || (settings_.eviction.enabled && settings_.eviction.restoreReserve.enabled);
  }
  [[nodiscard]] bool leasesOn() const noexcept HOLDBACK_REQUIRES(mu_) {
    return demandOn() || settings_.eviction.enabled;
  }
  // The evictor's view of the cycle: the domain bands and their ceilings as dispatchImpl left
  // them, at saturation `s`.
  [[nodiscard]] Evictor::Cycle evictionCycle(TimePoint now, double s) noexcept
      HOLDBACK_REQUIRES(mu_) {
    return {settings_.eviction,
            leases_,
            demand_,
            domain_bands_,
            ceilings_,
            now,
            s,
            &sampler_,
            &replicas_,
            &replicas_.published()};
  }
  // Create-only: read without a lock.
  const std::function<void(Completion&&)> on_outcome_;
  const std::function<TimePoint()> clock_;
  const std::function<void(const Revocation&)> evict_;
  const Duration flow_idle_timeout_;
  const Duration band_idle_timeout_;

  // Its own locks. Under mu_ only copyEndpointRoom (a small mutex never held while host code
  // runs; lock order mu_ -> the sampler's room mutex); sample() never under mu_.
  PoolPressureSampler sampler_;
  std::atomic<RequestId> next_id_{1};

  mutable Mutex mu_;
  Settings settings_ HOLDBACK_GUARDED_BY(mu_);
  BandTable table_ HOLDBACK_GUARDED_BY(mu_);
  PoolRegime regime_ HOLDBACK_GUARDED_BY(mu_);
  // PoolPressure::largestKvCapacityTokens of the last sample (0: unknown, nothing is too large).
  std::int64_t largest_kv_ HOLDBACK_GUARDED_BY(mu_) = 0;
  bool stopped_ HOLDBACK_GUARDED_BY(mu_) = false;
  double last_saturation_ HOLDBACK_GUARDED_BY(mu_) = 0.0;
  // The bands' room of the last sample, and its view aligned with the domain (policies that read
  // DemandView::room); the footprints declared to the sampler for the next ones.
  std::array<BandRoomEntry, PoolPressure::kMaxRoomBands> last_room_ HOLDBACK_GUARDED_BY(mu_){};
  std::size_t last_room_bands_ HOLDBACK_GUARDED_BY(mu_) = 0;
  std::vector<BandRoom> room_view_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<BandFootprint> footprints_ HOLDBACK_GUARDED_BY(mu_);
  std::optional<double> last_prefill_ HOLDBACK_GUARDED_BY(mu_);
  std::optional<double> last_decode_ HOLDBACK_GUARDED_BY(mu_);
  std::uint64_t cycles_ HOLDBACK_GUARDED_BY(mu_) = 0;
  // The last sample found every endpoint stale; cycles gated while it did.
  bool last_all_stale_ HOLDBACK_GUARDED_BY(mu_) = false;
  std::uint64_t stale_gated_cycles_ HOLDBACK_GUARDED_BY(mu_) = 0;
  std::uint64_t yielded_cycles_ HOLDBACK_GUARDED_BY(mu_) = 0;  // cycles left to an older peer head
  // The cycle's scratch (capacity for every band: no allocation in steady state).
  std::vector<Band*> domain_bands_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<Priority> domain_priorities_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<double> ceilings_ HOLDBACK_GUARDED_BY(mu_);
  // The bands the scratch has room for (reserveScratch).
  std::size_t scratch_bands_ HOLDBACK_GUARDED_BY(mu_) = 0;
  // Leases (while the policy reads demand or eviction is on): the tracker's slots are its bands.
  LeaseTable leases_ HOLDBACK_GUARDED_BY(mu_);
  DemandTracker demand_ HOLDBACK_GUARDED_BY(mu_);
  Evictor evictor_ HOLDBACK_GUARDED_BY(mu_);
  // The coordination with the other replicas (setReplicaShare): the share, the turn, the figures
  // published; the evictor reads it through its cycle.
  ReplicaCoordinator replicas_ HOLDBACK_GUARDED_BY(mu_);
  BandScheduler scheduler_ HOLDBACK_GUARDED_BY(mu_);  // the order of the cycle's bands
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
