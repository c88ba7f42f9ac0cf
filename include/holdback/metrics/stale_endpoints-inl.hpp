// Implementation of holdback/metrics/stale_endpoints.hpp: compiled into libholdback by
// src/metrics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/metrics/stale_endpoints.hpp"

#include <utility>

#include "holdback/core/text.hpp"
#include "holdback/metrics/prometheus.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE StaleEndpointMonitor::StaleEndpointMonitor(
    std::function<void(std::string_view)> log, Duration logInterval)
    : log_(std::move(log)), log_interval_(logInterval) {}

HOLDBACK_INLINE std::size_t StaleEndpointMonitor::update(const SaturationDetector& detector,
                                                         std::span<const Endpoint> endpoints,
                                                         TimePoint now) {
  const std::size_t stale = detector.staleEndpoints(endpoints, now);
  bool log_now = false;
  {
    MutexLock lock(mu_);
    count_ = stale;
    if (stale > 0 && log_ && (!logged_ || now - last_log_ >= log_interval_)) {
      logged_ = true;
      last_log_ = now;
      log_now = true;
    }
  }
  if (log_now) {
    HOLDBACK_TRY {
      const std::optional<Duration> threshold = detector.metricsStalenessThreshold();
      // The utilization detector's own parameter (a library-internal cast: the line names it).
      const auto* utilization = dynamic_cast<const UtilizationDetector*>(&detector);
      log_(std::to_string(stale) + " of " + std::to_string(endpoints.size()) +
           " endpoints have stale or invalid metrics" +
           (threshold ? " (older than " + formatDuration(*threshold) + ")" : std::string()) +
           "; detector \"" + std::string(detector.name()) + "\"" +
           (utilization != nullptr
                ? " treats them per stalenessPolicy " +
                      std::string(toString(utilization->options().stalenessPolicy))
                : std::string()));
    }
    HOLDBACK_CATCH_ALL {}  // a throwing log hook costs the line, nothing else
  }
  return stale;
}

HOLDBACK_INLINE std::size_t StaleEndpointMonitor::count() const {
  MutexLock lock(mu_);
  return count_;
}

HOLDBACK_INLINE std::string renderStaleEndpoints(std::size_t count, std::string_view detector,
                                                 std::string_view pool) {
  PrometheusWriter w("holdback_", {{"inference_pool", std::string(pool)}});
  w.family("flow_control_stale_endpoints", "gauge",
           "Endpoints whose metrics are missing, stale or invalid, per saturation detector.");
  w.sample("flow_control_stale_endpoints", {PrometheusWriter::Label{"detector", detector}},
           std::uint64_t{count});
  return w.take();
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
