// Implementation of holdback/detector/detectors.hpp: compiled into libholdback by
// src/detectors.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/detector/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void validateHeadroom(double headroom, const std::string& path,
                                      Diagnostics& diagnostics) {
  const std::string at = joinPath(path, "headroom");
  if (std::isnan(headroom) || std::isinf(headroom)) {
    diagnostics.error(at, formatNumber(headroom) + " is not finite; expected a number >= 0.0");
  } else if (headroom < 0.0) {
    diagnostics.error(at, formatNumber(headroom) + " is negative; expected a number >= 0.0");
  } else if (headroom > 1.0) {
    diagnostics.warning(at, formatNumber(headroom) +
                                " is above 1.0: the filter lets endpoints exceed their thresholds "
                                "by more than 100%");
  }
}

HOLDBACK_INLINE void validatePositive(std::int64_t value, const std::string& path,
                                      std::string_view key, Diagnostics& diagnostics) {
  if (value <= 0) {
    diagnostics.error(joinPath(path, key),
                      std::to_string(value) + " is not strictly positive; expected an integer > 0");
  }
}

// trunc(capacity * (1 + headroom)) without an undefined conversion for huge products.
HOLDBACK_INLINE ConcurrencyDetector::Limit truncatedLimit(std::int64_t capacity, double headroom) {
  const double limit = std::trunc(static_cast<double>(capacity) * (1.0 + headroom));
  // 2^63 is the first double that does not fit an int64.
  if (limit >= 9223372036854775808.0) return {std::numeric_limits<std::int64_t>::max(), true};
  return {static_cast<std::int64_t>(limit), false};
}

}  // namespace detail

HOLDBACK_INLINE std::string_view toString(Aggregation aggregation) noexcept {
  switch (aggregation) {
    case Aggregation::kMean:
      return "mean";
    case Aggregation::kMax:
      return "max";
    case Aggregation::kWeighted:
      return "weighted";
  }
  return "unknown";
}

HOLDBACK_INLINE std::string_view toString(TelemetryValidation validation) noexcept {
  return validation == TelemetryValidation::kReference ? "reference" : "strict";
}

HOLDBACK_INLINE std::string_view toString(StalenessPolicy policy) noexcept {
  return policy == StalenessPolicy::kIgnore ? "ignore" : "saturated";
}

HOLDBACK_INLINE std::string_view toString(ConcurrencyMode mode) noexcept {
  switch (mode) {
    case ConcurrencyMode::kRequests:
      return "requests";
    case ConcurrencyMode::kTokens:
      return "tokens";
    case ConcurrencyMode::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE void UtilizationDetector::validate(const UtilizationDetectorOptions& options,
                                                   const std::string& path,
                                                   Diagnostics& diagnostics) {
  detail::validatePositive(options.queueDepthThreshold, path, "queueDepthThreshold", diagnostics);
  if (!(options.kvCacheUtilThreshold > 0.0 && options.kvCacheUtilThreshold <= 1.0)) {
    diagnostics.error(joinPath(path, "kvCacheUtilThreshold"),
                      formatNumber(options.kvCacheUtilThreshold) + " is outside (0.0, 1.0]");
  }
  if (options.metricsStalenessThreshold <= Duration::zero()) {
    diagnostics.error(joinPath(path, "metricsStalenessThreshold"),
                      "\"" + formatDuration(options.metricsStalenessThreshold) +
                          "\" is not strictly positive; expected a duration > 0 such as "
                          "\"200ms\"");
  }
  detail::validateHeadroom(options.headroom, path, diagnostics);
  if (options.maxRunningRequests < 0) {
    diagnostics.error(joinPath(path, "maxRunningRequests"),
                      std::to_string(options.maxRunningRequests) +
                          " is negative; expected an integer >= 0 (0 = no slot term)");
  }
  if (!(options.endpointScoreCap > 0.0)) {
    diagnostics.error(joinPath(path, "endpointScoreCap"),
                      formatNumber(options.endpointScoreCap) +
                          " is not strictly positive; expected a number > 0 or \"none\"");
  } else if (options.endpointScoreCap < 1.0) {
    diagnostics.warning(joinPath(path, "endpointScoreCap"),
                        formatNumber(options.endpointScoreCap) +
                            " is below 1.0: the pool can never read saturated");
  }
  DispatchLedger::validate(options.ledger, joinPath(path, "dispatchLedger"), diagnostics);
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

HOLDBACK_INLINE void ConcurrencyDetector::validate(const ConcurrencyDetectorOptions& options,
                                                   const std::string& path,
                                                   Diagnostics& diagnostics) {
  detail::validatePositive(options.maxConcurrency, path, "maxConcurrency", diagnostics);
  detail::validatePositive(options.maxTokenConcurrency, path, "maxTokenConcurrency", diagnostics);
  detail::validateHeadroom(options.headroom, path, diagnostics);
}

HOLDBACK_INLINE Result<std::unique_ptr<ConcurrencyDetector>> ConcurrencyDetector::create(
    ConcurrencyDetectorOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<ConcurrencyDetector>>(std::move(diagnostics), [&] {
    return std::unique_ptr<ConcurrencyDetector>(new ConcurrencyDetector(options, std::move(name)));
  });
}

HOLDBACK_INLINE ConcurrencyDetector::ConcurrencyDetector(ConcurrencyDetectorOptions options,
                                                         std::string name)
    : SaturationDetector(std::move(name)),
      options_(options),
      request_limit_(detail::truncatedLimit(options.maxConcurrency, options.headroom)),
      token_limit_(detail::truncatedLimit(options.maxTokenConcurrency, options.headroom)) {}

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
