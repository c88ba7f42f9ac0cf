// detail::ControllerCore: the state behind a FlowController and its Tickets. Internal.
//
// Components
//   - PoolPressureSampler (flow/pool_pressure.hpp): calls the host's endpoint source and detector,
//     under its own mutex and under no controller lock;
//   - BandTable (flow/detail/band_table.hpp): bands, flows, queues, the request index, counters;
//   - the reloadable settings (policy, global limits, TTLs, priority domain);
//   - the pool regime, the last pressure, the cycle's scratch buffers.
//
// Locking
//   One mutex, mu_, guards the table, the settings and the regime (HOLDBACK_GUARDED_BY). Under
//   mu_ run only the library's own bookkeeping plus three host-pluggable pieces of pure
//   computation: UsageLimitPolicy::computeLimit (once per cycle), FairnessPolicy::pick and the
//   OrderingPolicy comparators. They must be O(bands) / O(log n), must not block and must not
//   call the controller. Never under mu_: the endpoint source, the detector (the sampler runs
//   before mu_ is taken), the clock (read before mu_), the outcome callback (completions are
//   collected under mu_ and delivered after it is released) and, in steady state, heap
//   allocation for a request: its memory comes from the table's bounded pool under mu_ (a heap
//   allocation only while the queues grow past the pool) and memory the pool does not keep is
//   freed after mu_ is released (Retired). Create-only collaborators (endpoints, onOutcome,
//   clock, timings) are const members, read without a lock.
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
#include <type_traits>
#include <vector>

#include "holdback/core/thread_annotations.hpp"
#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/lease_table.hpp"
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
  Entry& add() noexcept { return *::new (&storage_[size_++]) Entry(); }
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
  DispatchResult dispatchCycle(TimePoint now) noexcept HOLDBACK_EXCLUDES(mu_);
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
  };
  // A revocation issued and not yet confirmed, and a confirmed one within its grace.
  struct Outstanding {
    RequestId id = 0;
    TimePoint issuedAt{};
    double credit = 0.0;
  };
  struct Cooling {
    TimePoint expiresAt{};
    double credit = 0.0;
  };
  // A victim candidate with its credit (saturation units it frees).
  struct Candidate {
    EvictionCandidate lease;
    double credit = 0.0;
  };
  // One band priority's demand: its estimator, the arrivals since the last update. Slot i is
  // band i of leases_. Slots are added when a priority is first seen and kept (a priority that
  // comes back reuses its slot), so their number is bounded by the distinct priorities used.
  struct DemandSlot {
    Priority prio = 0;
    DemandEstimator estimator;
    double arrivals = 0.0;
  };
  static Settings settingsOf(FlowControllerOptions& options);
  static BandTopology topologyOf(FlowControllerOptions& options);

  // `pressure == nullptr`: the last one (a re-entrant call from the host's sampler code).
  DispatchResult dispatchImpl(TimePoint now, const PoolPressure* pressure) noexcept
      HOLDBACK_EXCLUDES(mu_);
  std::size_t expireImpl(TimePoint now, const PoolPressure* pressure) noexcept
      HOLDBACK_EXCLUDES(mu_);
  void applyPressure(TimePoint now, const PoolPressure& pressure, bool with_saturation) noexcept
      HOLDBACK_REQUIRES(mu_);
  [[nodiscard]] std::optional<Outcome> deadOutcomeOf(const Item& item, TimePoint now) const noexcept
      HOLDBACK_REQUIRES(mu_);
  void deliver(Completion&& c) const noexcept;
  [[nodiscard]] bool demandOn() const noexcept HOLDBACK_REQUIRES(mu_) {
    return settings_.policy != nullptr && settings_.policy->usesDemand();
  }
  // The demand figures are measured for the policy or for reserve restoration.
  [[nodiscard]] bool measuresDemand() const noexcept HOLDBACK_REQUIRES(mu_) {
    return demandOn() || (settings_.eviction.enabled && settings_.eviction.restoreReserve.enabled);
  }
  // The band's demand slot (adds one, allocating, when its priority is new).
  std::uint32_t demandSlotOf(Band* band) HOLDBACK_REQUIRES(mu_);
  // Folds the counts since the last update into the estimators; fills demand_view_ for the
  // cycle's domain_bands_.
  void updateDemand(TimePoint now) noexcept HOLDBACK_REQUIRES(mu_);
  void reapLeases(TimePoint now) noexcept HOLDBACK_REQUIRES(mu_);
  [[nodiscard]] bool leasesOn() const noexcept HOLDBACK_REQUIRES(mu_) {
    return demandOn() || settings_.eviction.enabled;
  }
  // Eviction (flow/eviction.hpp). reclaim: the HoL block at domain band `gated`.
  void reclaim(TimePoint now, double s, std::size_t gated, RevocationBatch& out) noexcept
      HOLDBACK_REQUIRES(mu_);
  // A revocation's lead time in seconds: `configured` when > 0, else the measured mean
  // issue-to-confirmation latency (0 before the first) + confirmationGrace.
  [[nodiscard]] double leadSeconds(Duration configured) const noexcept HOLDBACK_REQUIRES(mu_);
  // Reserve restoration (EvictionOptions::restoreReserve): any cycle, before a block.
  void restoreReserve(TimePoint now, double s, RevocationBatch& out) noexcept
      HOLDBACK_REQUIRES(mu_);
  // The protected arrival rate restoration sizes for: `lambda`, or the decayed peak of the
  // earlier ones when burstMemory is on (and larger); updates the peak.
  double rememberBurst(TimePoint now, double lambda) noexcept HOLDBACK_REQUIRES(mu_);
  // Fills candidates_ (leases strictly below `demandPrio` the filter accepts) with their credits;
  // false when there is none (or the credit is not finite).
  bool gatherCandidates(Priority demandPrio, double s, bool& byFootprint,
                        double& totalFootprint) noexcept HOLDBACK_REQUIRES(mu_);
  // Revokes `need` candidates (by footprint: enough to cover `net`), at most the cap.
  void issueRevocations(TimePoint now, Priority demandPrio, std::size_t need, double net,
                        bool byFootprint, bool restored, RevocationBatch& out) noexcept
      HOLDBACK_REQUIRES(mu_);
  // Retires timed-out outstanding revocations and expired cooling debits.
  void retireRevocations(TimePoint now) noexcept HOLDBACK_REQUIRES(mu_);
  // Moves outstanding revocation `i` to cooling (confirmed or timed out).
  void endOutstanding(std::size_t i, TimePoint now, bool timedOut) noexcept HOLDBACK_REQUIRES(mu_);
  // The chance (0..1) that a lease of age `age` in a band holding `hold` seconds on average
  // ends on its own within `horizon` seconds (wait-vs-evict); 0 when `hold` is not measured.
  [[nodiscard]] static double releaseChance(double hold, double age, double horizon) noexcept;
  void issuedFor(Priority victim) HOLDBACK_REQUIRES(mu_);
  // Appends band `band`'s revocable leases the filter accepts (when `below`: the band is under
  // the demand) and sums every lease's footprint (footprintsKnown: none is 0).
  static void collectCandidates(const LeaseTable& leases, std::uint32_t band, bool below,
                                const EvictionFilter& filter, std::vector<Candidate>& out,
                                double& totalFootprint, bool& footprintsKnown);
  void deliverRevocations(const RevocationBatch& batch) const noexcept;

  // Create-only: read without a lock.
  const std::function<void(Completion&&)> on_outcome_;
  const std::function<TimePoint()> clock_;
  const std::function<void(const Revocation&)> evict_;
  const Duration flow_idle_timeout_;
  const Duration band_idle_timeout_;

  PoolPressureSampler sampler_;  // its own locks; never called under mu_
  std::atomic<RequestId> next_id_{1};

  mutable Mutex mu_;
  Settings settings_ HOLDBACK_GUARDED_BY(mu_);
  BandTable table_ HOLDBACK_GUARDED_BY(mu_);
  PoolRegime regime_ HOLDBACK_GUARDED_BY(mu_);
  bool stopped_ HOLDBACK_GUARDED_BY(mu_) = false;
  double last_saturation_ HOLDBACK_GUARDED_BY(mu_) = 0.0;
  std::optional<double> last_prefill_ HOLDBACK_GUARDED_BY(mu_);
  std::optional<double> last_decode_ HOLDBACK_GUARDED_BY(mu_);
  std::uint64_t cycles_ HOLDBACK_GUARDED_BY(mu_) = 0;
  // The cycle's scratch (capacity for every band: no allocation in steady state).
  std::vector<Band*> domain_bands_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<Priority> domain_priorities_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<double> ceilings_ HOLDBACK_GUARDED_BY(mu_);
  // Demand (only while the policy reads it).
  LeaseTable leases_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<DemandSlot> demand_slots_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<BandDemand> demand_view_ HOLDBACK_GUARDED_BY(mu_);
  std::optional<TimePoint> last_demand_update_ HOLDBACK_GUARDED_BY(mu_);
  // Eviction: pacing state, counters, the victims' scratch.
  std::vector<Outstanding> outstanding_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<Cooling> cooling_ HOLDBACK_GUARDED_BY(mu_);
  double pending_reclaim_ HOLDBACK_GUARDED_BY(mu_) = 0.0;
  // Reserve restoration's burst memory: the highest protected arrival rate and when it was seen.
  double restore_peak_rate_ HOLDBACK_GUARDED_BY(mu_) = 0.0;
  TimePoint restore_peak_time_ HOLDBACK_GUARDED_BY(mu_){};
  EvictionStats eviction_stats_ HOLDBACK_GUARDED_BY(mu_);
  std::vector<Candidate> candidates_ HOLDBACK_GUARDED_BY(mu_);
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
