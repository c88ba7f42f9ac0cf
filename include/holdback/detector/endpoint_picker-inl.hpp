// Implementation of holdback/detector/endpoint_picker.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/endpoint_picker.hpp"

#include <tuple>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE EndpointPicker::EndpointPicker(std::size_t capacity, EndpointPickerOptions options)
    : scratch_(capacity), room_(options.fitFirst ? capacity : 0), options_(options) {}

HOLDBACK_INLINE std::optional<std::size_t> EndpointPicker::pick(std::span<const Endpoint> endpoints,
                                                                const SaturationDetector& detector,
                                                                TimePoint now,
                                                                std::span<const std::uint8_t> up,
                                                                std::int64_t startTokens) noexcept {
  const std::size_t n = endpoints.size();
  if (n == 0) return std::nullopt;
  if (scratch_.size() < n) scratch_.resize(n);  // grows with the pool only
  const std::span<std::size_t> candidates(scratch_.data(), n);
  std::size_t kept = detector.filter(endpoints, now, candidates).kept;
  if (kept == 0) {
    for (std::size_t i = 0; i < n; ++i) candidates[i] = i;
    kept = n;
  }
  const bool useUp = up.size() >= n;
  if (cursor_ >= n) cursor_ = 0;
  const double tokens = startTokens > 0 ? static_cast<double>(startTokens) : 0.0;
  // Rule 3: the detector's room of every endpoint, in one call (without a capacity model, none).
  bool fit = false;
  if (options_.fitFirst) {
    if (room_.size() < n) room_.resize(n);  // grows with the pool only
    fit = detector.room(endpoints, now, std::span<EndpointRoom>(room_.data(), n));
  }
  // false when the request starts on endpoint i now (or without a capacity model).
  auto waitsOn = [&](std::size_t i) {
    return fit && !(room_[i].slots >= 1.0 && room_[i].kvTokens >= tokens);
  };
  // Smaller is better: (down, waits, in flight, waiting, distance from the cursor).
  auto key = [&](std::size_t i) {
    const bool down = useUp && up[i] == 0;
    const std::size_t distance = i >= cursor_ ? i - cursor_ : i + n - cursor_;
    return std::make_tuple(down, waitsOn(i), endpoints[i].inFlightRequests,
                           endpoints[i].waitingQueueSize, distance);
  };
  std::size_t best = candidates[0];
  auto bestKey = key(best);
  for (std::size_t k = 1; k < kept; ++k) {
    const std::size_t i = candidates[k];
    if (i >= n) continue;
    const auto candidate = key(i);
    if (candidate < bestKey) {
      best = i;
      bestKey = candidate;
    }
  }
  cursor_ = best + 1 == n ? 0 : best + 1;
  return best;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
