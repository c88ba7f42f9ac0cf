// FlowControllerOptions: what a FlowController is built from, and every default of the flow
// controller in one place (the config loaders and the examples use these constants too).
//
// Two kinds of fields: the host's collaborators and timing (endpoints, onOutcome, clock, runner,
// expiryInterval, flowIdleTimeout, bandIdleTimeout) are fixed at create(); everything else is
// reloadable with FlowController::reconfigure().
//
// Thread safety: plain values (thread-compatible).
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/band_scheduling.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/pool_pressure.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct Completion;

// ---------------------------------------------------------------------------------------------
// Defaults (the Go reference's flow controller and registry where it has the setting:
// pkg/epp/flowcontrol/ of llm-d-router, https://github.com/llm-d/llm-d-router)

// The saturation-regime queue budget of a request without its own TTL.
inline constexpr Duration kDefaultRequestTtl = std::chrono::seconds(60);
// Per-band limits; a band limit of 0 means these (band limits are always bounded).
inline constexpr std::uint64_t kDefaultBandMaxRequests = 5000;
inline constexpr std::uint64_t kDefaultBandMaxBytes = 1'000'000'000;
inline constexpr std::size_t kDefaultMaxBands = 64;
inline constexpr Duration kDefaultExpiryInterval = std::chrono::seconds(1);
inline constexpr Duration kDefaultActivityWindow = std::chrono::seconds(1);
inline constexpr Duration kDefaultFlowIdleTimeout = std::chrono::minutes(5);
inline constexpr Duration kDefaultBandIdleTimeout = std::chrono::minutes(10);
inline constexpr Duration kDefaultLeaseTimeout = std::chrono::minutes(10);
inline constexpr Duration kDefaultRunnerTickInterval = std::chrono::milliseconds(1);
// Distinct flow ids the per-flow queue gauges label (upstream #2119); the rest share "other".
inline constexpr std::size_t kDefaultFairnessIdLabelLimit = 1000;
// The largest fairnessIdLabelLimit a config file may set (FlowControllerOptions takes any).
inline constexpr std::size_t kMaxFairnessIdLabelLimit = 1'000'000;

// ---------------------------------------------------------------------------------------------

struct BandTemplate {
  // 0 means the default (per-band limits are always bounded, as in the reference §3.10).
  std::uint64_t maxRequests = kDefaultBandMaxRequests;
  std::uint64_t maxBytes = kDefaultBandMaxBytes;
  // nullptr means global-strict / fcfs.
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
  // The band's queue budget (config: defaultRequestTTL of the band); 0 = none. A request's budget
  // is the smallest of its own TTL, its band's and the controller's default that are set (> 0).
  Duration requestTtl{0};
  // Its share under weighted-fair band scheduling (flow/band_scheduling.hpp): 0 = derived from
  // the band's position, else [1, 1e6].
  double weight = 0.0;
};

struct BandOptions {
  Priority priority = 0;
  std::uint64_t maxRequests = kDefaultBandMaxRequests;
  std::uint64_t maxBytes = kDefaultBandMaxBytes;
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
  // As BandTemplate::requestTtl.
  Duration requestTtl{0};
  // As BandTemplate::weight.
  double weight = 0.0;
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
  // Start a FlowControllerRunner (flow/runner.hpp) that calls dispatchCycle on every arrival and
  // every tickInterval, and expire every expiryInterval, until shutdown().
  bool enabled = false;
  Duration tickInterval = kDefaultRunnerTickInterval;
};

struct FlowControllerOptions {
  // Required collaborators. The policy, the fairness and ordering policies run under the
  // controller's lock: they must be O(bands) / O(log n), must not block and must not call the
  // controller. The endpoint source and the detector run under no controller lock.
  std::shared_ptr<UsageLimitPolicy> policy;
  std::shared_ptr<const SaturationDetector> detector;
  std::shared_ptr<EndpointSource> endpoints;
  // Runs with no library lock held; may call any controller method.
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
  std::size_t maxBands = kDefaultMaxBands;

  // Global limits, 0 = unlimited.
  std::uint64_t maxRequests = 0;
  std::uint64_t maxBytes = 0;

  // TTLs (§3.7): unset default = kDefaultRequestTtl; unset noEndpoint = follows default; 0 =
  // never expire. The saturation-regime budget of a request is the smallest of the set (> 0)
  // values among its own TTL, its band's requestTtl and defaultRequestTtl (resolveRequestTtl);
  // noEndpointRequestTtl is a separate budget charged only while the pool has no endpoint.
  std::optional<Duration> defaultRequestTtl;
  std::optional<Duration> noEndpointRequestTtl;
  Duration expiryInterval = kDefaultExpiryInterval;

  PriorityDomain priorityDomain = PriorityDomain::kProvisioned;
  Duration activityWindow = kDefaultActivityWindow;

  // expire() removes empty flows idle this long, and dynamically provisioned, undesired, empty
  // bands idle this long.
  Duration flowIdleTimeout = kDefaultFlowIdleTimeout;
  Duration bandIdleTimeout = kDefaultBandIdleTimeout;

  // A dispatched request holds a lease until the host calls FlowController::release (or
  // Ticket::release); expire() drops leases older than this (a host that never releases does
  // not grow memory). Leases are kept only while the policy reads demand (usesDemand()) or
  // eviction is enabled.
  // Reloadable.
  Duration leaseTimeout = kDefaultLeaseTimeout;

  // In-flight eviction (flow/eviction.hpp, docs/guide/eviction.md). Reloadable except `evict`.
  // While enabled, every dispatched request holds a lease (as with a demand-reading policy).
  EvictionOptions eviction;

  // The clock for enqueue(request) / cancel / shutdown() without `now` and for the runner;
  // default steady_clock::now. Never called under a controller lock.
  std::function<TimePoint()> clock;
  // Measure every dispatchCycle/dispatch and enqueue with `clock` (two calls each) into the
  // histograms of stats() (Prometheus: flow_control_dispatch_cycle_duration_seconds,
  // flow_control_request_enqueue_duration_seconds). False (default): the clock is not called
  // on those paths. Not reloadable. Recording is lock-free and does not allocate.
  bool durationMetrics = false;
  // Per-flow queue gauges (stats().bands[i].flowQueues; Prometheus flow_control_queue_size and
  // flow_control_queue_bytes with a fairness_id label, as upstream): at most this many distinct
  // flow ids get their own label value, the flows with the most queued requests at the snapshot;
  // every other flow's queue is summed into fairness_id="other" (one series per band, always
  // present). 0 = no per-flow gauges (one series per band, without fairness_id). stats() then
  // costs O(non-empty flows) under the controller's lock. Reloadable.
  std::size_t fairnessIdLabelLimit = kDefaultFairnessIdLabelLimit;
  RunnerOptions runner;
  // Which band dispatches first (flow/band_scheduling.hpp): strict priority (default) or
  // saturation-activated weighted fair queuing. Reloadable.
  BandSchedulingOptions bandScheduling;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
