// Implementation of holdback/detector/endpoint_picker.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/endpoint_picker.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {

// Rules 4-6 of one endpoint (smaller is better), compared as std::tuple compares: a NaN waiting
// queue is unordered against any other, and an unordered element decides "not smaller".
struct PickKey {
  std::int64_t inFlight = 0;
  double waiting = 0.0;
  std::size_t distance = 0;

  [[nodiscard]] bool operator<(const PickKey& o) const noexcept {
    if (inFlight != o.inFlight) return inFlight < o.inFlight;
    if (waiting < o.waiting) return true;
    if (o.waiting < waiting) return false;
    if (!(waiting == o.waiting)) return false;  // NaN: unordered
    return distance < o.distance;
  }
};

}  // namespace detail

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
  const std::size_t cursor = cursor_;
  auto key = [&](std::size_t i) {
    return detail::PickKey{endpoints[i].inFlightRequests, endpoints[i].waitingQueueSize,
                           i >= cursor ? i - cursor : i + n - cursor};
  };

  // Per group (0: up, 1: down; rule 2): the best candidate by rules 4-6, and with fitFirst the
  // best one where the request starts now (rule 3). The best pick is the up group's (the down
  // one's when no candidate is up): its best fitting candidate, else its best.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t best[2] = {kNone, kNone};
  detail::PickKey bestKey[2];
  std::size_t fit[2] = {kNone, kNone};
  detail::PickKey fitKey[2];
  // Rule 3, lazily: a candidate's room is read only when it would beat the best fitting one of
  // its group, one endpoint per room() call; after kLazyRoomCalls such calls the room of the
  // whole pool is read in one call instead (a pool where few candidates fit).
  constexpr std::size_t kLazyRoomCalls = 16;
  enum class Room : std::uint8_t { kLazy, kWhole, kNone } room = Room::kLazy;
  std::size_t lazyCalls = 0;
  if (!options_.fitFirst) room = Room::kNone;
  for (std::size_t k = 0; k < kept; ++k) {
    const std::size_t i = candidates[k];
    if (i >= n) continue;
    const std::size_t g = useUp && up[i] == 0 ? 1 : 0;
    const detail::PickKey ki = key(i);
    if (best[g] == kNone || ki < bestKey[g]) {
      best[g] = i;
      bestKey[g] = ki;
    }
    if (room == Room::kNone || (fit[g] != kNone && !(ki < fitKey[g]))) continue;
    EndpointRoom r;
    if (room == Room::kLazy && lazyCalls == kLazyRoomCalls) {
      if (room_.size() < n) room_.resize(n);  // grows with the pool only
      room = detector.room(endpoints, now, std::span<EndpointRoom>(room_.data(), n)) ? Room::kWhole
                                                                                     : Room::kNone;
    }
    if (room == Room::kWhole) {
      r = room_[i];
    } else if (room == Room::kLazy) {
      ++lazyCalls;
      if (!detector.room(endpoints.subspan(i, 1), now, std::span<EndpointRoom>(&r, 1))) {
        room = Room::kNone;  // no capacity model: every candidate fits (rule 3 has no effect)
      }
    }
    if (room == Room::kNone) continue;
    if (r.slots >= 1.0 && r.kvTokens >= tokens) {
      fit[g] = i;
      fitKey[g] = ki;
    }
  }
  const std::size_t g = best[0] != kNone ? 0 : 1;
  std::size_t chosen = best[g];
  if (room != Room::kNone && fit[g] != kNone) chosen = fit[g];
  if (chosen == kNone) chosen = 0;  // every candidate index was out of range
  cursor_ = chosen + 1 == n ? 0 : chosen + 1;
  return chosen;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
