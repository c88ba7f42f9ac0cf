// Implementation of holdback/flow/admission.hpp (compiled by src/flow.cpp, or included by the
// header in header-only mode).
#pragma once

#include "holdback/flow/admission.hpp"

#include <algorithm>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE bool hasCapacity(std::uint64_t itemBytes, const CapacityUsage& global,
                                 const CapacityUsage* band) noexcept {
  if (detail::exceeds(global.usedBytes, itemBytes, global.maxBytes)) return false;
  if (detail::exceeds(global.usedRequests, 1, global.maxRequests)) return false;
  if (band == nullptr) return false;
  if (detail::exceeds(band->usedBytes, itemBytes, band->maxBytes)) return false;
  if (detail::exceeds(band->usedRequests, 1, band->maxRequests)) return false;
  return true;
}

HOLDBACK_INLINE ExpiryVerdict isExpired(TimePoint enqueueTime, Duration effectiveTtl,
                                        Duration noEndpointTtl, PoolRegime regime,
                                        TimePoint now) noexcept {
  return detail::expiryOf(enqueueTime, effectiveTtl, noEndpointTtl, regime, now);
}

HOLDBACK_INLINE TtlResolution resolveRequestTtl(std::optional<Duration> requestTtl,
                                                Duration bandTtl, Duration defaultTtl,
                                                std::optional<TimePoint> deadline,
                                                TimePoint now) noexcept {
  TtlResolution out;
  Duration ttl = Duration::zero();
  const auto tighten = [&ttl](Duration level) {
    if (level > Duration::zero() && (ttl <= Duration::zero() || level < ttl)) ttl = level;
  };
  if (requestTtl) tighten(*requestTtl);
  tighten(bandTtl);
  tighten(defaultTtl);
  if (deadline) {
    const Duration remaining = elapsed(now, *deadline);
    if (remaining <= Duration::zero()) {
      out.deadlinePassed = true;
    } else if (ttl <= Duration::zero() || remaining < ttl) {
      ttl = remaining;
    }
  }
  out.effectiveTtl = ttl > Duration::zero() ? ttl : Duration::zero();
  return out;
}

HOLDBACK_INLINE std::optional<Outcome> deadOutcome(std::optional<TimePoint> deadline,
                                                   TimePoint enqueueTime, Duration effectiveTtl,
                                                   Duration noEndpointTtl, PoolRegime regime,
                                                   TimePoint now) noexcept {
  return detail::deadOutcomeAt(deadline, enqueueTime, effectiveTtl, noEndpointTtl, regime, now);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
