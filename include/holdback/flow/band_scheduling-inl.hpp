// Implementation of holdback/flow/band_scheduling.hpp (compiled by src/flow.cpp, or included by
// the header itself in header-only mode).
#pragma once

#include "holdback/flow/band_scheduling.hpp"

#include "holdback/flow/detail/band_scheduling_fields.hpp"

#include <cmath>
#include <limits>

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::size_t wfqStarvationBound(std::span<const double> weights,
                                               std::size_t band) noexcept {
  if (band >= weights.size()) return 0;
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  const double wi = weights[band];
  std::size_t k = 1;
  for (std::size_t j = 0; j < weights.size(); ++j) {
    if (j == band) continue;
    const double turns = std::ceil(weights[j] / wi) + 1.0;
    if (!(turns < static_cast<double>(kMax - k))) return kMax;  // NaN and overflow saturate
    k += static_cast<std::size_t>(turns);
  }
  return k;
}

HOLDBACK_INLINE void validateBandScheduling(const BandSchedulingOptions& o, const std::string& path,
                                            Diagnostics& d) {
  checkFields<BandSchedulingOptions>(kBandSchedulingFields, o, path, d);
}

HOLDBACK_INLINE void validateBandWeight(double w, const std::string& path, Diagnostics& d) {
  if (w == 0.0 || (w >= kMinBandWeight && w <= kMaxBandWeight)) return;
  d.error(path, formatNumber(w) +
                    " is not a band weight: 0 (derived from the band's position) "
                    "or a number in [1, 1000000]");
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
