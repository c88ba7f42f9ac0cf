// Implementation of holdback/flow/pool_pressure.hpp (compiled by src/flow.cpp, or included by the
// header in header-only mode).
#pragma once

#include "holdback/flow/pool_pressure.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::int64_t largestKvCapacity(std::span<const Endpoint> pool) noexcept {
  std::int64_t largest = 0;
  for (const Endpoint& e : pool) {
    if (e.kvCapacityTokens <= 0) return 0;  // unknown somewhere: any footprint may fit there
    largest = std::max(largest, e.kvCapacityTokens);
  }
  return largest;
}

HOLDBACK_INLINE PoolPressureSampler::PoolPressureSampler(
    std::shared_ptr<EndpointSource> endpoints, std::shared_ptr<const SaturationDetector> detector)
    : endpoints_(std::move(endpoints)) {
  MutexLock lock(sample_mu_);
  detector_ = std::move(detector);
}

HOLDBACK_INLINE void PoolPressureSampler::setDetector(
    std::shared_ptr<const SaturationDetector> detector) noexcept {
  std::shared_ptr<const SaturationDetector> old;  // released outside the lock
  {
    MutexLock lock(detector_mu_);
    old = std::exchange(next_detector_, std::move(detector));
    detector_changed_.store(true, std::memory_order_release);
  }
}

HOLDBACK_INLINE void PoolPressureSampler::setFootprints(
    std::span<const BandFootprint> bands) noexcept {
  const std::size_t n = std::min(bands.size(), footprints_.size());
  for (std::size_t i = 0; i < n; ++i) {
    footprints_[i].priority.store(bands[i].priority, std::memory_order_relaxed);
    footprints_[i].protectedTokens.store(bands[i].protectedTokens, std::memory_order_relaxed);
    footprints_[i].ownTokens.store(bands[i].ownTokens, std::memory_order_relaxed);
  }
  footprint_count_.store(n, std::memory_order_release);
}

HOLDBACK_INLINE bool PoolPressureSampler::keepRoom(std::span<const Endpoint> pool,
                                                   std::span<const EndpointRoom> room) noexcept {
  const std::size_t n = std::min(pool.size(), room.size());
  MutexLock lock(room_mu_);
  if (kept_room_.capacity() < n || kept_waits_.capacity() < n) {
    HOLDBACK_TRY {
      kept_room_.reserve(n);
      kept_waits_.reserve(n);
    }
    HOLDBACK_CATCH_ALL {
      kept_room_.clear();
      kept_waits_.clear();
      kept_waits_any_.store(false, std::memory_order_relaxed);
      return false;
    }
  }
  kept_room_.clear();  // within capacity from here: no allocation
  kept_waits_.clear();
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    const Endpoint& e = pool[i];
    EndpointRoom r = room[i];
    const bool tokens_known = e.kvCapacityTokens > 0 && e.inFlightTokens >= 0;
    const bool slots_known = e.maxRunningRequests > 0 && e.inFlightRequests >= 0;
    if (std::isinf(r.kvTokens) && tokens_known) {
      r.kvTokens = std::max(
          0.0, static_cast<double>(e.kvCapacityTokens) - static_cast<double>(e.inFlightTokens));
    }
    if (std::isinf(r.slots) && slots_known) {
      r.slots = std::max(
          0.0, static_cast<double>(e.maxRunningRequests) - static_cast<double>(e.inFlightRequests));
    }
    const bool waits = e.waitingQueueSize >= 0.5 ||
                       (tokens_known && e.inFlightTokens > e.kvCapacityTokens) ||
                       (slots_known && e.inFlightRequests > e.maxRunningRequests);
    kept_room_.push_back(r);
    kept_waits_.push_back(waits ? 1 : 0);
    any = any || waits;
  }
  kept_waits_any_.store(any, std::memory_order_relaxed);
  return n > 0;
}

HOLDBACK_INLINE bool PoolPressureSampler::copyEndpointRoom(
    std::vector<EndpointRoom>& out, std::vector<std::uint8_t>& waits) const noexcept {
  MutexLock lock(room_mu_);
  if (out.capacity() < kept_room_.size() || waits.capacity() < kept_waits_.size()) {
    HOLDBACK_TRY {
      out.reserve(kept_room_.size());
      waits.reserve(kept_waits_.size());
    }
    HOLDBACK_CATCH_ALL {
      out.clear();
      waits.clear();
      return false;
    }
  }
  out.assign(kept_room_.begin(), kept_room_.end());
  waits.assign(kept_waits_.begin(), kept_waits_.end());
  return !out.empty();
}

HOLDBACK_INLINE void PoolPressureSampler::limitPastThreshold(std::span<const Endpoint> pool,
                                                             std::span<EndpointRoom> room,
                                                             TimePoint now) const noexcept {
  const PastThreshold mode = past_mode_.load(std::memory_order_relaxed);
  if (mode == PastThreshold::kDetector) return;
  const std::int64_t replicas = past_replicas_.load(std::memory_order_relaxed);
  if (mode == PastThreshold::kTurn && replicas <= 1) return;
  const ReplicaTurn turn{past_rank_.load(std::memory_order_relaxed), replicas,
                         Duration{past_offset_.load(std::memory_order_relaxed)}};
  const std::size_t n = std::min(pool.size(), room.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (mode == PastThreshold::kNone || !turn.hasTurn(i, now)) {
      room[i].kvCapacityLeft = 0.0;
    }
  }
}

HOLDBACK_INLINE std::optional<PoolPressure> PoolPressureSampler::sample(TimePoint now) noexcept {
  detail::PressureSample s;
  if (!sampleInto(now, true, s)) return std::nullopt;
  return s.pressure();
}

HOLDBACK_INLINE std::optional<PoolPressure> PoolPressureSampler::samplePool(
    TimePoint now) noexcept {
  detail::PressureSample s;
  if (!sampleInto(now, false, s)) return std::nullopt;
  return s.pressure();
}

HOLDBACK_INLINE bool PoolPressureSampler::sampleInto(TimePoint now, bool with_saturation,
                                                     detail::PressureSample& out) noexcept {
  if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return false;
  std::shared_ptr<const SaturationDetector> retired;  // released after the lock
  {
    MutexLock lock(sample_mu_);
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    if (detector_changed_.load(std::memory_order_acquire)) {
      MutexLock detector_lock(detector_mu_);
      if (next_detector_) retired = std::exchange(detector_, std::move(next_detector_));
      detector_changed_.store(false, std::memory_order_relaxed);
    }
    const std::span<const Endpoint> pool = endpoints_->endpoints(now);
    out.poolEmpty = pool.empty();
    out.largestKvCapacityTokens = largestKvCapacity(pool);
    if (with_saturation) {
      out.saturation = evaluator_.evaluate(*detector_, pool, now);
      out.endpoints = pool.size();
      if (out.saturation.effective >= 1.0)
        out.staleEndpoints = detector_->staleEndpoints(pool, now);
      const std::size_t bands = footprint_count_.load(std::memory_order_acquire);
      const bool keep = keep_room_.load(std::memory_order_relaxed);
      bool kept = false;
      if ((bands > 0 || keep) && !pool.empty()) {
        if (room_scratch_.size() < pool.size()) {
          HOLDBACK_TRY {
            room_scratch_.resize(pool.size());
          }
          HOLDBACK_CATCH_ALL {
            room_scratch_.clear();
          }
        }
        const std::span<EndpointRoom> room(room_scratch_.data(),
                                           std::min(room_scratch_.size(), pool.size()));
        if (room.size() == pool.size() && detector_->room(pool, now, room)) {
          limitPastThreshold(pool, room, now);
          if (keep) kept = keepRoom(pool, room);
          for (std::size_t i = 0; i < bands; ++i) {
            const FootprintSlot& f = footprints_[i];
            out.room[i].priority = f.priority.load(std::memory_order_relaxed);
            const BandRoom r = bandRoom(room, f.protectedTokens.load(std::memory_order_relaxed),
                                        f.ownTokens.load(std::memory_order_relaxed));
            out.room[i].fits = r.fits;
            out.room[i].fitsAfter = r.fitsAfter;
          }
          out.roomBands = bands;
        }
      }
      if (keep && !kept) keepRoom({}, {});
    }
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
  }
  return true;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
