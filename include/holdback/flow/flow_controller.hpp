// FlowController: priority bands, per-flow queues, capacity, TTL expiry, cancellation and the
// dispatch cycle with head-of-line blocking. The component a gateway embeds between "a request
// arrived" and "send it to a model server".
//
// The algorithm
//   Requests go in through enqueue() from any thread. Each carries a flow id, a priority, a size
//   in bytes, an optional TTL and deadline and an opaque host payload. enqueue() resolves the
//   priority band (declared in options, provisioned on first use from a template, or priority 0
//   as fallback), checks the four capacity limits of upstream-reference.md §3.6 (global and band,
//   requests and bytes; reaching a limit exactly is allowed), and adds the request to its flow's
//   queue, ordered by the band's OrderingPolicy with the arrival sequence as tie-break.
//
//   dispatchCycle(now), one decision:
//     1. pool = endpointSource.endpoints(now); track the pool regime (empty / non-empty, since);
//     2. s = stage-aware saturation of the pool (StageSaturationEvaluator, §3.2);
//     3. priorities = every band (priorityDomain kProvisioned) or every band with queued work or
//        an arrival within activityWindow (kActive), highest first; ceilings = reused buffer
//        pre-filled with 1.0; policy.computeLimit(s, priorities, ceilings) exactly once;
//     4. nothing queued anywhere -> kNothingQueued;
//     5. for each band i, highest first: if isGated(s, ceilings[i]) -> stop, kGated at this
//        priority (checked before the band's items are looked at, so an empty gated band also
//        stops the cycle: lower work never overtakes a gated higher band). Empty bands are
//        skipped. Otherwise the band's FairnessPolicy picks a flow and its head is taken; a head
//        whose TTL budget or caller deadline has already run out is evicted (kEvictedTtl /
//        kEvictedNoEndpoints) and the band is asked again, so a dead request never costs the
//        cycle its dispatch (up to 32 dead heads per cycle; past that the cycle ends);
//     6. at most one request is dispatched per cycle (kDispatched).
//   Its cost is O(bands + log flows-in-band + log queue-length): bands keep an index of their
//   non-empty flows, so idle flows and queued requests are never scanned. It does not allocate
//   in steady state, never throws, and survives NaN/inf saturation (isGated gates on NaN).
//
//   expire(now) runs the regime-aware TTL sweep of §3.7 (see isExpired()) plus caller deadlines,
//   then garbage-collects idle flows and idle, undesired, dynamically provisioned bands.
//   cancel() removes a request from its queue at once (no zombies: a cancelled request never
//   holds capacity and is never dispatched). shutdown() finalizes every queued request
//   kEvictedOther and rejects later ones kRejectedOther (cause kNotRunning).
//
//   Every request ends with exactly one outcome, delivered exactly once through
//   options.onOutcome. Requests are finalized under the lock (removed from every index, counted)
//   and their callbacks run after every library lock is released, on the thread whose call
//   finalized them (enqueue for rejections, dispatchCycle, expire, cancel, shutdown).
//
// Locking
//   Two mutexes, always taken in this order: cycle_mu serializes dispatchCycle, expire and
//   shutdown and guards the saturation evaluator's scratch buffers; mu guards the bands, flows,
//   queues, counters, the request index and the reused priority/ceiling buffers. A cycle holds
//   its completions (at most 32 evicted dead heads plus the dispatch) in a stack array. The
//   endpoint source and the detector are called under cycle_mu only (they are host code; calling
//   enqueue from them would still not deadlock); the policy, fairness and ordering policies are
//   called under mu. Outcome callbacks run with no library lock held, so they may call back into
//   the controller. The optional runner thread only calls the public methods.
//
// Thread safety: thread-safe (every public method may be called from any thread).
#pragma once

#include "holdback/abi.hpp"

#include <any>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/core/types.hpp"
#include "holdback/flow/outcome.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// The two pure rules, exposed for hosts and tests.

// Capacity of one scope (global or band). A max of 0 means "no limit".
struct CapacityUsage {
  std::uint64_t maxBytes = 0;
  std::uint64_t usedBytes = 0;
  std::uint64_t maxRequests = 0;
  std::uint64_t usedRequests = 0;
};

// §3.6: admit iff neither limit of the global scope nor of the band would be exceeded by one more
// request of `itemBytes` (reaching a limit exactly is allowed; 0 = unlimited). `band == nullptr`
// (band absent) denies. Overflow-safe for any values.
[[nodiscard]] HOLDBACK_API bool hasCapacity(std::uint64_t itemBytes, const CapacityUsage& global,
                                            const CapacityUsage* band) noexcept;

// The pool regime: whether the endpoint source last returned an empty pool, and since when. The
// initial regime is {non-empty, since TimePoint::min()} ("always"; the reference uses Go's zero
// time, which precedes every real time: a host clock with any epoch must behave the same).
struct PoolRegime {
  bool empty = false;
  TimePoint since = TimePoint::min();
};

struct ExpiryVerdict {
  bool expired = false;
  // kEvictedTtl (non-empty regime) or kEvictedNoEndpoints (empty regime).
  QueueOutcome outcome = QueueOutcome::kEvictedTtl;
};

// §3.7: budget = effectiveTtl (non-empty regime) or noEndpointTtl (empty regime); a budget <= 0
// never expires; chargeFrom = max(enqueueTime, regime.since); expired iff now >= chargeFrom +
// budget (inclusive). Each regime change starts a fresh budget; a change before the request
// arrived does not extend it.
[[nodiscard]] HOLDBACK_API ExpiryVerdict isExpired(TimePoint enqueueTime, Duration effectiveTtl,
                                                   Duration noEndpointTtl, PoolRegime regime,
                                                   TimePoint now) noexcept;

// ---------------------------------------------------------------------------------------------
// Host interfaces

// EndpointSource (where the controller reads the pool from) is in holdback/core/endpoint.hpp.

// A request handed to enqueue().
struct FlowRequest {
  // The fairness key; must not be empty (an empty id is kRejectedOther / kInvalidRequest).
  std::string flowId;
  Priority priority = 0;
  std::uint64_t sizeBytes = 0;
  // Saturation-regime queue budget; nullopt or <= 0 means options.defaultRequestTtl.
  std::optional<Duration> ttl;
  // The caller's deadline: clamps the budget, and the request is evicted kEvictedTtl when it
  // passes whatever the regime (a client deadline counts as TTL expiry, as in the reference).
  std::optional<TimePoint> deadline;
  // Opaque to the library; handed back with the outcome.
  std::any payload;
};

// What the outcome callback receives (moved in).
struct Completion {
  RequestId id = 0;
  std::string flowId;
  Priority requestedPriority = 0;
  // The band the request was (or would have been) queued in.
  Priority bandPriority = 0;
  std::uint64_t sizeBytes = 0;
  Outcome outcome;
  TimePoint enqueueTime{};
  // When the outcome was decided (the `now` of the call that finalized it).
  TimePoint finalizedAt{};
  std::any payload;
};

// ---------------------------------------------------------------------------------------------
// Options

struct BandTemplate {
  // 0 means the default (per-band limits are always bounded, as in the reference §3.10).
  std::uint64_t maxRequests = 5000;
  std::uint64_t maxBytes = 1'000'000'000;
  // nullptr means global-strict / fcfs.
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
};

struct BandOptions {
  Priority priority = 0;
  std::uint64_t maxRequests = 5000;
  std::uint64_t maxBytes = 1'000'000'000;
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
};

enum class PriorityDomain {
  // Every existing band is shown to the policy: a reserve is held for high priorities even while
  // they are idle (the reference's behaviour).
  kProvisioned,
  // Only bands with queued work or an arrival within activityWindow: fully work-conserving; a
  // lone active priority gets the policy's single-band ceiling.
  kActive,
};

struct RunnerOptions {
  // Start a thread that calls dispatchCycle on every arrival and every tickInterval, and expire
  // every expiryInterval, until shutdown().
  bool enabled = false;
  Duration tickInterval = std::chrono::milliseconds(1);
};

struct FlowControllerOptions {
  // Required collaborators.
  std::shared_ptr<UsageLimitPolicy> policy;
  std::shared_ptr<const SaturationDetector> detector;
  std::shared_ptr<EndpointSource> endpoints;
  std::function<void(Completion&&)> onOutcome;

  // Bands declared up front ("initial": never removed). Priority 0 always exists (from
  // defaultBand unless declared).
  std::vector<BandOptions> bands;
  BandTemplate defaultBand;
  // Template for priorities < 0; nullopt = defaultBand.
  std::optional<BandTemplate> defaultNegativeBand;
  // A request for a priority without a band provisions one from the template (true) or is queued
  // in band 0 (false, the reference's NEW behaviour). Also band 0 once maxBands bands exist.
  bool provisionOnFirstUse = true;
  std::size_t maxBands = 64;

  // Global limits, 0 = unlimited.
  std::uint64_t maxRequests = 0;
  std::uint64_t maxBytes = 0;

  // TTLs (§3.7): unset default = 60 s; unset noEndpoint = follows default; 0 = never expire.
  std::optional<Duration> defaultRequestTtl;
  std::optional<Duration> noEndpointRequestTtl;
  Duration expiryInterval = std::chrono::seconds(1);

  PriorityDomain priorityDomain = PriorityDomain::kProvisioned;
  Duration activityWindow = std::chrono::seconds(1);

  // expire() removes empty flows idle this long, and dynamically provisioned, undesired, empty
  // bands idle this long.
  Duration flowIdleTimeout = std::chrono::minutes(5);
  Duration bandIdleTimeout = std::chrono::minutes(10);

  // The clock for enqueue(request) without `now` and for the runner; default steady_clock::now.
  std::function<TimePoint()> clock;
  RunnerOptions runner;
};

// ---------------------------------------------------------------------------------------------
// Results and stats

struct DispatchResult {
  enum class Kind {
    kDispatched,     // one request dispatched from band `priority`
    kGated,          // the cycle stopped at the gated band `priority`
    kNothingQueued,  // no band had an eligible request
    kStopped,        // the controller is shut down
  };
  Kind kind = Kind::kNothingQueued;
  Priority priority = 0;
  RequestId id = 0;  // kDispatched only
  double saturation = 0.0;
  // Requests found dead at the head of a band (expired) and evicted during this cycle.
  std::size_t evicted = 0;
};

// "dispatched", "gated", "nothing-queued", "stopped".
[[nodiscard]] HOLDBACK_API std::string_view toString(DispatchResult::Kind kind) noexcept;

// Upper bounds (seconds) of the queue-wait histogram buckets; a final +Inf bucket follows.
inline constexpr std::array<double, 14> kQueueDurationBucketsSeconds{
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};

struct BandStats {
  Priority priority = 0;
  // False for a priority whose band was removed (its counters are kept).
  bool provisioned = true;
  std::size_t queuedRequests = 0;
  std::uint64_t queuedBytes = 0;
  std::uint64_t maxRequests = 0;
  std::uint64_t maxBytes = 0;
  std::size_t flows = 0;
  std::size_t activeFlows = 0;
  // The ceiling of the last cycle; nullopt when the band was not in the policy's domain.
  std::optional<double> lastCeiling;
  std::uint64_t gatedCycles = 0;
  // Outcomes of requests placed in this band, indexed by QueueOutcome.
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};
  // Queue wait of the requests dispatched from this band: per-bucket (not cumulative) counts,
  // bucket i counting waits in (bound[i-1], bound[i]], the last one above every bound; and the
  // sum of the waits. The count is outcomes[kDispatched].
  std::array<std::uint64_t, kQueueDurationBucketsSeconds.size() + 1> queueDurationBuckets{};
  double queueDurationSumSeconds = 0.0;
};

struct FlowControllerStats {
  std::vector<BandStats> bands;  // highest priority first
  std::size_t queuedRequests = 0;
  std::uint64_t queuedBytes = 0;
  std::uint64_t maxRequests = 0;  // global, 0 = unlimited
  std::uint64_t maxBytes = 0;
  double lastSaturation = 0.0;
  std::optional<double> lastPrefillSaturation;
  std::optional<double> lastDecodeSaturation;
  bool poolEmpty = false;
  std::uint64_t cycles = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};
  bool stopped = false;
};

// renderPrometheus(stats) is in holdback/metrics/prometheus.hpp.

// ---------------------------------------------------------------------------------------------

class FlowController;

// A move-only handle to one enqueued request. Destroying it does not cancel the request.
// Thread safety: thread-compatible (one owner; cancel() itself is safe against the controller's
// other threads, and a no-op once the controller is gone).
class HOLDBACK_API Ticket {
 public:
  Ticket() = default;
  // A moved-from ticket is empty (valid() == false).
  Ticket(Ticket&& other) noexcept
      : core_(std::move(other.core_)), id_(std::exchange(other.id_, 0)) {}
  Ticket& operator=(Ticket&& other) noexcept {
    core_ = std::move(other.core_);
    id_ = std::exchange(other.id_, 0);
    return *this;
  }
  ~Ticket() = default;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

  [[nodiscard]] RequestId id() const noexcept { return id_; }
  [[nodiscard]] bool valid() const noexcept { return id_ != 0; }
  // Removes the request from its queue and finalizes it kEvictedCancelled. False when it already
  // has an outcome (dispatched, rejected, evicted) or the controller is gone.
  bool cancel() noexcept;

 private:
  friend class FlowController;
  struct Core;
  Ticket(std::weak_ptr<Core> core, RequestId id) : core_(std::move(core)), id_(id) {}
  std::weak_ptr<Core> core_;
  RequestId id_ = 0;
};

// Thread safety: thread-safe.
class HOLDBACK_API FlowController {
 public:
  // Validates the options (every problem, with its path) and builds the controller; starts the
  // runner thread when options.runner.enabled.
  static Result<std::unique_ptr<FlowController>> create(FlowControllerOptions options);
  static void validate(const FlowControllerOptions& options, Diagnostics& diagnostics);

  // Shuts down (see shutdown()).
  ~FlowController();
  FlowController(const FlowController&) = delete;
  FlowController& operator=(const FlowController&) = delete;

  // Queues a request (or rejects it, in which case the outcome callback has run by the time this
  // returns). `now` is the logical arrival time.
  Ticket enqueue(FlowRequest request, TimePoint now) noexcept;
  Ticket enqueue(FlowRequest request) noexcept;

  // Same as Ticket::cancel.
  bool cancel(RequestId id) noexcept;

  // One dispatch decision; see the file comment.
  DispatchResult dispatchCycle(TimePoint now) noexcept;

  // The TTL sweep plus flow/band GC. Returns the number of requests evicted.
  std::size_t expire(TimePoint now) noexcept;

  // The priorities the control plane wants (InferenceObjectives): missing bands are provisioned
  // from the templates (even beyond maxBands) and protected; idle bands that are neither initial
  // nor desired are removed now. Replaces the previous set.
  void setDesiredPriorities(std::span<const Priority> priorities) noexcept;

  // Hot reload. Validates `options` like create() and, only when valid, swaps in atomically with
  // respect to every other call:
  // policy, detector, bands, defaultBand, defaultNegativeBand, provisionOnFirstUse, maxBands,
  // maxRequests, maxBytes, defaultRequestTtl, noEndpointRequestTtl, priorityDomain and
  // activityWindow. Always kept from create() (whatever `options` holds): endpoints, onOutcome,
  // clock, runner,
  // expiryInterval, flowIdleTimeout, bandIdleTimeout. No queued request is lost or finalized:
  //   - a declared band that exists gets the new limits (queued requests above a lowered limit
  //     stay; only new arrivals see it) and, when its fairness or ordering policy changes, is
  //     rebuilt with every queued request moved over in the new order (fairness state restarts);
  //   - a declared band that does not exist is created;
  //   - a band no longer declared (other than 0) stops being initial: it keeps its queue and
  //     settings and is removed by expire()'s band GC (or setDesiredPriorities) once it is empty,
  //     idle and not desired, like a dynamically provisioned band;
  //   - band 0, when not declared, takes the new defaultBand template.
  // Requests already queued keep the TTL budget computed at enqueue; the new noEndpointRequestTtl
  // applies to them at once. On failure nothing changes and the errors are returned. Allocates.
  Diagnostics reconfigure(FlowControllerOptions options) noexcept;

  // Stops the runner (joins it), finalizes every queued request kEvictedOther (kNotRunning) and
  // makes later enqueues kRejectedOther. Idempotent; `now` stamps the completions.
  void shutdown(TimePoint now) noexcept;
  void shutdown() noexcept;

  [[nodiscard]] FlowControllerStats stats() const;
  // Priorities of the existing bands, highest first.
  [[nodiscard]] std::vector<Priority> bandPriorities() const;
  [[nodiscard]] PoolRegime poolRegime() const noexcept;

 private:
  explicit FlowController(std::shared_ptr<Ticket::Core> core);
  std::shared_ptr<Ticket::Core> core_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/flow_controller-inl.hpp"
#endif
