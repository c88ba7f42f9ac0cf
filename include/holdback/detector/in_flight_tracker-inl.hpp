// Implementation of holdback/detector/in_flight_tracker.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/in_flight_tracker.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE InFlightHandle InFlightTracker::dispatch(std::string_view endpoint,
                                                         std::int64_t tokens) noexcept {
  return dispatchAt(endpoint, tokens, std::nullopt);
}

HOLDBACK_INLINE InFlightHandle InFlightTracker::dispatch(std::string_view endpoint,
                                                         std::int64_t tokens,
                                                         Priority priority) noexcept {
  return dispatchAt(endpoint, tokens, priority);
}

HOLDBACK_INLINE InFlightHandle InFlightTracker::dispatchAt(
    std::string_view endpoint, std::int64_t tokens, std::optional<Priority> priority) noexcept {
  // A concurrent removeEndpoint can retire the id between lookup and dispatch: try again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::optional<EndpointId> id = ledger_.find(endpoint);
    if (!id) {
      const EndpointId added = ledger_.registerEndpoint(endpoint);
      if (!added.valid()) return {};
      id = added;
    }
    InFlightHandle handle =
        priority ? ledger_.dispatch(*id, tokens, *priority) : ledger_.dispatch(*id, tokens);
    if (handle.active()) return handle;
  }
  return {};
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
