// Implementation of holdback/flow/detail/evictor.hpp (compiled by src/flow.cpp, or included by
// flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/evictor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void Evictor::reclaim(const Cycle& cycle, std::size_t gated,
                                      RevocationBatch& out) noexcept {
  const EvictionOptions& ev = cycle.options;
  const TimePoint now = cycle.now;
  const double s = cycle.saturation;
  pacer_.retire(now, ev, cycle.leases);
  if (!pacer_.gateOpen()) return;  // stop-and-wait: gate closed

  // The eligible demand: the highest blocked band (from the gated one down) with queued work.
  Band* demand = nullptr;
  double ceiling = 0.0;
  for (std::size_t j = gated; j < cycle.bands.size(); ++j) {
    const double c = cycle.ceilings[j];
    if (!(c > 0.0) || !isGated(s, c) || cycle.bands[j]->queued_requests == 0) continue;
    // The burst trigger: the highest band only (the reserve of the bands above holds the others).
    if (j > 0 && ev.restoreReserve.enabled && ev.restoreReserve.burstSignificance > 0.0) return;
    demand = cycle.bands[j];
    ceiling = c;
    break;
  }
  if (demand == nullptr) return;
  const std::size_t in_flight = cycle.leases.size();
  if (in_flight == 0 || !std::isfinite(s)) return;

  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!selector_.gather(cycle, demand->prio, by_footprint, total_footprint)) return;
  const double credit = s / static_cast<double>(in_flight);  // mean footprint, saturation units
  const HeadOfLineDeficit deficit = headOfLineDeficit(s, ceiling, pacer_.pendingReclaim());
  double net = deficit.net;
  pacer_.setReclaimTarget(deficit.target);
  if (net < 0.0 || (net == 0.0 && pacer_.pendingReclaim() > 0.0)) return;
  std::size_t need = RevocationPacer::headOfLineCount(net, credit);

  // Wait-vs-evict: the releases expected anyway within the remaining tolerance.
  if (ev.waitForReleases.enabled) {
    // The demand band's head (its oldest request under FCFS) has waited this long already.
    Duration waited{0};
    if (const FlowQueueView* f = demand->bestHeadFlow(); f != nullptr && f->size() > 0) {
      waited = elapsed(static_cast<const Flow*>(f)->items.front()->enqueueTime, now);
    }
    const double horizon =
        std::chrono::duration<double>(ev.waitForReleases.tolerance - waited).count();
    if (horizon > 0.0) {
      // In leases, or in saturation units by footprint.
      const double expected = expectedReleases(cycle.leases, cycle.demand.slots(), now, horizon,
                                               by_footprint, s, total_footprint);
      if (by_footprint) {
        if (net - expected < 0.0 || (net - expected == 0.0 && expected > 0.0)) {
          pacer_.deferred();
          return;
        }
        net -= expected;
      } else {
        const auto freed = static_cast<std::size_t>(std::floor(expected + 1e-9));
        if (freed >= need) {
          pacer_.deferred();
          return;
        }
        need -= freed;
      }
    }
  }

  const std::size_t take = selector_.chooseCovering(ev, need, net, by_footprint);
  revokeFirst(cycle, demand->prio, take, /*restored=*/false, out);
}

HOLDBACK_INLINE void Evictor::restoreReserve(const Cycle& cycle, RevocationBatch& out) noexcept {
  const EvictionOptions& ev = cycle.options;
  const ReserveRestoreOptions& ro = ev.restoreReserve;
  const TimePoint now = cycle.now;
  const double s = cycle.saturation;
  const std::span<Band* const> bands = cycle.bands;
  pacer_.retire(now, ev, cycle.leases);
  // Pipelined, not stop-and-wait: the revocations still outstanding or within their grace are
  // debited from the deficit (the sensor does not show them yet), so that a cluster of arrivals
  // is answered in the cycle that sees it rather than one decision per lead time.
  const double pending = pacer_.pendingCount();
  // The highest band victims may come from; the bands above it are the protected ones.
  std::size_t v = 0;
  while (v < bands.size() && !ev.filter->mayAccept(bands[v]->prio)) ++v;
  double lambda = 0.0;  // the protected bands' arrivals per second
  bool burst = false;   // a protected band is in a burst (burstSignificance)
  for (std::size_t j = 0; j < v && v < bands.size(); ++j) {
    if (const DemandTracker::Slot* slot = cycle.demand.cachedSlotOf(*bands[j])) {
      lambda += slot->estimator.demand().arrivalRate;
      burst = burst || slot->estimator.inBurst();
    }
  }
  double completions = cycle.demand.completionRate();  // every band's releases per second
  const std::size_t in_flight = cycle.leases.size();
  // This replica's figures, for the others (ReplicaPort::restoreFigures).
  if (cycle.publish != nullptr) {
    ReplicaRestoreFigures& own = *cycle.publish;
    own = {lambda, completions, pending, static_cast<double>(in_flight)};
    if (v > 0 && v < bands.size()) VictimSelector::publishVictims(cycle, bands[v - 1]->prio, own);
    own.victimLists = 1.0;
  }
  const ReplicaCoordinator* replicas = cycle.replicas;
  const bool shared = replicas != nullptr && replicas->shared();  // two replicas or more
  const double pool_leases = static_cast<double>(in_flight) +
                             (shared ? replicas->others(&ReplicaRestoreFigures::leases) : 0.0);
  if (in_flight == 0 || !std::isfinite(s) || bands.empty()) return;
  const double unit = s / pool_leases;  // one request, saturation units
  if (!(unit > 0.0) || !std::isfinite(unit)) return;
  if (v == 0 || v == bands.size()) return;  // nothing protected, or no victim band
  if (const std::size_t take = selector_.chooseWhereWaiting(cycle, pacer_, v, ev.footprintAware);
      take > 0) {
    revokeFirst(cycle, bands[0]->prio, take, /*restored=*/true, out);
    return;
  }

  // With replicas: the pool's figures, and this replica's part of the pool's revocations.
  double pool_pending = pending;
  if (shared) {
    if (!replicas->pooledArrivals()) {
      lambda += replicas->others(&ReplicaRestoreFigures::protectedArrivalRate);
    }
    completions += replicas->others(&ReplicaRestoreFigures::completionRate);
    pool_pending += replicas->others(&ReplicaRestoreFigures::pendingRevocations);
  }
  lambda = burst_.remember(now, lambda, ro.burstMemory);
  if (ro.burstSignificance > 0.0 && !burst) {  // the burst trigger: steady traffic, no restoring
    deferred_ = false;
    skipped_ = 0;
    return;
  }
  const std::optional<ReserveDeficit> deficit = reserveDeficit(ReserveSnapshot{
      s, unit, cycle.ceilings[0], cycle.ceilings[v], lambda, completions, pool_pending,
      pacer_.leadSeconds(ro.leadTime, ev.confirmationGrace), ro.epsilon});
  if (!deficit) {  // the policy's reserve is intact
    deferred_ = false;
    skipped_ = 0;
    return;
  }
  pacer_.setReclaimTarget(deficit->target * unit);
  if (!(deficit->deficit >= 1.0) || !std::isfinite(deficit->deficit)) {
    deferred_ = false;
    skipped_ = 0;
    return;
  }
  auto need = static_cast<std::size_t>(std::min(std::floor(deficit->deficit), 1e9));
  // With replicas: this replica's part of the pool's need. When every replica publishes its
  // youngest victims, the part is its own among the pool's `need` youngest (the choice one
  // gateway would make); else need / R by its turn.
  const bool pool_victims = shared && replicas->poolVictims();
  if (shared && !pool_victims) need = replicas->restorationPart(need, now);
  if (need == 0) return;
  const Priority protectedPrio = bands[v - 1]->prio;  // the lowest protected band
  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!selector_.gather(cycle, protectedPrio, by_footprint, total_footprint)) return;
  if (pool_victims) {
    if (const std::size_t own = selector_.ownAmongPoolYoungest(*replicas, need, skipped_);
        own > 0) {
      need = own;
      deferred_ = false;
      skipped_ = 0;
    } else if (!deferred_ || replicas->installs() == deferred_at_) {
      // Left to the others, whose victims are the pool's youngest, until their next figures.
      if (!deferred_) deferred_at_ = replicas->installs();
      deferred_ = true;
      return;
    } else {
      // A share installed since and the pool still short: the replicas whose victims were the
      // pool's youngest did not take them (they see less missing, or the list named victims
      // they had revoked since). The others' `need` youngest more are left out and the next of
      // the pool's youngest go instead: every replica that deferred reads the same fresh lists,
      // so they take those once between them (not each the whole need).
      skipped_ += need;
      deferred_at_ = replicas->installs();
      if (!selector_.gather(cycle, protectedPrio, by_footprint, total_footprint)) return;
      if ((need = selector_.ownAmongPoolYoungest(*replicas, need, skipped_)) == 0) return;
      deferred_ = false;
      skipped_ = 0;
    }
  }
  // In the candidates' credit units (this replica's own leases share s).
  const double net = static_cast<double>(need) * s / static_cast<double>(in_flight);
  std::size_t take = selector_.choosePerEndpoint(cycle, pacer_, v, need, net, by_footprint);
  if (take == 0) take = selector_.chooseCovering(ev, need, net, by_footprint);
  revokeFirst(cycle, bands[0]->prio, take, /*restored=*/true, out);
}

HOLDBACK_INLINE void Evictor::revokeFirst(const Cycle& cycle, Priority demandPrio, std::size_t take,
                                          bool restored, RevocationBatch& out) noexcept {
  const TimePoint now = cycle.now;
  const std::span<const VictimSelector::Candidate> chosen = selector_.candidates();
  // Restoration waits while a budget is spent; a head-of-line revocation (a protected request
  // blocked now) is never held back by them but is paid from them.
  const bool budgeted = Evictor::budgeted(cycle.options);
  const ReserveRestoreOptions& ro = cycle.options.restoreReserve;
  for (std::size_t k = 0; k < take && k < chosen.size() && !out.full(); ++k) {
    const VictimSelector::Candidate& c = chosen[k];
    if (restored && budgeted && !budget_.allows(ro)) {  // waits for the budgets to refill
      pacer_.withheld();
      break;
    }
    if (!cycle.leases.markRevoked(c.lease.id)) continue;
    if (budgeted) budget_.spend(ro, now - c.lease.dispatchedAt);
    pacer_.issued(c.lease.id, c.lease.priority, now, c.credit, c.endpoint, restored);
    Revocation& r = out.add();
    r.id = c.lease.id;
    r.priority = c.lease.priority;
    r.demandPriority = demandPrio;
    r.dispatchedAt = c.lease.dispatchedAt;
    r.issuedAt = now;
    r.footprintTokens = c.lease.footprintTokens;
    r.generatedTokens = c.lease.generatedTokens;
    r.credit = c.credit;
    r.disposition = kEvictedHttp;
  }
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
