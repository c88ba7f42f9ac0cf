// ControllerCore's lifecycle and observation: the expiry sweep, garbage collection,
// reconfiguration, shutdown and stats (compiled by src/flow.cpp, or included by
// flow_controller-inl.hpp in header-only mode). Kept apart from controller_core-inl.hpp, which
// holds the admission and dispatch paths.
#pragma once

#include "holdback/flow/detail/controller_core.hpp"

#include <utility>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
// ---------------------------------------------------------------------------------------------
// Expiry, GC, topology

HOLDBACK_INLINE std::size_t ControllerCore::expire(TimePoint now) noexcept {
  PressureSample pressure;
  const bool sampled = sampler_.sampleInto(now, false, pressure);  // host code, no lock
  return expireImpl(now, sampled ? &pressure : nullptr);
}

HOLDBACK_INLINE std::size_t ControllerCore::expire(TimePoint now,
                                                   const PoolPressure& pressure) noexcept {
  const PressureSample sample = PressureSample::of(pressure);
  return expireImpl(now, &sample);
}

HOLDBACK_INLINE std::size_t ControllerCore::expireImpl(TimePoint now,
                                                       const PressureSample* pressure) noexcept {
  std::vector<Completion> finalized;
  std::vector<Retired> retired;  // freed after the lock
  {
    MutexLock lock(mu_);
    if (pressure != nullptr) applyPressure(now, *pressure, false);
    if (stopped_) return 0;
    std::vector<std::pair<Item*, Outcome>> victims;
    const Duration no_endpoint_ttl = settings_.noEndpointTtl;
    const PoolRegime regime = regime_;
    const std::int64_t largest_kv = largest_kv_;
    table_.forEachItem([&](Item* item) {
      if (auto dead = deadOutcomeOf(*item, now, largest_kv, no_endpoint_ttl, regime)) {
        victims.emplace_back(item, *dead);
      }
    });
    finalized.resize(victims.size());
    retired.reserve(victims.size());
    for (std::size_t i = 0; i < victims.size(); ++i) {
      retired.push_back(table_.finalize(victims[i].first, victims[i].second, now, finalized[i]));
    }
    table_.collectGarbage(now, flow_idle_timeout_, band_idle_timeout_, retired);
    evictor_.reapLeases(leases_, now, settings_.leaseTimeout, settings_.eviction);
    evictor_.retireRevocations(now, settings_.eviction, leases_);
  }
  for (Completion& c : finalized) deliver(std::move(c));
  return finalized.size();
}

HOLDBACK_INLINE void ControllerCore::setDesiredPriorities(
    std::span<const Priority> priorities) noexcept {
  MutexLock lock(mu_);
  table_.setDesired(priorities);
}

HOLDBACK_INLINE Diagnostics ControllerCore::reconfigure(FlowControllerOptions o) noexcept {
  Diagnostics d;
  // The create-only collaborators and timings are kept from create() (not validated here).
  validateFlowOptions(o, d, /*create=*/false);
  if (o.eviction.enabled && !evict_) {
    d.error("/eviction/enabled", "eviction needs the evict callback given at create()");
  }
  if (d.hasErrors()) return d;
  // The detector takes effect from the next sample; the sampler never makes this wait.
  sampler_.setDetector(std::move(o.detector));
  Settings settings = settingsOf(o);
  BandTopology topology = topologyOf(o);
  // Fairness state carry-over: the replaced policies and their replacements are read under mu_;
  // each replacement inherits its predecessor's state (FairnessPolicy::inheritState, host-
  // pluggable) under no controller lock, before the swap. Lock order: mu_ is never held while a
  // policy's own lock is taken here.
  std::vector<BandTable::FairnessHandover> handovers;
  {
    MutexLock lock(mu_);
    handovers = table_.fairnessHandovers(topology, o.bands);
  }
  if (!handovers.empty()) {
    const TimePoint now = clock_();
    for (const auto& [previous, replacement] : handovers) {
      HOLDBACK_TRY {
        replacement->inheritState(*previous, now);
      }
      HOLDBACK_CATCH_ALL {
        // The host's policy threw: it starts without (part of) the previous state.
      }
    }
  }
  {
    MutexLock lock(mu_);
    std::swap(settings_, settings);  // the old policy is released after the lock
    sampler_.keepEndpointRoom(settings_.eviction.enabled &&
                              settings_.eviction.restoreReserve.enabled);
    // New smoothing constants restart the estimators (the leases are kept).
    demand_.resmooth(settings_.policy->demandSmoothing());
    table_.applyBands(std::move(topology), o.bands);
  }
  return d;
}

HOLDBACK_INLINE void ControllerCore::shutdown(TimePoint now) noexcept {
  std::vector<Completion> finalized;
  std::vector<Retired> retired;  // freed after the lock
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    const std::vector<Item*> all = table_.allItems();  // arrival order: deterministic
    finalized.resize(all.size());
    retired.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      retired.push_back(table_.finalize(
          all[i], {QueueOutcome::kEvictedOther, OutcomeCause::kNotRunning}, now, finalized[i]));
    }
  }
  for (Completion& c : finalized) deliver(std::move(c));
}

// ---------------------------------------------------------------------------------------------
// Observation

HOLDBACK_INLINE FlowControllerStats ControllerCore::stats() const {
  FlowControllerStats out;
  MutexLock lock(mu_);
  table_.fillStats(out, settings_.fairnessIdLabelLimit);
  out.maxRequests = settings_.maxRequests;
  out.maxBytes = settings_.maxBytes;
  out.lastSaturation = last_saturation_;
  out.lastPrefillSaturation = last_prefill_;
  out.lastDecodeSaturation = last_decode_;
  out.poolEmpty = regime_.empty;
  out.cycles = cycles_;
  out.staleGatedCycles = stale_gated_cycles_;
  out.yieldedCycles = yielded_cycles_;
  out.stopped = stopped_;
  out.eviction = evictor_.stats();
  out.eviction.enabled = settings_.eviction.enabled;
  out.eviction.leases = leases_.size();
  return out;
}

HOLDBACK_INLINE std::vector<Priority> ControllerCore::bandPriorities() const {
  MutexLock lock(mu_);
  return table_.priorities();
}

HOLDBACK_INLINE PoolRegime ControllerCore::poolRegime() const noexcept {
  MutexLock lock(mu_);
  return regime_;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
