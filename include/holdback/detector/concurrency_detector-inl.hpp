// Implementation of holdback/detector/concurrency_detector.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/detector/concurrency_detector.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "holdback/core/text.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// trunc(capacity * (1 + headroom)) without an undefined conversion for huge products.
HOLDBACK_INLINE ConcurrencyDetector::Limit truncatedLimit(std::int64_t capacity, double headroom) {
  const double limit = std::trunc(static_cast<double>(capacity) * (1.0 + headroom));
  // 2^63 is the first double that does not fit an int64.
  if (limit >= 9223372036854775808.0) return {std::numeric_limits<std::int64_t>::max(), true};
  return {static_cast<std::int64_t>(limit), false};
}

}  // namespace detail

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

HOLDBACK_INLINE void ConcurrencyDetector::validate(const ConcurrencyDetectorOptions& options,
                                                   const std::string& path,
                                                   Diagnostics& diagnostics) {
  checkFields<ConcurrencyDetectorOptions>(kConcurrencyDetectorFields, options, path, diagnostics);
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

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
