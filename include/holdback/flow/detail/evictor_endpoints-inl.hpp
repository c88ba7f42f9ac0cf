// Restoration per endpoint: part of the implementation of holdback/flow/detail/evictor.hpp
// (compiled by src/flow.cpp, or included by flow_controller-inl.hpp in header-only mode). Kept
// apart from evictor-inl.hpp, which holds the pool-wide decisions.
#pragma once

#include "holdback/flow/detail/evictor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE double Evictor::protectedFootprint(const Cycle& cycle,
                                                   std::size_t victimBand) noexcept {
  double weighted = 0.0;
  double rates = 0.0;
  double plain = 0.0;
  double declared = 0.0;
  for (std::size_t j = 0; j < victimBand && j < cycle.bands.size(); ++j) {
    const DemandTracker::Slot* slot = cycle.demand.cachedSlotOf(*cycle.bands[j]);
    if (slot == nullptr) continue;
    const BandDemand d = slot->estimator.demand();
    if (!(d.footprintTokens > 0.0) || !std::isfinite(d.footprintTokens)) continue;
    if (d.arrivalRate > 0.0 && std::isfinite(d.arrivalRate)) {
      weighted += d.arrivalRate * d.footprintTokens;
      rates += d.arrivalRate;
    }
    plain += d.footprintTokens;
    declared += 1.0;
  }
  if (rates > 0.0) return weighted / rates;
  return declared > 0.0 ? plain / declared : 0.0;  // 0: a protected request needs a slot only
}

HOLDBACK_INLINE int Evictor::endpointClass(const Candidate& c, double footprint) const noexcept {
  if (c.endpoint >= endpoint_room_.size()) return 3;  // unknown, or no longer in the pool
  const EndpointRoom& r = endpoint_room_[c.endpoint];
  const double slots = roomCount(r.slots);
  const double kv = roomCount(r.kvTokens);
  if (slots >= 1.0 && kv >= footprint) return 2;    // it fits there already
  if (!(kv + c.kvTokens >= footprint)) return 3;    // one revocation is not enough there
  return protected_here_[c.endpoint] != 0 ? 0 : 1;  // one revocation makes it fit
}

HOLDBACK_INLINE bool Evictor::readEndpoints(const Cycle& cycle) noexcept {
  if (cycle.sampler == nullptr ||
      !cycle.sampler->copyEndpointRoom(endpoint_room_, endpoint_waits_)) {
    return false;
  }
  const std::size_t n = endpoint_room_.size();
  if (protected_here_.capacity() < n) {
    HOLDBACK_TRY {
      protected_here_.reserve(n);
    }
    HOLDBACK_CATCH_ALL {
      return false;
    }
  }
  protected_here_.assign(n, 0);  // within capacity: no allocation
  return endpoint_waits_.size() == n;
}

HOLDBACK_INLINE void Evictor::markProtected(const Cycle& cycle, Priority prio, bool waiting,
                                            bool serve) noexcept {
  const std::size_t n = protected_here_.size();
  const std::span<const DemandTracker::Slot> slots = cycle.demand.slots();
  for (std::uint32_t b = 0; b < slots.size(); ++b) {
    if (slots[b].prio < prio) continue;
    const double hold = slots[b].estimator.demand().holdingTime;
    const bool measured = hold > 0.0 && std::isfinite(hold);
    cycle.leases.newestFirstMutable(b, [&](LeaseTable::Lease& l) {
      if (waiting && measured &&
          std::chrono::duration<double>(elapsed(l.dispatchedAt, cycle.now)).count() >= hold) {
        return false;  // newest first: the rest of the band is older still
      }
      if (l.endpoint >= n || (waiting && (l.restoredFor || l.started))) return true;
      if (serve) {
        if (protected_here_[l.endpoint] != 0) l.restoredFor = true;
      } else {
        protected_here_[l.endpoint] = 1;
      }
      return true;
    });
  }
}

HOLDBACK_INLINE bool Evictor::restoreWhereWaiting(const Cycle& cycle, std::size_t victimBand,
                                                  bool byFootprint, RevocationBatch& out) noexcept {
  // Cheap first: nothing waits anywhere (the usual cycle), or no room per endpoint.
  if (cycle.sampler == nullptr || !cycle.sampler->endpointWaits() || !readEndpoints(cycle)) {
    return false;
  }
  const std::size_t n = endpoint_room_.size();
  markProtected(cycle, cycle.bands[victimBand - 1]->prio, /*waiting=*/true, /*serve=*/false);
  // The endpoints to act on: a request waits, a young protected lease is there, and no
  // revocation is outstanding or cooling there (kept in protected_here_: 1 = act).
  bool any = false;
  for (std::size_t e = 0; e < n; ++e) {
    if (protected_here_[e] != 0 && endpoint_waits_[e] == 0) protected_here_[e] = 0;
    any = any || protected_here_[e] != 0;
  }
  if (!any) return false;
  for (const Outstanding& o : outstanding_) {
    if (o.endpoint < n) protected_here_[o.endpoint] = 0;
  }
  for (const Cooling& c : cooling_) {
    if (c.endpoint < n) protected_here_[c.endpoint] = 0;
  }
  if (std::none_of(protected_here_.begin(), protected_here_.end(),
                   [](std::uint8_t v) { return v != 0; })) {
    return false;
  }
  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gatherCandidates(cycle, cycle.bands[victimBand - 1]->prio, by_footprint, total_footprint)) {
    return false;
  }
  sortCandidates(cycle.options, byFootprint && by_footprint);
  const double footprint = protectedFootprint(cycle, victimBand);
  const std::size_t cap = std::min(cycle.options.maxRevocationsPerDecision, candidates_.size());
  std::size_t take = 0;
  for (std::size_t e = 0; e < n; ++e) {
    if (protected_here_[e] == 0) continue;
    if (take >= cap) {  // not acted on this time
      protected_here_[e] = 0;
      continue;
    }
    // The first (pool-wide order) victim there that makes a protected request fit, else the
    // one holding the most KV there.
    const double kv = roomCount(endpoint_room_[e].kvTokens);
    std::size_t chosen = candidates_.size();
    for (std::size_t j = take; j < candidates_.size(); ++j) {
      const Candidate& c = candidates_[j];
      if (c.endpoint != e) continue;
      if (kv + c.kvTokens >= footprint) {
        chosen = j;
        break;
      }
      if (chosen == candidates_.size() || c.kvTokens > candidates_[chosen].kvTokens) chosen = j;
    }
    if (chosen == candidates_.size()) {  // nothing revocable there
      protected_here_[e] = 0;
      continue;
    }
    std::rotate(candidates_.begin() + static_cast<std::ptrdiff_t>(take),
                candidates_.begin() + static_cast<std::ptrdiff_t>(chosen),
                candidates_.begin() + static_cast<std::ptrdiff_t>(chosen) + 1);
    ++take;
  }
  if (take == 0) return false;
  // One revocation per waiting protected lease: those on the endpoints acted on are served.
  markProtected(cycle, cycle.bands[victimBand - 1]->prio, /*waiting=*/true, /*serve=*/true);
  revokeFirst(cycle, cycle.bands[0]->prio, take, /*restored=*/true, out);
  return true;
}

HOLDBACK_INLINE std::size_t Evictor::choosePerEndpoint(const Cycle& cycle, std::size_t victimBand,
                                                       std::size_t need, double net,
                                                       bool byFootprint) noexcept {
  if (!readEndpoints(cycle)) return 0;
  const std::size_t n = endpoint_room_.size();
  const bool known = std::any_of(candidates_.begin(), candidates_.end(),
                                 [n](const Candidate& c) { return c.endpoint < n; });
  if (!known) return 0;
  const double footprint = protectedFootprint(cycle, victimBand);
  // The endpoints holding a protected lease: where a protected request runs or waits.
  markProtected(cycle, cycle.bands[victimBand - 1]->prio, /*waiting=*/false, /*serve=*/false);
  // The victims already revoked hold their slot and KV until they end: credit them to their
  // endpoints (the sensor does not show them yet).
  for (const Outstanding& o : outstanding_) {
    const LeaseTable::Lease* l = cycle.leases.find(o.id);
    if (l == nullptr || l->endpoint >= n) continue;
    EndpointRoom& r = endpoint_room_[l->endpoint];
    r.slots = roomCount(r.slots) + 1.0;
    r.kvTokens =
        roomCount(r.kvTokens) + static_cast<double>(l->tokens > 0 ? l->tokens : l->kvTokens);
  }
  sortCandidates(cycle.options, byFootprint);
  const std::size_t cap = std::min(cycle.options.maxRevocationsPerDecision, candidates_.size());
  std::size_t take = 0;
  double covered = 0.0;
  while (take < cap && (byFootprint ? (take == 0 || covered < net) : take < need)) {
    std::size_t best = take;
    int best_class = 4;
    for (std::size_t j = take; j < candidates_.size() && best_class > 0; ++j) {
      const int cls = endpointClass(candidates_[j], footprint);
      if (cls < best_class) {
        best = j;
        best_class = cls;
      }
    }
    // The chosen one moves up; the others keep their pool-wide order.
    std::rotate(candidates_.begin() + static_cast<std::ptrdiff_t>(take),
                candidates_.begin() + static_cast<std::ptrdiff_t>(best),
                candidates_.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    const Candidate& c = candidates_[take];
    if (c.endpoint < n) {  // its slot and KV are free there once it ends
      EndpointRoom& r = endpoint_room_[c.endpoint];
      r.slots = roomCount(r.slots) + 1.0;
      r.kvTokens = roomCount(r.kvTokens) + c.kvTokens;
    }
    covered += c.credit;
    ++take;
  }
  return take;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
