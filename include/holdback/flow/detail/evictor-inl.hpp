// Implementation of holdback/flow/detail/evictor.hpp (compiled by src/flow.cpp, or included by
// flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/evictor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "holdback/policy/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void deliverRevocations(
    const RevocationBatch& batch, const std::function<void(const Revocation&)>& evict) noexcept {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    HOLDBACK_TRY {
      evict(batch.at(i));
    }
    HOLDBACK_CATCH_ALL {
      // The host's callback threw: the revocation stays outstanding and times out.
    }
  }
}

HOLDBACK_INLINE Evictor::Evictor() {
  // Stop-and-wait keeps outstanding + cooling within one decision's cap.
  outstanding_.reserve(kMaxRevocationsPerDecisionLimit);
  cooling_.reserve(kMaxRevocationsPerDecisionLimit);
}

// ---------------------------------------------------------------------------------------------
// Leases and pacing

HOLDBACK_INLINE void Evictor::leaseReleased(const LeaseTable::Lease& lease, TimePoint now,
                                            const EvictionOptions& options) noexcept {
  if (lease.revoked) {  // the confirmation of a revocation
    endOutstandingOf(lease.id, now, options.confirmationGrace, /*timedOut=*/false);
    countLeaseEnd(LeaseEnd::kRevokedConfirmed);
    return;
  }
  countLeaseEnd(LeaseEnd::kReleased);
}

HOLDBACK_INLINE void Evictor::reapLeases(LeaseTable& leases, TimePoint now, Duration leaseTimeout,
                                         const EvictionOptions& options) noexcept {
  if (leases.size() == 0) return;
  for (std::uint32_t b = 0; b < leases.bandCapacity(); ++b) {
    for (;;) {
      LeaseTable::Id oldest = 0;
      leases.oldestFirst(b, [&](const LeaseTable::Lease& l) {
        if (elapsed(l.dispatchedAt, now) >= leaseTimeout) oldest = l.id;
        return false;
      });
      if (oldest == 0) break;
      const std::optional<LeaseTable::Lease> gone = leases.remove(oldest);
      if (gone && gone->revoked) {  // an outstanding revocation: it ends timed out
        endOutstandingOf(oldest, now, options.confirmationGrace, /*timedOut=*/true);
        countLeaseEnd(LeaseEnd::kRevokedTimedOut);
      } else {
        countLeaseEnd(LeaseEnd::kReaped);
      }
    }
  }
}

HOLDBACK_INLINE void Evictor::endOutstanding(std::size_t i, TimePoint now, Duration grace,
                                             bool timedOut) noexcept {
  const Outstanding o = outstanding_[i];
  outstanding_[i] = outstanding_.back();
  outstanding_.pop_back();
  cooling_.push_back(Cooling{now + grace, o.credit, o.endpoint});
  if (timedOut) {
    stats_.timedOut += 1;
    return;
  }
  stats_.confirmed += 1;
  const double latency = std::max(0.0, std::chrono::duration<double>(now - o.issuedAt).count());
  std::size_t b = 0;
  while (b < kRevocationConfirmationBucketsSeconds.size() &&
         latency > kRevocationConfirmationBucketsSeconds[b]) {
    ++b;
  }
  stats_.confirmationBuckets[b] += 1;
  stats_.confirmationSumSeconds += latency;
}

HOLDBACK_INLINE void Evictor::endOutstandingOf(RequestId id, TimePoint now, Duration grace,
                                               bool timedOut) noexcept {
  for (std::size_t i = 0; i < outstanding_.size(); ++i) {
    if (outstanding_[i].id == id) {
      endOutstanding(i, now, grace, timedOut);
      return;
    }
  }
}

HOLDBACK_INLINE void Evictor::retireRevocations(TimePoint now, const EvictionOptions& options,
                                                LeaseTable& leases) noexcept {
  for (std::size_t i = outstanding_.size(); i-- > 0;) {
    if (elapsed(outstanding_[i].issuedAt, now) > options.confirmationTimeout) {
      // Treated as confirmed: the lease ends here (a late release finds nothing).
      if (leases.remove(outstanding_[i].id)) countLeaseEnd(LeaseEnd::kRevokedTimedOut);
      endOutstanding(i, now, options.confirmationGrace, /*timedOut=*/true);
    }
  }
  for (std::size_t i = cooling_.size(); i-- > 0;) {
    if (now >= cooling_[i].expiresAt) {
      pending_reclaim_ = std::max(0.0, pending_reclaim_ - cooling_[i].credit);
      cooling_[i] = cooling_.back();
      cooling_.pop_back();
    }
  }
  if (outstanding_.empty() && cooling_.empty()) pending_reclaim_ = 0.0;  // no rounding residue
}

HOLDBACK_INLINE EvictionStats Evictor::stats() const {
  EvictionStats out = stats_;
  out.pendingReclaim = pending_reclaim_;
  out.outstanding = outstanding_.size();
  out.cooling = cooling_.size();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Victims

HOLDBACK_INLINE double Evictor::releaseChance(double hold, double age, double horizon) noexcept {
  if (!(hold > 0.0) || !std::isfinite(hold)) return 0.0;  // not measured: expect nothing
  age = std::max(0.0, age);
  // Younger than the band's holding time: it ends within the horizon iff it is due by then.
  if (age < hold) return age + horizon >= hold ? 1.0 : 0.0;
  // Overdue: memoryless beyond the mean.
  return 1.0 - std::exp(-horizon / hold);
}

HOLDBACK_INLINE void Evictor::collectCandidates(const LeaseTable& leases, std::uint32_t band,
                                                bool below, const EvictionFilter& filter,
                                                std::vector<Candidate>& out, double& totalFootprint,
                                                bool& footprintsKnown) {
  leases.newestFirst(band, [&](const LeaseTable::Lease& l) {
    if (l.tokens == 0) footprintsKnown = false;
    totalFootprint += static_cast<double>(l.tokens);
    if (!below || l.revoked || !l.delivered) return true;
    const EvictionCandidate c{l.id, l.priority, l.dispatchedAt, l.tokens, l.generated};
    const std::uint64_t kv = l.tokens > 0 ? l.tokens : l.kvTokens;
    if (filter.accept(c)) out.push_back(Candidate{c, 0.0, l.endpoint, static_cast<double>(kv)});
    return true;
  });
}

HOLDBACK_INLINE void Evictor::issuedFor(Priority victim) {
  auto& by = stats_.issuedByPriority;
  auto it = std::lower_bound(by.begin(), by.end(), victim,
                             [](const auto& e, Priority p) { return e.first < p; });
  if (it == by.end() || it->first != victim) it = by.insert(it, {victim, 0});
  it->second += 1;
}

HOLDBACK_INLINE bool Evictor::gatherCandidates(const Cycle& cycle, Priority demandPrio,
                                               bool& byFootprint,
                                               double& total_footprint) noexcept {
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
    collectCandidates(cycle.leases, b, below, *ev.filter, candidates_, total_footprint,
                      footprints_known);
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

HOLDBACK_INLINE double Evictor::leadSeconds(Duration configured, Duration grace) const noexcept {
  const double lead = std::chrono::duration<double>(configured).count();
  if (lead > 0.0) return lead;
  const double measured =
      stats_.confirmed > 0 ? stats_.confirmationSumSeconds / static_cast<double>(stats_.confirmed)
                           : 0.0;
  return measured + std::chrono::duration<double>(grace).count();
}

HOLDBACK_INLINE double Evictor::rememberBurst(TimePoint now, double lambda,
                                              Duration memory) noexcept {
  if (!(memory > Duration::zero()) || !std::isfinite(lambda)) return lambda;
  const double age =
      std::max(0.0, std::chrono::duration<double>(elapsed(restore_peak_time_, now)).count());
  const double tau = std::chrono::duration<double>(memory).count();
  const double remembered =
      restore_peak_rate_ > 0.0 ? restore_peak_rate_ * std::exp(-age / tau) : 0.0;
  if (lambda >= remembered) {
    restore_peak_rate_ = lambda;
    restore_peak_time_ = now;
    return lambda;
  }
  return remembered;
}

HOLDBACK_INLINE void Evictor::restoreReserve(const Cycle& cycle, RevocationBatch& out) noexcept {
  const EvictionOptions& ev = cycle.options;
  const ReserveRestoreOptions& ro = ev.restoreReserve;
  const TimePoint now = cycle.now;
  const double s = cycle.saturation;
  const std::span<Band* const> bands = cycle.bands;
  retireRevocations(now, ev, cycle.leases);
  // Pipelined, not stop-and-wait: the revocations still outstanding or within their grace are
  // debited from the deficit (the sensor does not show them yet), so that a cluster of arrivals
  // is answered in the cycle that sees it rather than one decision per lead time.
  const auto pending = static_cast<double>(outstanding_.size() + cooling_.size());
  // The highest band victims may come from; the bands above it are the protected ones.
  std::size_t v = 0;
  while (v < bands.size() && !ev.filter->mayAccept(bands[v]->prio)) ++v;
  double lambda = 0.0;  // the protected bands' arrivals per second
  for (std::size_t j = 0; j < v && v < bands.size(); ++j) {
    if (const DemandTracker::Slot* slot = cycle.demand.cachedSlotOf(*bands[j])) {
      lambda += slot->estimator.demand().arrivalRate;
    }
  }
  double completions = cycle.demand.completionRate();  // every band's releases per second
  const std::size_t in_flight = cycle.leases.size();
  // This replica's figures, for the others (FlowController::replicaRestoreFigures).
  if (cycle.publish != nullptr) {
    ReplicaRestoreFigures& own = *cycle.publish;
    own = {lambda, completions, pending, static_cast<double>(in_flight)};
    if (v > 0 && v < bands.size()) publishVictims(cycle, bands[v - 1]->prio, own);
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
  if (restoreWhereWaiting(cycle, v, ev.footprintAware, out)) return;

  // With replicas (setReplicaShare): the pool's figures, and this replica's part of the pool's
  // revocations.
  double pool_pending = pending;
  if (shared) {
    if (!replicas->pooledArrivals()) {
      lambda += replicas->others(&ReplicaRestoreFigures::protectedArrivalRate);
    }
    completions += replicas->others(&ReplicaRestoreFigures::completionRate);
    pool_pending += replicas->others(&ReplicaRestoreFigures::pendingRevocations);
  }
  lambda = rememberBurst(now, lambda, ro.burstMemory);
  const double over = (s - cycle.ceilings[v]) / unit;  // requests beyond the victim band's ceiling
  if (!(over > 0.0)) return;                           // the policy's reserve is intact
  const double lead = leadSeconds(ro.leadTime, ev.confirmationGrace);
  const double wanted = ReservationPolicy::poissonReserve(
      lambda * lead, ro.epsilon, ReservationPolicy::inverseNormal(1.0 - ro.epsilon));
  const double room = (cycle.ceilings[0] - s) / unit;  // free for the top band, in requests
  const double target = std::min(over, wanted - room) - completions * lead;
  stats_.reclaimTarget = target * unit;
  const double deficit = target - pool_pending;
  if (!(deficit >= 1.0) || !std::isfinite(deficit)) return;
  auto need = static_cast<std::size_t>(std::min(std::floor(deficit), 1e9));
  // With replicas: this replica's part of the pool's need. When every replica publishes its
  // youngest victims, the part is its own among the pool's `need` youngest (the choice one
  // gateway would make); else need / R by rank.
  const bool pool_victims = shared && replicas->poolVictims();
  if (shared && !pool_victims) need = replicas->restorationPart(need, now);
  if (need == 0) return;
  const Priority protectedPrio = bands[v - 1]->prio;  // the lowest protected band
  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gatherCandidates(cycle, protectedPrio, by_footprint, total_footprint)) return;
  if (pool_victims && (need = ownAmongPoolYoungest(*replicas, need)) == 0) return;
  // In the candidates' credit units (this replica's own leases share s).
  const double net = static_cast<double>(need) * s / static_cast<double>(in_flight);
  if (const std::size_t take = choosePerEndpoint(cycle, v, need, net, by_footprint); take > 0) {
    revokeFirst(cycle, bands[0]->prio, take, /*restored=*/true, out);
    return;
  }
  issueRevocations(cycle, bands[0]->prio, need, net, by_footprint, /*restored=*/true, out);
}

HOLDBACK_INLINE void Evictor::publishVictims(const Cycle& cycle, Priority protectedPrio,
                                             ReplicaRestoreFigures& own) noexcept {
  const EvictionFilter& filter = *cycle.options.filter;
  const std::span<const DemandTracker::Slot> slots = cycle.demand.slots();
  for (std::uint32_t b = 0; b < slots.size(); ++b) {
    if (!(slots[b].prio < protectedPrio) || !filter.mayAccept(slots[b].prio)) continue;
    std::size_t taken = 0;  // newest first: a band's first kVictims are its youngest
    cycle.leases.newestFirst(b, [&](const LeaseTable::Lease& l) {
      if (l.revoked || !l.delivered) return true;
      if (!filter.accept(
              EvictionCandidate{l.id, l.priority, l.dispatchedAt, l.tokens, l.generated})) {
        return true;
      }
      own.addVictim(ReplicaRestoreFigures::secondsOf(l.dispatchedAt));
      return ++taken < ReplicaRestoreFigures::kVictims;
    });
  }
}

HOLDBACK_INLINE std::size_t Evictor::ownAmongPoolYoungest(const ReplicaCoordinator& replicas,
                                                          std::size_t need) noexcept {
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    return a.lease.dispatchedAt > b.lease.dispatchedAt;
  });
  const std::size_t mine = replicas.ownAmongPoolYoungest(
      candidates_.size(), [this](std::size_t i) { return candidates_[i].lease.dispatchedAt; },
      need);
  candidates_.erase(candidates_.begin() + static_cast<std::ptrdiff_t>(mine), candidates_.end());
  return mine;
}

HOLDBACK_INLINE void Evictor::reclaim(const Cycle& cycle, std::size_t gated,
                                      RevocationBatch& out) noexcept {
  const EvictionOptions& ev = cycle.options;
  const TimePoint now = cycle.now;
  const double s = cycle.saturation;
  retireRevocations(now, ev, cycle.leases);
  if (!outstanding_.empty() || !cooling_.empty()) return;  // stop-and-wait: gate closed

  // The eligible demand: the highest blocked band (from the gated one down) with queued work.
  Band* demand = nullptr;
  double ceiling = 0.0;
  for (std::size_t j = gated; j < cycle.bands.size(); ++j) {
    const double c = cycle.ceilings[j];
    if (!(c > 0.0) || !isGated(s, c) || cycle.bands[j]->queued_requests == 0) continue;
    demand = cycle.bands[j];
    ceiling = c;
    break;
  }
  if (demand == nullptr) return;
  const std::size_t in_flight = cycle.leases.size();
  if (in_flight == 0 || !std::isfinite(s)) return;

  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gatherCandidates(cycle, demand->prio, by_footprint, total_footprint)) return;
  const double credit = s / static_cast<double>(in_flight);  // mean footprint, saturation units
  const double target = s - ceiling;
  double net = target - pending_reclaim_;
  stats_.reclaimTarget = target;
  if (net < 0.0 || (net == 0.0 && pending_reclaim_ > 0.0)) return;

  // How many (upstream): at least one, enough mean footprints to cover the net deficit.
  const double ratio = std::min(net / credit, 1e9);
  std::size_t need = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(ratio)));

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
      double expected = 0.0;  // in leases, or in saturation units by footprint
      const std::span<const DemandTracker::Slot> slots = cycle.demand.slots();
      for (std::uint32_t b = 0; b < slots.size(); ++b) {
        const double hold = slots[b].estimator.demand().holdingTime;
        cycle.leases.newestFirst(b, [&](const LeaseTable::Lease& l) {
          if (l.revoked) return true;
          const double age = std::chrono::duration<double>(now - l.dispatchedAt).count();
          const double p = releaseChance(hold, age, horizon);
          expected += by_footprint ? p * s * static_cast<double>(l.tokens) / total_footprint : p;
          return true;
        });
      }
      if (by_footprint) {
        if (net - expected < 0.0 || (net - expected == 0.0 && expected > 0.0)) {
          stats_.deferred += 1;
          return;
        }
        net -= expected;
      } else {
        const auto freed = static_cast<std::size_t>(std::floor(expected + 1e-9));
        if (freed >= need) {
          stats_.deferred += 1;
          return;
        }
        need -= freed;
      }
    }
  }

  issueRevocations(cycle, demand->prio, need, net, by_footprint, /*restored=*/false, out);
}

HOLDBACK_INLINE void Evictor::issueRevocations(const Cycle& cycle, Priority demandPrio,
                                               std::size_t need, double net, bool by_footprint,
                                               bool restored, RevocationBatch& out) noexcept {
  const EvictionOptions& ev = cycle.options;
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
  revokeFirst(cycle, demandPrio, take, restored, out);
}

HOLDBACK_INLINE void Evictor::sortCandidates(const EvictionOptions& ev, bool byFootprint) noexcept {
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

HOLDBACK_INLINE void Evictor::revokeFirst(const Cycle& cycle, Priority demandPrio, std::size_t take,
                                          bool restored, RevocationBatch& out) noexcept {
  const TimePoint now = cycle.now;
  for (std::size_t k = 0; k < take && k < candidates_.size() && !out.full(); ++k) {
    const Candidate& c = candidates_[k];
    if (!cycle.leases.markRevoked(c.lease.id)) continue;
    outstanding_.push_back(Outstanding{c.lease.id, now, c.credit, c.endpoint});
    pending_reclaim_ += c.credit;
    stats_.issued += 1;
    if (restored) stats_.restored += 1;
    issuedFor(c.lease.priority);
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
