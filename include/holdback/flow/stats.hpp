// Snapshots of a FlowController's state and counters (FlowController::stats()), and the result
// of one dispatch decision.
//
// Thread safety: plain values (thread-compatible).
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/outcome.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

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
  // In-flight requests this cycle revoked (flow/eviction.hpp); their evict callbacks have run.
  std::size_t revoked = 0;
};

// "dispatched", "gated", "nothing-queued", "stopped".
[[nodiscard]] HOLDBACK_API std::string_view toString(DispatchResult::Kind kind) noexcept;

// Upper bounds (seconds) of the queue-wait histogram buckets; a final +Inf bucket follows.
inline constexpr std::array<double, 14> kQueueDurationBucketsSeconds{
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};

// Outcomes of requests whose requested priority differs from the band they were placed in.
struct RequestedPriorityOutcomes {
  Priority requestedPriority = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};  // indexed by QueueOutcome
};

// Distinct requested priorities whose outcomes are counted apart from their band's (per
// controller, the first seen; see BandStats::requestedOutcomes).
inline constexpr std::size_t kRequestedPriorityLabelLimit = 64;

// The `fairness_id` label value of the queue gauges' bucket for the flows beyond
// FlowControllerOptions::fairnessIdLabelLimit.
inline constexpr std::string_view kOtherFairnessIdLabel = "other";

// One flow's share of a band's queue (per-flow queue gauges).
struct FlowQueueStats {
  std::string flowId;
  std::size_t queuedRequests = 0;
  std::uint64_t queuedBytes = 0;
};

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
  // The part of `outcomes` whose requested priority was another one (a priority without a band,
  // queued or rejected in band 0, as the Go reference's EnqueueAndWait does), by requested priority
  // (ascending). At most kRequestedPriorityLabelLimit distinct (band, requested priority) pairs
  // are tracked per controller (the first seen, kept for its lifetime; only band 0 ever holds
  // such requests); the outcomes of the others are only in `outcomes` (counted in
  // FlowControllerStats::untrackedRequestedOutcomes). renderPrometheus labels
  // flow_control_requests_total with the requested priority from these.
  std::vector<RequestedPriorityOutcomes> requestedOutcomes;
  // Per-flow queue gauges (FlowControllerStats::fairnessIdLabelLimit > 0): the band's non-empty
  // flows whose id is among the `fairnessIdLabelLimit` ids with the most queued requests in the
  // whole controller (ties: more bytes, then the smaller id), by id; the rest of the band's queue
  // (other flows, and a flow whose id is kOtherFairnessIdLabel) in otherFlows*. The sums over
  // flowQueues plus otherFlows* are queuedRequests and queuedBytes.
  std::vector<FlowQueueStats> flowQueues;
  std::size_t otherFlowsQueuedRequests = 0;
  std::uint64_t otherFlowsQueuedBytes = 0;
  // Queue wait of the requests dispatched from this band: per-bucket (not cumulative) counts,
  // bucket i counting waits in (bound[i-1], bound[i]], the last one above every bound; and the
  // sum of the waits. The count is outcomes[kDispatched].
  std::array<std::uint64_t, kQueueDurationBucketsSeconds.size() + 1> queueDurationBuckets{};
  double queueDurationSumSeconds = 0.0;
};

// Upper bounds (seconds) of the revocation confirmation histogram; a final +Inf bucket follows.
inline constexpr std::array<double, 12> kRevocationConfirmationBucketsSeconds{
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};

// In-flight eviction and leases (flow/eviction.hpp).
struct EvictionStats {
  bool enabled = false;
  // Revocations issued, by the victim's priority (ascending priority).
  std::vector<std::pair<Priority, std::uint64_t>> issuedByPriority;
  std::uint64_t issued = 0;
  std::uint64_t confirmed = 0;
  std::uint64_t timedOut = 0;
  // Decisions where wait-vs-evict expected enough natural releases and revoked nothing (or less).
  std::uint64_t deferred = 0;
  // Revocations issued by reserve restoration (EvictionOptions::restoreReserve), included in
  // `issued`.
  std::uint64_t restored = 0;
  // Restoration decisions that revoked less than they sized because a budget
  // (ReserveRestoreOptions::evictionBudget, wasteBudget) was spent.
  std::uint64_t budgetWithheld = 0;
  // Saturation units: the last decision's target (s - ceiling) and the debits still pending.
  double reclaimTarget = 0.0;
  double pendingReclaim = 0.0;
  std::size_t outstanding = 0;  // revoked, not yet confirmed
  std::size_t cooling = 0;      // confirmed, within the grace
  // Leases: held now, and how the ended ones ended (indexed by LeaseEnd).
  std::size_t leases = 0;
  std::uint64_t leasesStarted = 0;
  std::array<std::uint64_t, 4> leaseEnds{};
  // Issue-to-confirmation latency of confirmed revocations: per-bucket (not cumulative) counts
  // and the sum; the count is `confirmed`.
  std::array<std::uint64_t, kRevocationConfirmationBucketsSeconds.size() + 1> confirmationBuckets{};
  double confirmationSumSeconds = 0.0;
};

// Upper bounds (seconds) of the dispatch-cycle and enqueue duration histograms (1 us .. 1 s); a
// final +Inf bucket follows.
inline constexpr std::array<double, 14> kCallDurationBucketsSeconds{
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 1e-2, 0.1, 1.0};

// A duration histogram (FlowControllerOptions::durationMetrics): per-bucket (not cumulative)
// counts over kCallDurationBucketsSeconds plus the overflow bucket, the sum and the count.
struct DurationHistogram {
  std::array<std::uint64_t, kCallDurationBucketsSeconds.size() + 1> buckets{};
  double sumSeconds = 0.0;
  std::uint64_t count = 0;
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
  // Cycles that ended gated while every endpoint of a non-empty pool was stale for the detector
  // (PoolPressure::staleEndpoints == endpoints): the pool reads saturated because no endpoint has
  // fresh telemetry (Endpoint::updateTime unset or older than the detector's
  // metricsStalenessThreshold), not because it is full. Rising with `cycles`: the host's
  // EndpointSource does not stamp its telemetry (docs/guide/getting-started.md, "Every cycle
  // gated").
  std::uint64_t staleGatedCycles = 0;
  // Cycles that left a dispatch to another gateway replica whose head of the same band had waited
  // longer (ReplicaShare::headTolerance): pool-wide oldest first across replicas.
  std::uint64_t yieldedCycles = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};
  // Outcomes of requests whose requested priority was neither their band's nor one of the
  // kRequestedPriorityLabelLimit tracked ones (they are labelled with their band's priority).
  std::uint64_t untrackedRequestedOutcomes = 0;
  // FlowControllerOptions::fairnessIdLabelLimit at the snapshot (0: no per-flow gauges).
  std::size_t fairnessIdLabelLimit = 0;
  bool stopped = false;
  EvictionStats eviction;
  // With FlowControllerOptions::durationMetrics: how long dispatchCycle/dispatch and enqueue took,
  // measured with options.clock (nullopt when disabled).
  std::optional<DurationHistogram> dispatchCycleDuration;
  std::optional<DurationHistogram> enqueueDuration;
};

// FlowController::bandHeadroom: the room one band has left, in requests.
struct BandHeadroom {
  Priority bandPriority = 0;         // the band read (band 0 for a demoted priority)
  std::uint64_t maxRequests = 0;     // its limit
  std::uint64_t queuedRequests = 0;  // queued in it now
  std::uint64_t requests = 0;        // maxRequests - queuedRequests, clamped at 0
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
