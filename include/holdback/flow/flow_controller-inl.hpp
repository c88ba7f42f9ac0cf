// Implementation of holdback/flow/flow_controller.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only). The facade: FlowController and Ticket delegate to
// detail::ControllerCore (flow/detail/controller_core.hpp), which owns the components.
#pragma once

#include "holdback/flow/flow_controller.hpp"

#include <array>
#include <atomic>

#include "holdback/core/text.hpp"

#include <set>
#include <string>
#include <utility>

#include "holdback/flow/detail/band_scheduler-inl.hpp"
#include "holdback/flow/detail/band_table-inl.hpp"
#include "holdback/flow/detail/controller_core-inl.hpp"
#include "holdback/flow/detail/controller_core_headroom-inl.hpp"
#include "holdback/flow/detail/controller_core_lifecycle-inl.hpp"
#include "holdback/flow/detail/demand_tracker-inl.hpp"
#include "holdback/flow/detail/eviction_deficit-inl.hpp"
#include "holdback/flow/detail/evictor-inl.hpp"
#include "holdback/flow/detail/replica_coordinator-inl.hpp"
#include "holdback/flow/detail/revocation_pacer-inl.hpp"
#include "holdback/flow/detail/victim_selector-inl.hpp"
#include "holdback/flow/runner.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {

HOLDBACK_INLINE void validateFlowOptions(const FlowControllerOptions& o, Diagnostics& d,
                                         bool create) {
  if (!o.policy) d.error("/policy", "required: a UsageLimitPolicy");
  if (!o.detector) d.error("/detector", "required: a SaturationDetector");
  if (create && !o.endpoints) d.error("/endpoints", "required: an EndpointSource");
  if (create && !o.onOutcome) d.error("/onOutcome", "required: the outcome callback");
  std::set<Priority> seen;
  for (std::size_t i = 0; i < o.bands.size(); ++i) {
    const Priority p = o.bands[i].priority;
    if (!seen.insert(p).second) {
      d.error("/bands/" + std::to_string(i) + "/priority",
              "duplicate priority level " + std::to_string(p));
    }
  }
  if (o.maxBands < 1) d.error("/maxBands", "must be at least 1, but got 0");
  validateBandSchedulingOptions(o, d);
  auto non_negative = [&](const std::optional<Duration>& v, const char* path, const char* name) {
    if (v && *v < Duration::zero()) {
      d.error(path, std::string(name) + " cannot be negative, but got " + formatDuration(*v));
    }
  };
  non_negative(o.defaultRequestTtl, "/defaultRequestTtl", "defaultRequestTtl");
  non_negative(o.noEndpointRequestTtl, "/noEndpointRequestTtl", "noEndpointRequestTtl");
  for (std::size_t i = 0; i < o.bands.size(); ++i) {
    const std::string path = "/bands/" + std::to_string(i) + "/requestTtl";
    non_negative(o.bands[i].requestTtl, path.c_str(), "a band's requestTtl");
  }
  non_negative(o.defaultBand.requestTtl, "/defaultBand/requestTtl", "a band's requestTtl");
  if (o.defaultNegativeBand) {
    non_negative(o.defaultNegativeBand->requestTtl, "/defaultNegativeBand/requestTtl",
                 "a band's requestTtl");
  }
  auto positive = [&](Duration v, const char* path, const char* name) {
    if (v <= Duration::zero()) {
      d.error(path, std::string(name) + " must be positive, but got " + formatDuration(v));
    }
  };
  positive(o.expiryInterval, "/expiryInterval", "expiryInterval");
  positive(o.activityWindow, "/activityWindow", "activityWindow");
  positive(o.flowIdleTimeout, "/flowIdleTimeout", "flowIdleTimeout");
  positive(o.bandIdleTimeout, "/bandIdleTimeout", "bandIdleTimeout");
  positive(o.leaseTimeout, "/leaseTimeout", "leaseTimeout");
  positive(o.runner.tickInterval, "/runner/tickInterval", "tickInterval");
  validateEvictionOptions(o.eviction, "/eviction", create, d);
  if (o.bandIdleTimeout < o.flowIdleTimeout) {
    d.error("/bandIdleTimeout", "must be >= flowIdleTimeout (" + formatDuration(o.flowIdleTimeout) +
                                    "), but got " + formatDuration(o.bandIdleTimeout));
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE std::string_view toString(DispatchResult::Kind kind) noexcept {
  switch (kind) {
    case DispatchResult::Kind::kDispatched:
      return "dispatched";
    case DispatchResult::Kind::kGated:
      return "gated";
    case DispatchResult::Kind::kNothingQueued:
      return "nothing-queued";
    case DispatchResult::Kind::kStopped:
      return "stopped";
  }
  return "unknown";
}

HOLDBACK_INLINE bool Ticket::cancel() noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->cancel(id_);
}

HOLDBACK_INLINE bool Ticket::release(TimePoint now) noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->release(id_, now);
}

HOLDBACK_INLINE bool Ticket::updateLease(std::uint64_t footprintTokens,
                                         std::uint64_t generatedTokens) noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->updateLease(id_, footprintTokens, generatedTokens);
}

HOLDBACK_INLINE bool Ticket::setEndpoint(std::size_t endpoint) noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->setLeaseEndpoint(id_, endpoint);
}

HOLDBACK_INLINE bool Ticket::setParked(bool parked) noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->setLeaseParked(id_, parked);
}

HOLDBACK_INLINE bool Ticket::markStarted() noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->markLeaseStarted(id_);
}

HOLDBACK_INLINE void FlowController::validate(const FlowControllerOptions& o, Diagnostics& d) {
  detail::validateFlowOptions(o, d, /*create=*/true);
}

// Two histograms of atomic buckets: record() is wait-free and allocation-free.
struct FlowController::DurationRecorder {
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kCallDurationBucketsSeconds.size() + 1> buckets{};
    std::atomic<std::uint64_t> sumNanos{0};
    std::atomic<std::uint64_t> count{0};

    void record(Duration d) noexcept {
      const double seconds = d > Duration::zero() ? std::chrono::duration<double>(d).count() : 0.0;
      std::size_t i = 0;
      while (i < kCallDurationBucketsSeconds.size() && seconds > kCallDurationBucketsSeconds[i]) {
        ++i;
      }
      buckets[i].fetch_add(1, std::memory_order_relaxed);
      sumNanos.fetch_add(d > Duration::zero() ? static_cast<std::uint64_t>(d.count()) : 0,
                         std::memory_order_relaxed);
      count.fetch_add(1, std::memory_order_relaxed);
    }
    [[nodiscard]] DurationHistogram snapshot() const noexcept {
      DurationHistogram h;
      for (std::size_t i = 0; i < buckets.size(); ++i) {
        h.buckets[i] = buckets[i].load(std::memory_order_relaxed);
      }
      h.sumSeconds = static_cast<double>(sumNanos.load(std::memory_order_relaxed)) * 1e-9;
      h.count = count.load(std::memory_order_relaxed);
      return h;
    }
  };
  Histogram dispatchCycle;
  Histogram enqueue;
};

HOLDBACK_INLINE Result<std::unique_ptr<FlowController>> FlowController::create(
    FlowControllerOptions options) {
  Diagnostics diagnostics;
  validate(options, diagnostics);
  if (diagnostics.hasErrors()) {
    return Result<std::unique_ptr<FlowController>>::failure(std::move(diagnostics));
  }
  if (!options.clock) options.clock = [] { return Clock::now(); };
  const RunnerOptions runner = options.runner;
  const Duration expiry_interval = options.expiryInterval;
  std::function<TimePoint()> clock = options.clock;
  const bool duration_metrics = options.durationMetrics;
  auto core = std::make_shared<detail::ControllerCore>(std::move(options));
  std::unique_ptr<FlowController> controller(new FlowController());
  controller->core_ = std::move(core);
  if (duration_metrics) controller->durations_ = std::make_unique<DurationRecorder>();
  if (runner.enabled) {
    controller->runner_ = std::make_unique<FlowControllerRunner>(
        *controller, std::move(clock), runner.tickInterval, expiry_interval);
  }
  return Result<std::unique_ptr<FlowController>>(std::move(controller), std::move(diagnostics));
}

HOLDBACK_INLINE FlowController::FlowController() = default;

HOLDBACK_INLINE FlowController::~FlowController() {
  shutdown();
}

HOLDBACK_INLINE Ticket FlowController::enqueue(FlowRequest request, TimePoint now) noexcept {
  bool queued = false;
  if (durations_) {
    const TimePoint start = core_->now();
    const RequestId id = core_->enqueue(std::move(request), now, queued);
    durations_->enqueue.record(core_->now() - start);
    if (queued && runner_) runner_->notifyArrival();
    return Ticket(core_, id);
  }
  const RequestId id = core_->enqueue(std::move(request), now, queued);
  if (queued && runner_) runner_->notifyArrival();
  return Ticket(core_, id);
}

HOLDBACK_INLINE Ticket FlowController::enqueue(FlowRequest request) noexcept {
  return enqueue(std::move(request), core_->now());
}

HOLDBACK_INLINE bool FlowController::cancel(RequestId id) noexcept {
  return core_->cancel(id);
}

HOLDBACK_INLINE bool FlowController::release(RequestId id, TimePoint now) noexcept {
  return core_->release(id, now);
}

HOLDBACK_INLINE Ticket FlowController::ticket(RequestId id) const noexcept {
  return Ticket(core_, id);
}

HOLDBACK_INLINE ReplicaPort FlowController::replicaPort() const noexcept {
  return ReplicaPort(core_);
}

HOLDBACK_INLINE DispatchResult FlowController::dispatchCycle(TimePoint now) noexcept {
  if (!durations_) return core_->dispatchCycle(now);
  const TimePoint start = core_->now();
  const DispatchResult result = core_->dispatchCycle(now);
  durations_->dispatchCycle.record(core_->now() - start);
  return result;
}

HOLDBACK_INLINE DispatchResult FlowController::dispatch(TimePoint now,
                                                        const PoolPressure& pressure) noexcept {
  if (!durations_) return core_->dispatch(now, pressure);
  const TimePoint start = core_->now();
  const DispatchResult result = core_->dispatch(now, pressure);
  durations_->dispatchCycle.record(core_->now() - start);
  return result;
}

HOLDBACK_INLINE std::size_t FlowController::expire(TimePoint now) noexcept {
  return core_->expire(now);
}

HOLDBACK_INLINE std::size_t FlowController::expire(TimePoint now,
                                                   const PoolPressure& pressure) noexcept {
  return core_->expire(now, pressure);
}

HOLDBACK_INLINE void FlowController::setDesiredPriorities(
    std::span<const Priority> priorities) noexcept {
  core_->setDesiredPriorities(priorities);
}

HOLDBACK_INLINE Diagnostics FlowController::reconfigure(FlowControllerOptions options) noexcept {
  return core_->reconfigure(std::move(options));
}

HOLDBACK_INLINE void FlowController::shutdown(TimePoint now) noexcept {
  core_->shutdown(now);
  if (runner_) runner_->stop();
}

HOLDBACK_INLINE void FlowController::shutdown() noexcept {
  shutdown(core_->now());
}

HOLDBACK_INLINE FlowControllerStats FlowController::stats() const {
  FlowControllerStats stats = core_->stats();
  if (durations_) {
    stats.dispatchCycleDuration = durations_->dispatchCycle.snapshot();
    stats.enqueueDuration = durations_->enqueue.snapshot();
  }
  return stats;
}

HOLDBACK_INLINE std::vector<Priority> FlowController::bandPriorities() const {
  return core_->bandPriorities();
}

HOLDBACK_INLINE PoolRegime FlowController::poolRegime() const noexcept {
  return core_->poolRegime();
}

HOLDBACK_INLINE std::optional<BandHeadroom> FlowController::bandHeadroom(
    Priority requested) const noexcept {
  return core_->bandHeadroom(requested);
}

// Deprecated (Ticket and ReplicaPort): straight to the core, as before.
HOLDBACK_INLINE bool FlowController::updateLease(RequestId id, std::uint64_t footprintTokens,
                                                 std::uint64_t generatedTokens) noexcept {
  return core_->updateLease(id, footprintTokens, generatedTokens);
}

HOLDBACK_INLINE bool FlowController::setLeaseEndpoint(RequestId id, std::size_t endpoint) noexcept {
  return core_->setLeaseEndpoint(id, endpoint);
}

HOLDBACK_INLINE bool FlowController::markLeaseStarted(RequestId id) noexcept {
  return core_->markLeaseStarted(id);
}

HOLDBACK_INLINE ReplicaRestoreFigures FlowController::replicaRestoreFigures() const noexcept {
  return core_->replicaRestoreFigures();
}

HOLDBACK_INLINE void FlowController::setReplicaShare(
    const std::optional<ReplicaShare>& share) noexcept {
  core_->setReplicaShare(share);
}

HOLDBACK_INLINE void FlowController::recordPeerArrival(Priority priority,
                                                       std::int64_t kvTokens) noexcept {
  core_->recordPeerArrival(priority, kvTokens);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
