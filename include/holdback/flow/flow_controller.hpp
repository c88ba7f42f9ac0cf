// FlowController: priority bands, per-flow queues, capacity, TTL expiry, cancellation and the
// dispatch cycle with head-of-line blocking. The component a gateway embeds between "a request
// arrived" and "send it to a model server".
//
// The algorithm
//   Requests go in through enqueue() from any thread. Each carries a flow id, a priority, a size
//   in bytes, an optional TTL and deadline and an opaque host payload. enqueue() resolves the
//   priority band (declared in options, provisioned on first use from a template, or priority 0
//   as fallback), checks the four capacity limits of the Go reference's enqueue (llm-d-router's
//   pkg/epp/flowcontrol/controller/internal/processor.go, https://github.com/llm-d/llm-d-router:
//   global and band, requests and bytes; reaching a limit exactly is allowed), and adds the request
//   to its flow's queue, ordered by the band's OrderingPolicy with the arrival sequence as
//   tie-break.
//
//   dispatchCycle(now), one decision (steps 1-2 sample the pool under no controller lock; 3-6 are
//   dispatch(now, pressure), under the lock):
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
//   Step 5 visits the bands highest first (strict priority) unless options.bandScheduling is
//   weighted-fair and s >= its activationThreshold: then the non-empty bands above the first
//   gated one are tried in weighted-fair order first (flow/band_scheduling.hpp: the weights,
//   the starvation bound); the gate check and its stop are unchanged.
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
//   Demand (only when the policy's usesDemand() is true; otherwise none of this runs or costs):
//   a dispatched request holds a lease (flow/detail/lease_table.hpp, under mu, O(1), no allocation
//   in steady state) until the host calls release(id, now) when it ends; expire() drops leases
//   older than options.leaseTimeout (default 10 min), so a host that never releases does not grow
//   memory, and its bands' in-flight figures recover after that long. Per band, one
//   DemandEstimator (policy/demand.hpp, constants from policy->demandSmoothing()) folds arrivals
//   (accepted enqueues), in flight (leases), queued requests and holding times (release) into a
//   BandDemand, once per dispatch at step 3 with dt since the previous update. The policy gets
//   computeLimit(s, priorities, ceilings, DemandView{bands aligned with priorities, requestUnit =
//   s / total in flight, or NaN with nothing in flight}).
//
//   Every request ends with exactly one outcome, delivered exactly once through
//   options.onOutcome. Requests are finalized under the lock (removed from every index, counted)
//   and their callbacks run after every library lock is released, on the thread whose call
//   finalized them (enqueue for rejections, dispatchCycle, expire, cancel, shutdown).
//
// Locking
//   dispatchCycle(now) is `dispatch(now, sampler.sample(now))`: the pool's pressure (endpoint
//   source + detector, flow/pool_pressure.hpp) is sampled first, under the sampler's own mutex and
//   under no controller lock; then dispatch(now, pressure) decides under the controller's one
//   mutex, mu. expire(now) is `expire(now, sampler.samplePool(now))` the same way. mu guards the
//   bands, flows, queues, counters, the request index, the leases, the demand figures, the
//   eviction state, the settings and the regime (flow/detail/: band_table, demand_tracker,
//   evictor, controller_core); the annotations
//   (core/thread_annotations.hpp) are checked by clang -Wthread-safety in CI.
//
//   Host code and mu:
//     - never under mu: the endpoint source and the detector (sampled before), the clock (read
//       before), the outcome callback (completions are collected under mu and delivered after
//       it is released, on the thread whose call finalized them) and the allocation and release
//       of a request's memory;
//     - under mu: UsageLimitPolicy::computeLimit (once per cycle), FairnessPolicy::pick and the
//       OrderingPolicy comparators. They must be O(bands) / O(log n) computations that do not
//       block and do not call the controller.
//   So the outcome callback, the endpoint source and the detector may call every controller
//   method (enqueue, cancel, dispatchCycle, dispatch, expire, stats, reconfigure, shutdown,
//   setDesiredPriorities) without deadlock. A dispatchCycle/expire called from inside the
//   source or detector on the same thread does not sample again (it would recurse into the host):
//   it decides on the last pressure. shutdown(), reconfigure(), enqueue(), cancel() and stats()
//   never wait for a host call in progress; shutdown() only joins the runner thread (if any),
//   which finishes its current host call first.
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
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/admission.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/options.hpp"
#include "holdback/flow/outcome.hpp"
#include "holdback/flow/pool_pressure.hpp"
#include "holdback/flow/replica_port.hpp"
#include "holdback/flow/stats.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The pure rules (hasCapacity, isExpired, resolveRequestTtl) are in flow/admission.hpp, the
// options and defaults in flow/options.hpp, EndpointSource and PoolPressure in
// flow/pool_pressure.hpp, the stats in flow/stats.hpp, the runner in flow/runner.hpp, the
// replica port in flow/replica_port.hpp.

namespace detail {
class ControllerCore;
}  // namespace detail
class FlowControllerRunner;

// A request handed to enqueue().
struct FlowRequest {
  // The fairness key; must not be empty (an empty id is kRejectedOther / kInvalidRequest).
  std::string flowId;
  Priority priority = 0;
  std::uint64_t sizeBytes = 0;
  // The KV-cache tokens the request will hold on its server: input + expected output (e.g.
  // max_tokens, or the host's estimate). 0 = not declared. The controller learns each band's
  // mean footprint from it (BandDemand::footprintTokens), which sizes a reserve counted in
  // protected requests' footprints (reservation-holdback-policy, capacityModel: endpoints).
  // Negative counts as not declared.
  std::int64_t kvTokens = 0;
  // Saturation-regime queue budget; nullopt or <= 0 means none of its own. It can only shorten
  // the band's and options.defaultRequestTtl (the smallest set value wins: resolveRequestTtl).
  std::optional<Duration> ttl;
  // The caller's deadline: clamps the budget, and the request is evicted kEvictedTtl when it
  // passes whatever the regime (a client deadline counts as TTL expiry, as in the reference).
  std::optional<TimePoint> deadline;
  // When the host received the request (before parsing, routing, ...); unset = the enqueue
  // time. slo-deadline-ordering-policy orders by receivedTime + ttftObjective.
  std::optional<TimePoint> receivedTime;
  // The request's time-to-first-token objective (the gateway's x-llm-d-slo-ttft-ms header, see
  // SloDeadlineOrderingPolicy::parseTtftHeader); unset = none (sorts after every request with
  // one). Only ordering policies read it.
  std::optional<Duration> ttftObjective;
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

// renderPrometheus(stats) is in holdback/metrics/prometheus.hpp.

// ---------------------------------------------------------------------------------------------

class FlowController;

// A move-only handle to one enqueued request: its cancellation and, once it is dispatched, its
// lease (its release and the host's annotations). Destroying it does not cancel the request.
// FlowController::enqueue returns it; FlowController::ticket(id) makes one for an id the host
// holds (e.g. a Completion's, in the outcome callback: the outcome can be delivered on another
// thread before enqueue's ticket reaches its owner). Two tickets for one id are one request.
// Every method returns false (and does nothing) on an empty ticket or once the controller is gone.
// Thread safety: thread-compatible (one owner per ticket object); its methods are safe against
// the controller's other threads and against other tickets of the same request.
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

  // The lease of the dispatched request (kept while the policy reads demand or in-flight
  // eviction is on; flow/eviction.hpp). Each is O(1), allocation-free, never calls host code,
  // and returns false when no lease is held for the request: still queued, finalized without a
  // dispatch, already released, reaped after options.leaseTimeout, or dispatched while leases
  // were not kept.
  //
  // The request ended at `now` (its slot is free): ends its lease and feeds its holding time
  // into the band's demand. The release of a revoked lease is its confirmation: the revocation
  // stops being outstanding and cools for confirmationGrace (a lease whose revocation timed out
  // is already ended: false).
  bool release(TimePoint now) noexcept;
  // The host's token figures (footprint-aware eviction): the request's footprint (e.g. prompt +
  // generated, the KV it holds) and the tokens generated so far (the work lost if it is revoked).
  bool updateLease(std::uint64_t footprintTokens, std::uint64_t generatedTokens) noexcept;
  // The endpoint the host dispatched the request to: its position in the list the endpoint
  // source returns (what EndpointPicker::pick answered on that list). Reserve restoration then
  // revokes where a protected request waits or would fit after one revocation (flow/eviction.hpp,
  // "Restoration per endpoint"); a lease without one is chosen pool-wide. A position the pool
  // does not have when restoration decides (an endpoint removed since, or a bad value) counts as
  // unknown; a host whose list is reordered should report the new positions.
  bool setEndpoint(std::size_t endpoint) noexcept;
  // The host saw the request start on its server (the server took it into its batch, or its
  // first byte arrived). Restoration where a protected request waits (flow/eviction.hpp) then no
  // longer counts this lease as possibly waiting there: without it, any wait on the endpoint
  // while a young protected lease is held there reads as that request's (a batch request queued
  // behind is indistinguishable). Optional.
  bool markStarted() noexcept;
  // The host holds the dispatched request back from its server (true), e.g. while a replica's
  // booking is pending (the example gateway's --replica-mode reserve), or has sent it (false).
  // A parked lease is no in-flight eviction victim: revoking it would free no server's slot, so
  // restoration takes a request that runs instead. Set it from the outcome callback to be sure
  // no eviction decision sees the lease unparked first. Optional (default: not parked).
  bool setParked(bool parked) noexcept;

 private:
  friend class FlowController;
  Ticket(std::weak_ptr<detail::ControllerCore> core, RequestId id)
      : core_(std::move(core)), id_(id) {}
  std::weak_ptr<detail::ControllerCore> core_;
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

  // Same as Ticket::cancel and Ticket::release for request `id`.
  bool cancel(RequestId id) noexcept;
  bool release(RequestId id, TimePoint now) noexcept;

  // A ticket for request `id` (its lease annotations: Ticket::updateLease, setEndpoint,
  // markStarted), e.g. for a Completion's id in the outcome callback. Not checked: a ticket for
  // an unknown id answers false. O(1), no allocation.
  [[nodiscard]] Ticket ticket(RequestId id) const noexcept;
  // The replica coordination (ReplicaPort): what a host's replica exchange reads and installs.
  [[nodiscard]] ReplicaPort replicaPort() const noexcept;

  // One dispatch decision; see the file comment. Samples the pool (endpoint source + detector,
  // under no controller lock), then dispatch(now, pressure).
  DispatchResult dispatchCycle(TimePoint now) noexcept;
  // One dispatch decision on a pressure the caller sampled (a host or a simulator that reads the
  // pool itself). Updates the pool regime and the last saturation like dispatchCycle. Calls no
  // endpoint source or detector.
  DispatchResult dispatch(TimePoint now, const PoolPressure& pressure) noexcept;

  // The TTL sweep plus flow/band GC. Returns the number of requests evicted. Reads the pool's
  // emptiness from the endpoint source (under no controller lock), then expire(now, pressure).
  std::size_t expire(TimePoint now) noexcept;
  // The same on a caller-sampled pressure (only poolEmpty is read).
  std::size_t expire(TimePoint now, const PoolPressure& pressure) noexcept;

  // The priorities the control plane wants (InferenceObjectives): missing bands are provisioned
  // from the templates (even beyond maxBands) and protected; idle bands that are neither initial
  // nor desired are removed now. Replaces the previous set.
  void setDesiredPriorities(std::span<const Priority> priorities) noexcept;

  // Hot reload. Validates `options` like create() and, only when valid, swaps in atomically with
  // respect to every other call (the detector: from the next sample of the pool on):
  // policy, detector, bands, defaultBand, defaultNegativeBand, provisionOnFirstUse, maxBands,
  // maxRequests, maxBytes, defaultRequestTtl, noEndpointRequestTtl, priorityDomain,
  // activityWindow, leaseTimeout, eviction (but evict) and fairnessIdLabelLimit. Always kept from
  // create() (whatever `options` holds): endpoints, onOutcome, clock, runner, expiryInterval,
  // flowIdleTimeout, bandIdleTimeout. No queued request is lost or finalized:
  //   - a declared band that exists gets the new limits (queued requests above a lowered limit
  //     stay; only new arrivals see it) and, when its fairness or ordering policy changes, is
  //     rebuilt with every queued request moved over in the new order; a replaced fairness
  //     policy hands its state to its replacement first (FairnessPolicy::inheritState, under no
  //     controller lock, with the clock's now: program-aware fairness keeps attained service);
  //   - a declared band that does not exist is created;
  //   - a band no longer declared (other than 0) stops being initial: it keeps its queue and
  //     settings and is removed by expire()'s band GC (or setDesiredPriorities) once it is empty,
  //     idle and not desired, like a dynamically provisioned band;
  //   - band 0, when not declared, takes the new defaultBand template.
  // Requests already queued keep the TTL budget computed at enqueue; the new noEndpointRequestTtl
  // applies to them at once. On failure nothing changes and the errors are returned. Allocates.
  // Never waits for a host call in progress (endpoint source, detector).
  Diagnostics reconfigure(FlowControllerOptions options) noexcept;

  // Finalizes every queued request kEvictedOther (kNotRunning), makes later enqueues
  // kRejectedOther and later cycles kStopped, then stops the runner (joins it unless called from
  // the runner's thread). Idempotent; `now` stamps the completions. Never waits for the endpoint
  // source or detector (only for the runner's current iteration when there is a runner).
  void shutdown(TimePoint now) noexcept;
  void shutdown() noexcept;

  [[nodiscard]] FlowControllerStats stats() const;
  // Priorities of the existing bands, highest first.
  [[nodiscard]] std::vector<Priority> bandPriorities() const;
  [[nodiscard]] PoolRegime poolRegime() const noexcept;
  // The advisory band headroom (upstream's x-llm-d-flow-band-headroom-requests): the room left
  // in requests in the band a request of priority `requested` is placed in now (its own band, or
  // band 0 when it would be demoted there): maxRequests - queued, clamped at 0. nullopt when that
  // band does not exist yet (it would be provisioned). A shared reading: nothing is reserved,
  // and a byte limit can admit fewer. O(log bands) under the controller's lock; no allocation.
  [[nodiscard]] std::optional<BandHeadroom> bandHeadroom(Priority requested) const noexcept;

  // Deprecated (kept for one release; CHANGELOG.md), forwarding to the ticket and the port:
  // use ticket(id).updateLease, .setEndpoint, .markStarted and replicaPort().restoreFigures,
  // .setShare, .recordPeerArrival.
  bool updateLease(RequestId id, std::uint64_t footprintTokens,
                   std::uint64_t generatedTokens) noexcept;
  bool setLeaseEndpoint(RequestId id, std::size_t endpoint) noexcept;
  bool markLeaseStarted(RequestId id) noexcept;
  [[nodiscard]] ReplicaRestoreFigures replicaRestoreFigures() const noexcept;
  void setReplicaShare(const std::optional<ReplicaShare>& share) noexcept;
  void recordPeerArrival(Priority priority, std::int64_t kvTokens = 0) noexcept;

 private:
  FlowController();  // create() fills the members (no detail type in an exported signature)
  // Lock-free duration histograms (options.durationMetrics; null when disabled).
  struct DurationRecorder;
  std::shared_ptr<detail::ControllerCore> core_;
  std::unique_ptr<DurationRecorder> durations_;  // outlives the runner, which records into it
  std::unique_ptr<FlowControllerRunner> runner_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/admission-inl.hpp"
#include "holdback/flow/flow_controller-inl.hpp"
#include "holdback/flow/pool_pressure-inl.hpp"
#include "holdback/flow/replica_port-inl.hpp"
#include "holdback/flow/runner-inl.hpp"
#endif
