// The stale-endpoints gauge (upstream flow_control_stale_endpoints{detector}) with a rate-limited
// log hook: how many endpoints the utilization detector cannot use because their metrics are
// missing, older than metricsStalenessThreshold, or invalid (UtilizationDetector::observe), and a
// message for the host's log at most once per interval (upstream: 30 s) while any is stale.
//
//   StaleEndpointMonitor monitor([](std::string_view line) { log(line); });
//   monitor.update(detector, snapshot, now);            // e.g. on every /metrics scrape or cycle
//   text += renderStaleEndpoints(monitor.count(), detector.name(), pool);
//
// Reference vector (the Go reference's utilization-detector, llm-d-router,
// https://github.com/llm-d/llm-d-router): {fresh, 2 h old, no metrics} with a 1 h
// threshold -> 2 and one log line; again within 30 s -> no second line; empty pool -> 0; stale
// again -> 2; one fresh endpoint -> 0. The gauge is per detector, not per stage (as upstream).
//
// Thread safety: StaleEndpointMonitor is thread-safe (a mutex guards the count and the last log
// time; the log hook is called after it is released, never under a lock).
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "holdback/core/thread_annotations.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

class HOLDBACK_API StaleEndpointMonitor {
 public:
  static constexpr Duration kDefaultLogInterval = std::chrono::seconds(30);

  explicit StaleEndpointMonitor(std::function<void(std::string_view)> log = {},
                                Duration logInterval = kDefaultLogInterval);

  // Counts the endpoints `detector` cannot use at `now` (SaturationDetector::staleEndpoints: for
  // the utilization detector, those observe() classifies as stale or invalid), stores the count
  // and calls the log hook when the count is > 0 and the last line is at least logInterval old.
  // Returns the count. Does not allocate unless a line is logged.
  std::size_t update(const SaturationDetector& detector, std::span<const Endpoint> endpoints,
                     TimePoint now);
  [[nodiscard]] std::size_t count() const;

 private:
  const std::function<void(std::string_view)> log_;
  const Duration log_interval_;
  mutable Mutex mu_;
  std::size_t count_ HOLDBACK_GUARDED_BY(mu_) = 0;
  bool logged_ HOLDBACK_GUARDED_BY(mu_) = false;
  TimePoint last_log_ HOLDBACK_GUARDED_BY(mu_){};
};

// "holdback_flow_control_stale_endpoints{detector=...,inference_pool=...} <count>" with its
// # HELP / # TYPE lines.
[[nodiscard]] HOLDBACK_API std::string renderStaleEndpoints(std::size_t count,
                                                            std::string_view detector,
                                                            std::string_view pool = "default");

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/stale_endpoints-inl.hpp"
#endif
