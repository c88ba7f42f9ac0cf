// Implementation of holdback/flow/detail/victim_selector.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/victim_selector.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void VictimSelector::collect(const LeaseTable& leases, std::uint32_t band,
                                             bool below, const EvictionFilter& filter,
                                             std::vector<Candidate>& out, double& totalFootprint,
                                             bool& footprintsKnown) {
  leases.newestFirst(band, [&](const LeaseTable::Lease& l) {
    if (l.tokens == 0) footprintsKnown = false;
    totalFootprint += static_cast<double>(l.tokens);
    if (!below || l.revoked || !l.delivered || l.parked) return true;
    const EvictionCandidate c{l.id, l.priority, l.dispatchedAt, l.tokens, l.generated};
    const std::uint64_t kv = l.tokens > 0 ? l.tokens : l.kvTokens;
    if (filter.accept(c)) out.push_back(Candidate{c, 0.0, l.endpoint, static_cast<double>(kv)});
    return true;
  });
}

HOLDBACK_INLINE bool VictimSelector::gather(const EvictionCycle& cycle, Priority demandPrio,
                                            bool& byFootprint, double& total_footprint) noexcept {
  const EvictionOptions& ev = cycle.options;
  const double s = cycle.saturation;
  const std::span<const DemandTracker::Slot> slots = cycle.demand.slots();
  const std::size_t in_flight = cycle.leases.size();
  // Candidates: leases strictly below the demand band that the filter accepts.
  candidates_.reserve(in_flight);
  candidates_.clear();
  total_footprint = 0.0;
  bool footprints_known = true;
  for (std::uint32_t b = 0; b < slots.size(); ++b) {
    const bool below = slots[b].prio < demandPrio && ev.filter->mayAccept(slots[b].prio);
    // Bands at or above the demand (or refused by the filter) matter only for the footprint total.
    if (!below && !ev.footprintAware) continue;
    collect(cycle.leases, b, below, *ev.filter, candidates_, total_footprint, footprints_known);
  }
  if (candidates_.empty()) return false;
  const double credit = s / static_cast<double>(in_flight);  // mean footprint, saturation units
  if (!(credit > 0.0) || !std::isfinite(credit)) return false;
  byFootprint = ev.footprintAware && footprints_known && total_footprint > 0.0;
  for (Candidate& c : candidates_) {
    c.credit =
        byFootprint ? s * static_cast<double>(c.lease.footprintTokens) / total_footprint : credit;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Decisions

HOLDBACK_INLINE void VictimSelector::publishVictims(const EvictionCycle& cycle,
                                                    Priority protectedPrio,
                                                    ReplicaRestoreFigures& own) noexcept {
  const EvictionFilter& filter = *cycle.options.filter;
  const std::span<const DemandTracker::Slot> slots = cycle.demand.slots();
  for (std::uint32_t b = 0; b < slots.size(); ++b) {
    if (!(slots[b].prio < protectedPrio) || !filter.mayAccept(slots[b].prio)) continue;
    std::size_t taken = 0;  // newest first: a band's first kVictims are its youngest
    cycle.leases.newestFirst(b, [&](const LeaseTable::Lease& l) {
      if (l.revoked || !l.delivered || l.parked) return true;
      if (!filter.accept(
              EvictionCandidate{l.id, l.priority, l.dispatchedAt, l.tokens, l.generated})) {
        return true;
      }
      own.addVictim(ReplicaRestoreFigures::secondsOf(l.dispatchedAt));
      return ++taken < ReplicaRestoreFigures::kVictims;
    });
  }
}

HOLDBACK_INLINE std::size_t VictimSelector::ownAmongPoolYoungest(const ReplicaCoordinator& replicas,
                                                                 std::size_t need,
                                                                 std::size_t skipOthers) noexcept {
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    return a.lease.dispatchedAt > b.lease.dispatchedAt;
  });
  const std::size_t mine = replicas.ownAmongPoolYoungest(
      candidates_.size(), [this](std::size_t i) { return candidates_[i].lease.dispatchedAt; }, need,
      skipOthers);
  candidates_.erase(candidates_.begin() + static_cast<std::ptrdiff_t>(mine), candidates_.end());
  return mine;
}

HOLDBACK_INLINE std::size_t VictimSelector::chooseCovering(const EvictionOptions& ev,
                                                           std::size_t need, double net,
                                                           bool by_footprint) noexcept {
  const std::size_t cap = std::min(ev.maxRevocationsPerDecision, candidates_.size());
  std::size_t take = 0;
  if (by_footprint) {
    // Lowest priority first; within it, the fewest generated tokens per unit of credit; then the
    // order policy. Take until the net deficit is covered (at least one).
    sortCandidates(ev, /*byFootprint=*/true);
    double covered = 0.0;
    double cost = 0.0;
    while (take < cap && (take == 0 || covered < net)) {
      covered += candidates_[take].credit;
      cost += static_cast<double>(candidates_[take++].lease.generatedTokens);
    }
    // Greedy by rate can overpay at the last step: try each prefix of the greedy set completed by
    // the cheapest single candidate (not of a higher priority) that covers what is left.
    if (covered >= net) {
      std::size_t best_k = take;  // keep the greedy set
      std::size_t best_finisher = 0;
      double prefix_credit = 0.0;
      double prefix_cost = 0.0;
      for (std::size_t k = 0; k < take; ++k) {
        const double left = net - prefix_credit;
        for (std::size_t f = k; f < candidates_.size(); ++f) {
          const Candidate& c = candidates_[f];
          if (c.lease.priority > candidates_[take - 1].lease.priority) break;
          if (c.credit < left) continue;
          const double total = prefix_cost + static_cast<double>(c.lease.generatedTokens);
          if (total < cost) {
            cost = total;
            best_k = k;
            best_finisher = f;
          }
        }
        prefix_credit += candidates_[k].credit;
        prefix_cost += static_cast<double>(candidates_[k].lease.generatedTokens);
      }
      if (best_k < take) {
        std::swap(candidates_[best_k], candidates_[best_finisher]);
        take = best_k + 1;
      }
    }
  } else {
    take = std::min(need, cap);
    const EvictionOrderPolicy& order = *ev.order;
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(take),
                      candidates_.end(), [&](const Candidate& a, const Candidate& b) {
                        return order.less(a.lease, b.lease);
                      });
  }
  return take;
}

HOLDBACK_INLINE void VictimSelector::sortCandidates(const EvictionOptions& ev,
                                                    bool byFootprint) noexcept {
  const EvictionOrderPolicy& order = *ev.order;
  if (!byFootprint) {
    std::sort(candidates_.begin(), candidates_.end(),
              [&](const Candidate& a, const Candidate& b) { return order.less(a.lease, b.lease); });
    return;
  }
  std::sort(candidates_.begin(), candidates_.end(), [&](const Candidate& a, const Candidate& b) {
    if (a.lease.priority != b.lease.priority) return a.lease.priority < b.lease.priority;
    const double ca = static_cast<double>(a.lease.generatedTokens) / a.credit;
    const double cb = static_cast<double>(b.lease.generatedTokens) / b.credit;
    if (ca != cb) return ca < cb;
    return order.less(a.lease, b.lease);
  });
}

HOLDBACK_INLINE double VictimSelector::protectedFootprint(const EvictionCycle& cycle,
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

HOLDBACK_INLINE int VictimSelector::endpointClass(const Candidate& c,
                                                  double footprint) const noexcept {
  if (c.endpoint >= endpoint_room_.size()) return 3;  // unknown, or no longer in the pool
  const EndpointRoom& r = endpoint_room_[c.endpoint];
  const double slots = roomCount(r.slots);
  const double kv = roomCount(r.kvTokens);
  if (slots >= 1.0 && kv >= footprint) return 2;    // it fits there already
  if (!(kv + c.kvTokens >= footprint)) return 3;    // one revocation is not enough there
  return protected_here_[c.endpoint] != 0 ? 0 : 1;  // one revocation makes it fit
}

HOLDBACK_INLINE bool VictimSelector::readEndpoints(const EvictionCycle& cycle) noexcept {
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

HOLDBACK_INLINE void VictimSelector::markProtected(const EvictionCycle& cycle, Priority prio,
                                                   bool waiting, bool serve) noexcept {
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

HOLDBACK_INLINE std::size_t VictimSelector::chooseWhereWaiting(const EvictionCycle& cycle,
                                                               const RevocationPacer& pacer,
                                                               std::size_t victimBand,
                                                               bool byFootprint) noexcept {
  // Cheap first: nothing waits anywhere (the usual cycle), or no room per endpoint.
  if (cycle.sampler == nullptr || !cycle.sampler->endpointWaits() || !readEndpoints(cycle)) {
    return 0;
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
  if (!any) return 0;
  for (const RevocationPacer::Outstanding& o : pacer.outstanding()) {
    if (o.endpoint < n) protected_here_[o.endpoint] = 0;
  }
  for (const RevocationPacer::Cooling& c : pacer.cooling()) {
    if (c.endpoint < n) protected_here_[c.endpoint] = 0;
  }
  if (std::none_of(protected_here_.begin(), protected_here_.end(),
                   [](std::uint8_t v) { return v != 0; })) {
    return 0;
  }
  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gather(cycle, cycle.bands[victimBand - 1]->prio, by_footprint, total_footprint)) {
    return 0;
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
  if (take == 0) return 0;
  // One revocation per waiting protected lease: those on the endpoints acted on are served.
  markProtected(cycle, cycle.bands[victimBand - 1]->prio, /*waiting=*/true, /*serve=*/true);
  return take;
}

HOLDBACK_INLINE std::size_t VictimSelector::choosePerEndpoint(const EvictionCycle& cycle,
                                                              const RevocationPacer& pacer,
                                                              std::size_t victimBand,
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
  for (const RevocationPacer::Outstanding& o : pacer.outstanding()) {
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
