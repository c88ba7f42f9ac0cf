// Implementation of holdback/detector/detectors.hpp: compiled into libholdback by
// src/detectors.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/detector/concurrency_detector-inl.hpp"
#include "holdback/detector/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "holdback/core/text.hpp"
#include "holdback/detector/detail/detectors_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string_view toString(Aggregation aggregation) noexcept {
  switch (aggregation) {
    case Aggregation::kMean:
      return "mean";
    case Aggregation::kMax:
      return "max";
    case Aggregation::kWeighted:
      return "weighted";
    case Aggregation::kCapacity:
      return "capacity";
  }
  return "unknown";
}

HOLDBACK_INLINE std::string_view toString(TelemetryValidation validation) noexcept {
  return validation == TelemetryValidation::kReference ? "reference" : "strict";
}

HOLDBACK_INLINE std::string_view toString(StalenessPolicy policy) noexcept {
  return policy == StalenessPolicy::kIgnore ? "ignore" : "saturated";
}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE void UtilizationDetector::validate(const UtilizationDetectorOptions& options,
                                                   const std::string& path,
                                                   Diagnostics& diagnostics) {
  checkFields<UtilizationDetectorOptions>(kUtilizationDetectorFields, options, path, diagnostics);
}

HOLDBACK_INLINE Result<std::unique_ptr<UtilizationDetector>> UtilizationDetector::create(
    UtilizationDetectorOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<UtilizationDetector>>(std::move(diagnostics), [&] {
    return std::unique_ptr<UtilizationDetector>(new UtilizationDetector(options, std::move(name)));
  });
}

HOLDBACK_INLINE UtilizationDetector::UtilizationDetector(UtilizationDetectorOptions options,
                                                         std::string name)
    : SaturationDetector(std::move(name)),
      options_(options),
      queue_threshold_(static_cast<double>(options.queueDepthThreshold)),
      staleness_ns_(options.metricsStalenessThreshold.count()),
      queue_limit_(queue_threshold_ * (1.0 + options.headroom)),
      kv_limit_(std::min(1.0, options.kvCacheUtilThreshold * (1.0 + options.headroom))),
      max_running_(static_cast<double>(options.maxRunningRequests)),
      score_cap_(std::min(options.endpointScoreCap, kMaxScore)) {}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE std::size_t UtilizationDetector::staleEndpoints(std::span<const Endpoint> endpoints,
                                                                TimePoint now) const noexcept {
  std::size_t stale = 0;
  for (const Endpoint& e : endpoints) {
    if (observe(e, now) != Observation::kFresh) ++stale;
  }
  return stale;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
