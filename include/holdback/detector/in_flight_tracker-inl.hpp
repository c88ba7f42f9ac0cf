// Implementation of holdback/detector/in_flight_tracker.hpp: compiled into libholdback by
// src/in_flight_tracker.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/detector/in_flight_tracker.hpp"

#include <mutex>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE InFlightHandle InFlightTracker::dispatch(std::string_view endpoint,
                                                         std::int64_t tokens) noexcept {
  if (tokens < 0) tokens = 0;
  std::shared_ptr<detail::InFlightCounters> counters;
  {
    std::shared_lock lock(mutex_);
    if (const auto it = counters_.find(endpoint); it != counters_.end()) counters = it->second;
  }
  if (counters == nullptr) {
    HOLDBACK_TRY {
      std::unique_lock lock(mutex_);
      auto& slot = counters_[std::string(endpoint)];  // another thread may have added it
      if (slot == nullptr) slot = std::make_shared<detail::InFlightCounters>();
      counters = slot;
    }
    HOLDBACK_CATCH_ALL {
      return InFlightHandle();
    }
  }
  counters->requests.fetch_add(1, std::memory_order_relaxed);
  counters->tokens.fetch_add(tokens, std::memory_order_relaxed);
  return InFlightHandle(std::move(counters), tokens);
}

HOLDBACK_INLINE InFlightLoad InFlightTracker::load(std::string_view endpoint) const noexcept {
  std::shared_lock lock(mutex_);
  const auto it = counters_.find(endpoint);
  if (it == counters_.end()) return {};
  return {it->second->requests.load(std::memory_order_relaxed),
          it->second->tokens.load(std::memory_order_relaxed)};
}

HOLDBACK_INLINE void InFlightTracker::fill(std::span<Endpoint> endpoints) const noexcept {
  std::shared_lock lock(mutex_);
  for (Endpoint& e : endpoints) {
    const auto it = counters_.find(e.name);
    if (it == counters_.end()) {
      e.inFlightRequests = 0;
      e.inFlightTokens = 0;
    } else {
      e.inFlightRequests = it->second->requests.load(std::memory_order_relaxed);
      e.inFlightTokens = it->second->tokens.load(std::memory_order_relaxed);
    }
  }
}

HOLDBACK_INLINE bool InFlightTracker::removeEndpoint(std::string_view endpoint) {
  std::unique_lock lock(mutex_);
  const auto it = counters_.find(endpoint);
  if (it == counters_.end()) return false;
  counters_.erase(it);
  return true;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
