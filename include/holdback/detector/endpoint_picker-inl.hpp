// Implementation of holdback/detector/endpoint_picker.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/endpoint_picker.hpp"

#include <cmath>
#include <limits>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {

// Whether a / as is below b / bs: the counts themselves for equal slots, else the cross products
// (exact below 2^53).
[[nodiscard]] inline bool perSlotBelow(std::int64_t a, std::int64_t as, std::int64_t b,
                                       std::int64_t bs) noexcept {
  if (as == bs) return a < b;
  return static_cast<double>(a) * static_cast<double>(bs) <
         static_cast<double>(b) * static_cast<double>(as);
}

// Rules 4-6 of one endpoint (smaller is better), compared in that order. An unknown (NaN) waiting
// queue is compared as +infinity, so the order is total and a pick does not depend on the order
// the endpoints are offered in.
struct PickKey {
  std::int64_t above = 0;  // priority routing: in flight of the request's priority or above
  std::int64_t inFlight = 0;
  std::int64_t slots = 1;  // rule 4 compares per slot (1 unless every slot count is known)
  double waiting = 0.0;
  std::size_t distance = 0;

  // Whether this key's load is below o's: above / slots first (0 without priority routing), then
  // inFlight / slots.
  [[nodiscard]] bool lighter(const PickKey& o) const noexcept {
    if (slots == o.slots) return above != o.above ? above < o.above : inFlight < o.inFlight;
    if (perSlotBelow(above, slots, o.above, o.slots)) return true;
    if (perSlotBelow(o.above, o.slots, above, slots)) return false;
    return perSlotBelow(inFlight, slots, o.inFlight, o.slots);
  }
  [[nodiscard]] bool operator<(const PickKey& o) const noexcept {
    if (lighter(o)) return true;
    if (o.lighter(*this)) return false;
    if (waiting < o.waiting) return true;
    if (o.waiting < waiting) return false;
    return distance < o.distance;
  }
};

// Whether endpoint e can never start a request of `startTokens` (rule 2): its KV capacity is known
// and smaller.
[[nodiscard]] inline bool cannotHold(const Endpoint& e, std::int64_t startTokens) noexcept {
  return startTokens > 0 && e.kvCapacityTokens > 0 && startTokens > e.kvCapacityTokens;
}

// One pick's pass over the candidates offered to it, in the filter's order. Per group (0: up,
// 1: down; rule 2) it keeps the best candidate by rules 4-6 and, with fitFirst, the best one
// where the request starts now (rule 3). offer() asks whether an endpoint is a candidate (the
// detector's filter) and reads its room only when it would beat one of those two: an endpoint
// with more requests in flight than both is passed over after one load.
class PickPass {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // Room reads one endpoint at a time before the whole pool's room is read in one call.
  static constexpr std::size_t kLazyRoomCalls = 16;

  PickPass(std::span<const Endpoint> endpoints, const SaturationDetector& detector, TimePoint now,
           std::span<const std::uint8_t> up, std::int64_t startTokens, std::size_t cursor,
           bool fitFirst, std::vector<EndpointRoom>& room,
           std::span<const std::int64_t> above) noexcept
      : endpoints_(endpoints),
        above_(above.size() >= endpoints.size() ? above : std::span<const std::int64_t>{}),
        detector_(detector),
        now_(now),
        up_(up),
        use_up_(up.size() >= endpoints.size()),
        tokens_(startTokens > 0 ? static_cast<double>(startTokens) : 0.0),
        cursor_(cursor),
        room_(room),
        room_mode_(fitFirst ? RoomMode::kLazy : RoomMode::kNone) {
    // Rule 4 per slot when every endpoint's slot count is known (mixed pools).
    per_slot_ = !endpoints.empty();
    for (const Endpoint& e : endpoints) {
      if (e.maxRunningRequests <= 0) per_slot_ = false;
    }
  }

  // Offers endpoint i (< endpoints.size()); `candidate(i)` is asked only when i would beat the
  // group's best or best fitting candidate.
  template <class Candidate>
  void offer(std::size_t i, Candidate&& candidate) noexcept {
    const std::size_t g = use_up_ && up_[i] == 0 ? 1 : 0;
    const Endpoint& e = endpoints_[i];
    const std::size_t n = endpoints_.size();
    const PickKey key{above_.empty() ? 0 : above_[i], e.inFlightRequests,
                      per_slot_ ? e.maxRunningRequests : 1,
                      std::isnan(e.waitingQueueSize) ? std::numeric_limits<double>::infinity()
                                                     : e.waitingQueueSize,
                      i >= cursor_ ? i - cursor_ : i + n - cursor_};
    if (pass_over_set_[g] && pass_over_[g].lighter(key)) return;
    const bool forBest = best_[g] == kNone || key < best_key_[g];
    const bool forFit = room_mode_ != RoomMode::kNone && (fit_[g] == kNone || key < fit_key_[g]);
    if (forBest) {
      if (!candidate(i)) return;
      best_[g] = i;
      best_key_[g] = key;
      if (forFit && fits(i)) {
        fit_[g] = i;
        fit_key_[g] = key;
      }
    } else {
      // Only the best fitting one could change: the room first (on a pool where little fits,
      // the filter is then asked about few endpoints).
      if (!forFit || !fits(i) || !candidate(i)) return;
      fit_[g] = i;
      fit_key_[g] = key;
    }
    updatePassOver();
  }

  // Whether any candidate was offered.
  [[nodiscard]] bool any() const noexcept { return best_[0] != kNone || best_[1] != kNone; }

  // The pick: the up group's (the down one's when no candidate is up) best fitting candidate,
  // else its best; kNone when no candidate was offered.
  [[nodiscard]] std::size_t chosen() const noexcept {
    const std::size_t g = best_[0] != kNone ? 0 : 1;
    if (room_mode_ != RoomMode::kNone && fit_[g] != kNone) return fit_[g];
    return best_[g];
  }

 private:
  enum class RoomMode : std::uint8_t { kLazy, kWhole, kNone };

  // Rule 3 for endpoint i: a free slot and KV for the request's input. The first kLazyRoomCalls
  // reads ask for one endpoint each, the next one for the whole pool; a detector without a
  // capacity model turns rule 3 off (every candidate fits).
  bool fits(std::size_t i) noexcept {
    if (room_mode_ == RoomMode::kWhole) {
      return room_[i].slots >= 1.0 && room_[i].kvTokens >= tokens_;
    }
    return readRoom(i);
  }
  bool readRoom(std::size_t i) noexcept {
    const std::size_t n = endpoints_.size();
    EndpointRoom r;
    if (room_mode_ == RoomMode::kLazy && lazy_room_calls_ == kLazyRoomCalls) {
      if (room_.size() < n) room_.resize(n);  // grows with the pool only
      room_mode_ = detector_.room(endpoints_, now_, std::span<EndpointRoom>(room_.data(), n))
                       ? RoomMode::kWhole
                       : RoomMode::kNone;
    }
    if (room_mode_ == RoomMode::kWhole) {
      r = room_[i];
    } else if (room_mode_ == RoomMode::kLazy) {
      ++lazy_room_calls_;
      if (!detector_.room(endpoints_.subspan(i, 1), now_, std::span<EndpointRoom>(&r, 1))) {
        room_mode_ = RoomMode::kNone;
      }
    }
    return room_mode_ != RoomMode::kNone && r.slots >= 1.0 && r.kvTokens >= tokens_;
  }

  // pass_over_[g]: an endpoint of group g with a higher load (rule 4) beats neither its best
  // nor (rule 3 on) its best fitting candidate.
  void updatePassOver() noexcept {
    const bool fit = room_mode_ != RoomMode::kNone;
    for (std::size_t g = 0; g < 2; ++g) {
      if (best_[g] == kNone || (fit && fit_[g] == kNone)) {
        pass_over_set_[g] = false;
      } else {
        const PickKey& b = best_key_[g];
        const PickKey& f = fit ? fit_key_[g] : b;
        pass_over_[g] = b.lighter(f) ? f : b;
        pass_over_set_[g] = true;
      }
    }
  }

  std::span<const Endpoint> endpoints_;
  std::span<const std::int64_t> above_;  // priority routing's counts; empty: off
  const SaturationDetector& detector_;
  TimePoint now_;
  std::span<const std::uint8_t> up_;
  bool use_up_;
  double tokens_;
  std::size_t cursor_;
  std::vector<EndpointRoom>& room_;
  RoomMode room_mode_;
  std::size_t lazy_room_calls_ = 0;
  std::size_t best_[2] = {kNone, kNone};
  PickKey best_key_[2];
  std::size_t fit_[2] = {kNone, kNone};
  PickKey fit_key_[2];
  bool per_slot_ = false;
  PickKey pass_over_[2];
  bool pass_over_set_[2] = {false, false};
};

}  // namespace detail

HOLDBACK_INLINE EndpointPicker::EndpointPicker(std::size_t capacity, EndpointPickerOptions options)
    : scratch_(capacity),
      kept_(capacity),
      room_(options.fitFirst ? capacity : 0),
      options_(options) {}

HOLDBACK_INLINE std::optional<std::size_t> EndpointPicker::pick(
    std::span<const Endpoint> endpoints, const SaturationDetector& detector, TimePoint now,
    std::span<const std::uint8_t> up, std::int64_t startTokens,
    std::span<const std::int64_t> inFlightAtOrAbove) noexcept {
  using detail::PickPass;
  const std::size_t n = endpoints.size();
  if (n == 0) return std::nullopt;
  if (scratch_.size() < n) scratch_.resize(n);  // grows with the pool only
  if (cursor_ >= n) cursor_ = 0;
  const std::span<const std::int64_t> above =
      options_.priorityRouting ? inFlightAtOrAbove : std::span<const std::int64_t>{};
  std::size_t chosen = PickPass::kNone;
  bool filtered = false;  // the detector's filter kept no endpoint
  if (detector.filtersEachEndpointAlone()) {
    // One pass over the pool, the filter asked one endpoint at a time and only for an endpoint
    // that would win; after kLazyFilterCalls such calls, the whole pool's in one call.
    constexpr std::size_t kLazyFilterCalls = 32;
    std::size_t lazyCalls = 0;
    bool whole = false;
    auto candidate = [&](std::size_t i) noexcept {
      if (!whole && lazyCalls == kLazyFilterCalls) {
        markKept(endpoints, detector, now);
        whole = true;
      }
      if (whole) return kept_[i] != 0;
      ++lazyCalls;
      std::size_t index = 0;
      const FilterResult one = detector.filter(endpoints.subspan(i, 1), now, std::span(&index, 1));
      return one.kept == 1 && !one.failOpen;
    };
    PickPass pass(endpoints, detector, now, up, startTokens, cursor_, options_.fitFirst, room_,
                  above);
    for (std::size_t i = 0; i < n; ++i) pass.offer(i, candidate);
    chosen = pass.chosen();
    filtered = true;
  }
  if (chosen == PickPass::kNone) {
    // Rule 1 over the whole pool's filter; when it keeps none, every endpoint is a candidate.
    const std::span<std::size_t> candidates(scratch_.data(), n);
    std::size_t kept = filtered ? 0 : detector.filter(endpoints, now, candidates).kept;
    if (kept == 0) {
      for (std::size_t i = 0; i < n; ++i) candidates[i] = i;
      kept = n;
    }
    PickPass pass(endpoints, detector, now, up, startTokens, cursor_, options_.fitFirst, room_,
                  above);
    for (std::size_t k = 0; k < kept; ++k) {
      if (candidates[k] < n) pass.offer(candidates[k], [](std::size_t) noexcept { return true; });
    }
    chosen = pass.chosen();
  }
  if (chosen != PickPass::kNone && chosen < n &&
      detail::cannotHold(endpoints[chosen], startTokens)) {
    chosen = pickAmongHolders(endpoints, detector, now, up, startTokens, above, chosen);
  }
  if (chosen == PickPass::kNone) chosen = 0;  // every candidate index was out of range
  cursor_ = chosen + 1 == n ? 0 : chosen + 1;
  return chosen;
}

// kept_[i] = 1 for each endpoint the detector's filter keeps over the whole pool (none when it
// fails open).
HOLDBACK_INLINE void EndpointPicker::markKept(std::span<const Endpoint> endpoints,
                                              const SaturationDetector& detector,
                                              TimePoint now) noexcept {
  const std::size_t n = endpoints.size();
  if (kept_.size() < n) kept_.resize(n);  // grows with the pool only
  for (std::size_t k = 0; k < n; ++k) kept_[k] = 0;
  const FilterResult all = detector.filter(endpoints, now, std::span(scratch_.data(), n));
  if (!all.failOpen) {
    for (std::size_t k = 0; k < all.kept; ++k) {
      if (scratch_[k] < n) kept_[scratch_[k]] = 1;
    }
  }
}

// Rule 2 (rare: the pick by the other rules cannot hold the request): the same rules among the
// candidates that can hold it; when none can, among every endpoint that can; else `fallback`.
HOLDBACK_INLINE std::size_t EndpointPicker::pickAmongHolders(
    std::span<const Endpoint> endpoints, const SaturationDetector& detector, TimePoint now,
    std::span<const std::uint8_t> up, std::int64_t startTokens, std::span<const std::int64_t> above,
    std::size_t fallback) noexcept {
  using detail::PickPass;
  const std::size_t n = endpoints.size();
  markKept(endpoints, detector, now);
  for (const bool filtered : {true, false}) {
    PickPass pass(endpoints, detector, now, up, startTokens, cursor_, options_.fitFirst, room_,
                  above);
    for (std::size_t i = 0; i < n; ++i) {
      pass.offer(i, [&](std::size_t j) noexcept {
        return (!filtered || kept_[j] != 0) && !detail::cannotHold(endpoints[j], startTokens);
      });
    }
    if (const std::size_t c = pass.chosen(); c != PickPass::kNone) return c;
  }
  return fallback;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
