// Implementation of holdback/flow/detail/controller_core.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/controller_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "holdback/policy/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE ControllerCore::Settings ControllerCore::settingsOf(FlowControllerOptions& o) {
  Settings s;
  s.policy = std::move(o.policy);
  s.maxRequests = o.maxRequests;
  s.maxBytes = o.maxBytes;
  s.defaultTtl = o.defaultRequestTtl.value_or(kDefaultRequestTtl);
  s.noEndpointTtl = o.noEndpointRequestTtl.value_or(s.defaultTtl);
  s.priorityDomain = o.priorityDomain;
  s.activityWindow = o.activityWindow;
  s.leaseTimeout = o.leaseTimeout;
  s.fairnessIdLabelLimit = o.fairnessIdLabelLimit;
  s.eviction = o.eviction;
  s.eviction.evict = nullptr;  // create-only: evict_
  if (!s.eviction.filter) s.eviction.filter = std::make_shared<SheddableEvictionFilter>();
  if (!s.eviction.order) s.eviction.order = std::make_shared<PriorityThenTimeEvictionOrder>();
  return s;
}

HOLDBACK_INLINE BandTopology ControllerCore::topologyOf(FlowControllerOptions& o) {
  BandTopology t;
  t.defaultBand = std::move(o.defaultBand);
  t.defaultNegativeBand = std::move(o.defaultNegativeBand);
  t.provisionOnFirstUse = o.provisionOnFirstUse;
  t.maxBands = o.maxBands;
  return t;
}

HOLDBACK_INLINE ControllerCore::ControllerCore(FlowControllerOptions options)
    : on_outcome_(std::move(options.onOutcome)),
      clock_(std::move(options.clock)),
      evict_(std::move(options.eviction.evict)),
      flow_idle_timeout_(options.flowIdleTimeout),
      band_idle_timeout_(options.bandIdleTimeout),
      sampler_(std::move(options.endpoints), std::move(options.detector)) {
  MutexLock lock(mu_);
  settings_ = settingsOf(options);
  // Stop-and-wait keeps outstanding + cooling within one decision's cap.
  outstanding_.reserve(kMaxRevocationsPerDecisionLimit);
  cooling_.reserve(kMaxRevocationsPerDecisionLimit);
  table_.applyBands(topologyOf(options), options.bands);
}

HOLDBACK_INLINE void ControllerCore::deliver(Completion&& c) const noexcept {
  HOLDBACK_TRY {
    on_outcome_(std::move(c));
  }
  HOLDBACK_CATCH_ALL {
    // The host's callback threw; the outcome was delivered as far as the library can tell.
  }
}

// ---------------------------------------------------------------------------------------------
// Admission

HOLDBACK_INLINE RequestId ControllerCore::enqueue(FlowRequest&& request, TimePoint now,
                                                  bool& queued) noexcept {
  const RequestId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  std::optional<Completion> rejected;
  Retired freed;  // memory the pool did not keep: freed after the lock
  queued = false;
  // The flow id's hash, before the lock (the band's flow lookup takes it).
  const std::uint64_t flow_hash = FlowIndex::hashOf(request.flowId);
  {
    MutexLock lock(mu_);
    // The request's memory comes from the table's pool (a heap allocation only while it grows).
    PreparedItem prepared;
    if (!request.flowId.empty()) prepared = table_.acquire(id, request, now);
    Outcome outcome{QueueOutcome::kDispatched, OutcomeCause::kNone};
    Band* band = nullptr;
    TtlResolution ttl;
    if (stopped_) {
      outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kNotRunning};
      band = table_.bandOrZero(request.priority);
    } else if (prepared.item == nullptr) {
      outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kInvalidRequest};
      band = table_.bandOrZero(request.priority);
    } else {
      band = table_.resolve(request.priority);
      band->last_arrival = now;
      band->last_activity = std::max(band->last_activity, now);
      ttl = resolveRequestTtl(request.ttl, settings_.defaultTtl, request.deadline, now);
      if (ttl.deadlinePassed) {
        outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kTtlExpired};
      } else {
        const CapacityUsage global{settings_.maxBytes, table_.totalBytes(), settings_.maxRequests,
                                   table_.totalRequests()};
        const CapacityUsage local{band->maxBytes, band->queued_bytes, band->maxRequests,
                                  band->queued_requests};
        if (!hasCapacity(request.sizeBytes, global, &local)) {
          outcome = regime_.empty
                        ? Outcome{QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}
                        : Outcome{QueueOutcome::kRejectedCapacity, OutcomeCause::kQueueAtCapacity};
        }
      }
    }
    if (outcome.rejected()) {
      table_.countOutcome(band, request.priority, outcome.kind);
      Completion c;
      c.id = id;
      c.requestedPriority = request.priority;
      c.bandPriority = band->prio;
      c.sizeBytes = request.sizeBytes;
      c.outcome = outcome;
      c.enqueueTime = now;
      c.finalizedAt = now;
      if (prepared.item != nullptr) table_.release(std::move(prepared), freed);
      c.flowId = std::move(request.flowId);
      c.payload = std::move(request.payload);
      rejected = std::move(c);
    } else {
      if (measuresDemand()) demand_slots_[demandSlotOf(band)].arrivals += 1.0;
      table_.insert(std::move(prepared), request, band, ttl.effectiveTtl, flow_hash);
      queued = true;
    }
  }
  if (rejected) deliver(std::move(*rejected));
  return id;
}

HOLDBACK_INLINE bool ControllerCore::cancel(RequestId id) noexcept {
  const TimePoint now = clock_();  // host code: before the lock
  Retired retired;                 // freed after the lock
  Completion done;
  {
    MutexLock lock(mu_);
    Item* item = table_.find(id);
    if (item == nullptr) return false;
    retired = table_.finalize(item, {QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled},
                              now, done);
  }
  deliver(std::move(done));
  return true;
}

HOLDBACK_INLINE bool ControllerCore::release(RequestId id, TimePoint now) noexcept {
  MutexLock lock(mu_);
  const std::optional<LeaseTable::Lease> lease = leases_.remove(id);
  if (!lease) return false;
  if (lease->revoked) {  // the confirmation of a revocation
    for (std::size_t i = 0; i < outstanding_.size(); ++i) {
      if (outstanding_[i].id == id) {
        endOutstanding(i, now, /*timedOut=*/false);
        break;
      }
    }
    eviction_stats_.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)] += 1;
    return true;  // its holding time was cut short: not a holding-time sample
  }
  eviction_stats_.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReleased)] += 1;
  if (lease->band < demand_slots_.size()) {
    demand_slots_[lease->band].estimator.completed(
        std::chrono::duration<double>(now - lease->dispatchedAt).count());
  }
  return true;
}

HOLDBACK_INLINE bool ControllerCore::updateLease(RequestId id, std::uint64_t footprint,
                                                 std::uint64_t generated) noexcept {
  MutexLock lock(mu_);
  return leases_.setTokens(id, footprint, generated);
}

// ---------------------------------------------------------------------------------------------
// Eviction (flow/eviction.hpp)

HOLDBACK_INLINE void ControllerCore::endOutstanding(std::size_t i, TimePoint now,
                                                    bool timedOut) noexcept {
  const Outstanding o = outstanding_[i];
  outstanding_[i] = outstanding_.back();
  outstanding_.pop_back();
  cooling_.push_back(Cooling{now + settings_.eviction.confirmationGrace, o.credit});
  if (timedOut) {
    eviction_stats_.timedOut += 1;
    return;
  }
  eviction_stats_.confirmed += 1;
  const double latency = std::max(0.0, std::chrono::duration<double>(now - o.issuedAt).count());
  std::size_t b = 0;
  while (b < kRevocationConfirmationBucketsSeconds.size() &&
         latency > kRevocationConfirmationBucketsSeconds[b]) {
    ++b;
  }
  eviction_stats_.confirmationBuckets[b] += 1;
  eviction_stats_.confirmationSumSeconds += latency;
}

HOLDBACK_INLINE void ControllerCore::retireRevocations(TimePoint now) noexcept {
  for (std::size_t i = outstanding_.size(); i-- > 0;) {
    if (elapsed(outstanding_[i].issuedAt, now) > settings_.eviction.confirmationTimeout) {
      // Treated as confirmed: the lease ends here (a late release finds nothing).
      if (leases_.remove(outstanding_[i].id)) {
        eviction_stats_.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedTimedOut)] += 1;
      }
      endOutstanding(i, now, /*timedOut=*/true);
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

HOLDBACK_INLINE double ControllerCore::releaseChance(double hold, double age,
                                                     double horizon) noexcept {
  if (!(hold > 0.0) || !std::isfinite(hold)) return 0.0;  // not measured: expect nothing
  age = std::max(0.0, age);
  // Younger than the band's holding time: it ends within the horizon iff it is due by then.
  if (age < hold) return age + horizon >= hold ? 1.0 : 0.0;
  // Overdue: memoryless beyond the mean.
  return 1.0 - std::exp(-horizon / hold);
}

HOLDBACK_INLINE void ControllerCore::collectCandidates(const LeaseTable& leases, std::uint32_t band,
                                                       bool below, const EvictionFilter& filter,
                                                       std::vector<Candidate>& out,
                                                       double& totalFootprint,
                                                       bool& footprintsKnown) {
  leases.newestFirst(band, [&](const LeaseTable::Lease& l) {
    if (l.tokens == 0) footprintsKnown = false;
    totalFootprint += static_cast<double>(l.tokens);
    if (!below || l.revoked || !l.delivered) return true;
    const EvictionCandidate c{l.id, l.priority, l.dispatchedAt, l.tokens, l.generated};
    if (filter.accept(c)) out.push_back(Candidate{c, 0.0});
    return true;
  });
}

HOLDBACK_INLINE void ControllerCore::issuedFor(Priority victim) {
  auto& by = eviction_stats_.issuedByPriority;
  auto it = std::lower_bound(by.begin(), by.end(), victim,
                             [](const auto& e, Priority p) { return e.first < p; });
  if (it == by.end() || it->first != victim) it = by.insert(it, {victim, 0});
  it->second += 1;
}

HOLDBACK_INLINE bool ControllerCore::gatherCandidates(Priority demandPrio, double s,
                                                      bool& byFootprint,
                                                      double& total_footprint) noexcept {
  const EvictionOptions& ev = settings_.eviction;
  const std::size_t in_flight = leases_.size();
  // Candidates: leases strictly below the demand band that the filter accepts.
  candidates_.reserve(in_flight);
  candidates_.clear();
  total_footprint = 0.0;
  bool footprints_known = true;
  for (std::uint32_t b = 0; b < demand_slots_.size(); ++b) {
    const bool below =
        demand_slots_[b].prio < demandPrio && ev.filter->mayAccept(demand_slots_[b].prio);
    // Bands at or above the demand (or refused by the filter) matter only for the footprint total.
    if (!below && !ev.footprintAware) continue;
    collectCandidates(leases_, b, below, *ev.filter, candidates_, total_footprint,
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

HOLDBACK_INLINE double ControllerCore::leadSeconds(Duration configured) const noexcept {
  const double lead = std::chrono::duration<double>(configured).count();
  if (lead > 0.0) return lead;
  const double measured =
      eviction_stats_.confirmed > 0
          ? eviction_stats_.confirmationSumSeconds / static_cast<double>(eviction_stats_.confirmed)
          : 0.0;
  return measured + std::chrono::duration<double>(settings_.eviction.confirmationGrace).count();
}

HOLDBACK_INLINE double ControllerCore::rememberBurst(TimePoint now, double lambda) noexcept {
  const Duration memory = settings_.eviction.restoreReserve.burstMemory;
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

HOLDBACK_INLINE void ControllerCore::restoreReserve(TimePoint now, double s,
                                                    RevocationBatch& out) noexcept {
  const EvictionOptions& ev = settings_.eviction;
  const ReserveRestoreOptions& ro = ev.restoreReserve;
  retireRevocations(now);
  // Pipelined, not stop-and-wait: the revocations still outstanding or within their grace are
  // debited from the deficit (the sensor does not show them yet), so that a cluster of arrivals
  // is answered in the cycle that sees it rather than one decision per lead time.
  const auto pending = static_cast<double>(outstanding_.size() + cooling_.size());
  const std::size_t in_flight = leases_.size();
  if (in_flight == 0 || !std::isfinite(s) || domain_bands_.empty()) return;
  const double unit = s / static_cast<double>(in_flight);  // one request, saturation units
  if (!(unit > 0.0) || !std::isfinite(unit)) return;
  // The highest band victims may come from; the bands above it are the protected ones.
  std::size_t v = 0;
  while (v < domain_bands_.size() && !ev.filter->mayAccept(domain_bands_[v]->prio)) ++v;
  if (v == 0 || v == domain_bands_.size()) return;  // nothing protected, or no victim band

  double lambda = 0.0;  // the protected bands' arrivals per second
  for (std::size_t j = 0; j < v; ++j) {
    const std::uint32_t slot = domain_bands_[j]->demand_slot;
    if (slot < demand_slots_.size() && demand_slots_[slot].prio == domain_bands_[j]->prio) {
      lambda += demand_slots_[slot].estimator.demand().arrivalRate;
    }
  }
  lambda = rememberBurst(now, lambda);
  const double over = (s - ceilings_[v]) / unit;  // requests beyond the victim band's ceiling
  if (!(over > 0.0)) return;                      // the policy's reserve is intact
  double completions = 0.0;                       // every band's releases per second
  for (const DemandSlot& d : demand_slots_) completions += d.estimator.demand().completionRate;
  const double lead = leadSeconds(ro.leadTime);
  const double wanted = ReservationPolicy::poissonReserve(
      lambda * lead, ro.epsilon, ReservationPolicy::inverseNormal(1.0 - ro.epsilon));
  const double room = (ceilings_[0] - s) / unit;  // free for the top band, in requests
  const double target = std::min(over, wanted - room) - completions * lead;
  eviction_stats_.reclaimTarget = target * unit;
  const double deficit = target - pending;
  if (!(deficit >= 1.0) || !std::isfinite(deficit)) return;
  const Priority protectedPrio = domain_bands_[v - 1]->prio;  // the lowest protected band
  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gatherCandidates(protectedPrio, s, by_footprint, total_footprint)) return;
  const auto need = static_cast<std::size_t>(std::min(std::floor(deficit), 1e9));
  issueRevocations(now, domain_bands_[0]->prio, need, static_cast<double>(need) * unit,
                   by_footprint, /*restored=*/true, out);
}

HOLDBACK_INLINE void ControllerCore::reclaim(TimePoint now, double s, std::size_t gated,
                                             RevocationBatch& out) noexcept {
  const EvictionOptions& ev = settings_.eviction;
  retireRevocations(now);
  if (!outstanding_.empty() || !cooling_.empty()) return;  // stop-and-wait: gate closed

  // The eligible demand: the highest blocked band (from the gated one down) with queued work.
  Band* demand = nullptr;
  double ceiling = 0.0;
  for (std::size_t j = gated; j < domain_bands_.size(); ++j) {
    const double c = ceilings_[j];
    if (!(c > 0.0) || !isGated(s, c) || domain_bands_[j]->queued_requests == 0) continue;
    demand = domain_bands_[j];
    ceiling = c;
    break;
  }
  if (demand == nullptr) return;
  const std::size_t in_flight = leases_.size();
  if (in_flight == 0 || !std::isfinite(s)) return;

  bool by_footprint = false;
  double total_footprint = 0.0;
  if (!gatherCandidates(demand->prio, s, by_footprint, total_footprint)) return;
  const double credit = s / static_cast<double>(in_flight);  // mean footprint, saturation units
  const double target = s - ceiling;
  double net = target - pending_reclaim_;
  eviction_stats_.reclaimTarget = target;
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
      for (std::uint32_t b = 0; b < demand_slots_.size(); ++b) {
        const double hold = demand_slots_[b].estimator.demand().holdingTime;
        leases_.newestFirst(b, [&](const LeaseTable::Lease& l) {
          if (l.revoked) return true;
          const double age = std::chrono::duration<double>(now - l.dispatchedAt).count();
          const double p = releaseChance(hold, age, horizon);
          expected += by_footprint ? p * s * static_cast<double>(l.tokens) / total_footprint : p;
          return true;
        });
      }
      if (by_footprint) {
        if (net - expected < 0.0 || (net - expected == 0.0 && expected > 0.0)) {
          eviction_stats_.deferred += 1;
          return;
        }
        net -= expected;
      } else {
        const auto freed = static_cast<std::size_t>(std::floor(expected + 1e-9));
        if (freed >= need) {
          eviction_stats_.deferred += 1;
          return;
        }
        need -= freed;
      }
    }
  }

  issueRevocations(now, demand->prio, need, net, by_footprint, /*restored=*/false, out);
}

HOLDBACK_INLINE void ControllerCore::issueRevocations(TimePoint now, Priority demandPrio,
                                                      std::size_t need, double net,
                                                      bool by_footprint, bool restored,
                                                      RevocationBatch& out) noexcept {
  const EvictionOptions& ev = settings_.eviction;
  const std::size_t cap = std::min(ev.maxRevocationsPerDecision, candidates_.size());
  std::size_t take = 0;
  if (by_footprint) {
    // Lowest priority first; within it, the fewest generated tokens per unit of credit; then the
    // order policy. Take until the net deficit is covered (at least one).
    const EvictionOrderPolicy& order = *ev.order;
    std::sort(candidates_.begin(), candidates_.end(), [&](const Candidate& a, const Candidate& b) {
      if (a.lease.priority != b.lease.priority) return a.lease.priority < b.lease.priority;
      const double ca = static_cast<double>(a.lease.generatedTokens) / a.credit;
      const double cb = static_cast<double>(b.lease.generatedTokens) / b.credit;
      if (ca != cb) return ca < cb;
      return order.less(a.lease, b.lease);
    });
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
  for (std::size_t k = 0; k < take && !out.full(); ++k) {
    const Candidate& c = candidates_[k];
    if (!leases_.markRevoked(c.lease.id)) continue;
    outstanding_.push_back(Outstanding{c.lease.id, now, c.credit});
    pending_reclaim_ += c.credit;
    eviction_stats_.issued += 1;
    if (restored) eviction_stats_.restored += 1;
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

HOLDBACK_INLINE void ControllerCore::deliverRevocations(
    const RevocationBatch& batch) const noexcept {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    HOLDBACK_TRY {
      evict_(batch.at(i));
    }
    HOLDBACK_CATCH_ALL {
      // The host's callback threw: the revocation stays outstanding and times out.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Demand

HOLDBACK_INLINE std::uint32_t ControllerCore::demandSlotOf(Band* band) {
  const std::uint32_t cached = band->demand_slot;
  if (cached < demand_slots_.size() && demand_slots_[cached].prio == band->prio) return cached;
  for (std::size_t i = 0; i < demand_slots_.size(); ++i) {
    if (demand_slots_[i].prio == band->prio) {
      band->demand_slot = static_cast<std::uint32_t>(i);
      return band->demand_slot;
    }
  }
  DemandSlot slot;
  slot.prio = band->prio;
  slot.estimator = DemandEstimator(settings_.policy->demandSmoothing());
  demand_slots_.push_back(slot);
  leases_.reserveBands(demand_slots_.size());
  band->demand_slot = static_cast<std::uint32_t>(demand_slots_.size() - 1);
  return band->demand_slot;
}

HOLDBACK_INLINE void ControllerCore::updateDemand(TimePoint now) noexcept {
  double dt = 0.0;
  if (last_demand_update_) dt = std::chrono::duration<double>(now - *last_demand_update_).count();
  const bool advance = !last_demand_update_ || dt > 0.0;
  if (advance) last_demand_update_ = now;
  for (Band* band : table_.ordered()) {
    DemandSlot& slot = demand_slots_[demandSlotOf(band)];
    // dt <= 0 (the first update, or a clock that did not move): counts only, arrivals kept.
    slot.estimator.update(dt, slot.arrivals,
                          static_cast<double>(leases_.inFlight(band->demand_slot)),
                          static_cast<double>(band->queued_requests));
    if (dt > 0.0) slot.arrivals = 0.0;
  }
  demand_view_.reserve(table_.ordered().size());
  demand_view_.clear();
  for (Band* band : domain_bands_) {
    demand_view_.push_back(demand_slots_[band->demand_slot].estimator.demand());
  }
}

HOLDBACK_INLINE void ControllerCore::reapLeases(TimePoint now) noexcept {
  if (leases_.size() == 0) return;
  const Duration timeout = settings_.leaseTimeout;
  for (std::uint32_t b = 0; b < demand_slots_.size(); ++b) {
    for (;;) {
      LeaseTable::Id oldest = 0;
      leases_.oldestFirst(b, [&](const LeaseTable::Lease& l) {
        if (elapsed(l.dispatchedAt, now) >= timeout) oldest = l.id;
        return false;
      });
      if (oldest == 0) break;
      const std::optional<LeaseTable::Lease> gone = leases_.remove(oldest);
      if (gone && gone->revoked) {  // an outstanding revocation: it ends timed out
        for (std::size_t i = 0; i < outstanding_.size(); ++i) {
          if (outstanding_[i].id == oldest) {
            endOutstanding(i, now, /*timedOut=*/true);
            break;
          }
        }
        eviction_stats_.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedTimedOut)] += 1;
      } else {
        eviction_stats_.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReaped)] += 1;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The dispatch cycle

HOLDBACK_INLINE void ControllerCore::applyPressure(TimePoint now, const PoolPressure& p,
                                                   bool with_saturation) noexcept {
  if (p.poolEmpty != regime_.empty) regime_ = PoolRegime{p.poolEmpty, now};
  if (with_saturation) {
    last_saturation_ = p.saturation.effective;
    last_prefill_ = p.saturation.prefill;
    last_decode_ = p.saturation.decode;
  }
}

HOLDBACK_INLINE std::optional<Outcome> ControllerCore::deadOutcomeOf(const Item& item,
                                                                     TimePoint now) const noexcept {
  return deadOutcome(item.deadline(), item.enqueueTime, item.effectiveTtl, settings_.noEndpointTtl,
                     regime_, now);
}

HOLDBACK_INLINE DispatchResult ControllerCore::dispatchCycle(TimePoint now) noexcept {
  const std::optional<PoolPressure> pressure = sampler_.sample(now);  // host code, no lock
  return dispatchImpl(now, pressure ? &*pressure : nullptr);
}

HOLDBACK_INLINE DispatchResult ControllerCore::dispatch(TimePoint now,
                                                        const PoolPressure& pressure) noexcept {
  return dispatchImpl(now, &pressure);
}

HOLDBACK_INLINE DispatchResult ControllerCore::dispatchImpl(TimePoint now,
                                                            const PoolPressure* pressure) noexcept {
  DispatchResult result;
  FinalizedBatch finalized;     // destroyed (the requests' memory freed) after the lock
  RevocationBatch revocations;  // their evict callbacks run after the lock
  bool leased = false;          // a lease to mark delivered after the outcome callback
  {
    MutexLock lock(mu_);
    if (pressure != nullptr) applyPressure(now, *pressure, true);
    const double s = last_saturation_;
    result.saturation = s;
    cycles_ += 1;
    if (stopped_) {
      result.kind = DispatchResult::Kind::kStopped;
      return result;
    }

    // The priorities the policy sees (capacity for every band: no allocation in steady state).
    const std::span<Band* const> ordered = table_.ordered();
    domain_bands_.reserve(ordered.size());
    domain_priorities_.reserve(ordered.size());
    ceilings_.reserve(ordered.size());
    domain_bands_.clear();
    domain_priorities_.clear();
    for (Band* band : ordered) {
      band->last_ceiling.reset();
      const bool in_domain =
          settings_.priorityDomain == PriorityDomain::kProvisioned || band->queued_requests > 0 ||
          (band->last_arrival && elapsed(*band->last_arrival, now) < settings_.activityWindow);
      if (!in_domain) continue;
      domain_bands_.push_back(band);
      domain_priorities_.push_back(band->prio);
    }
    ceilings_.assign(domain_bands_.size(), 1.0);
    const bool demand_on = demandOn();
    const bool leases_on = demand_on || settings_.eviction.enabled;
    if (measuresDemand()) updateDemand(now);
    if (demand_on) {
      DemandView view;
      view.bands = demand_view_;
      view.now = now;
      if (leases_.size() > 0) view.requestUnit = s / static_cast<double>(leases_.size());
      settings_.policy->computeLimit(s, domain_priorities_, ceilings_, view);
    } else {
      settings_.policy->computeLimit(s, domain_priorities_, ceilings_);
    }
    for (std::size_t i = 0; i < domain_bands_.size(); ++i) {
      domain_bands_[i]->last_ceiling = ceilings_[i];
    }

    result.kind = DispatchResult::Kind::kNothingQueued;
    // Reserve restoration runs whether or not anything is queued (its point is to act before).
    if (settings_.eviction.enabled && settings_.eviction.restoreReserve.enabled && evict_) {
      restoreReserve(now, s, revocations);
      result.revoked = revocations.size();
    }

    bool done = table_.totalRequests() == 0;
    for (std::size_t i = 0; i < domain_bands_.size() && !done; ++i) {
      Band* band = domain_bands_[i];
      if (isGated(s, ceilings_[i])) {  // HoL: checked before looking at the band's items
        band->counters->gated_cycles += 1;
        result.kind = DispatchResult::Kind::kGated;
        result.priority = band->prio;
        if (settings_.eviction.enabled && settings_.eviction.revokeOnBlock && evict_) {
          reclaim(now, s, i, revocations);
        }
        result.revoked = revocations.size();
        break;
      }
      while (band->queued_requests > 0) {
        const FlowQueueView* picked = band->fairness->pick(*band, band->fairness_state.get());
        if (picked == nullptr || picked->size() == 0) break;  // nothing eligible: next band
        const Flow* flow = static_cast<const Flow*>(picked);
        Item* head = flow->items.front();
        if (finalized.full()) {  // too many dead heads this cycle
          done = true;
          break;
        }
        if (auto dead = deadOutcomeOf(*head, now)) {
          FinalizedBatch::Entry& e = finalized.add();
          e.retired = table_.finalize(head, *dead, now, e.completion);
          result.evicted += 1;
          continue;  // a dead head never costs the cycle its dispatch
        }
        result.kind = DispatchResult::Kind::kDispatched;
        result.priority = band->prio;
        result.id = head->id;
        if (leases_on) {
          const std::uint32_t slot = demandSlotOf(band);
          if (leases_.add(head->id, slot, band->prio, now)) {
            eviction_stats_.leasesStarted += 1;
            leased = settings_.eviction.enabled;
          }
          demand_slots_[slot].estimator.dispatched(
              std::chrono::duration<double>(elapsed(head->enqueueTime, now)).count());
        }
        FinalizedBatch::Entry& e = finalized.add();
        e.retired = table_.finalize(head, {QueueOutcome::kDispatched, OutcomeCause::kNone}, now,
                                    e.completion);
        done = true;
        break;
      }
    }
  }
  for (std::size_t i = 0; i < finalized.size(); ++i) deliver(std::move(finalized.at(i).completion));
  if (leased) {  // only now may the host be asked to evict it (never before its dispatch)
    MutexLock lock(mu_);
    leases_.markDelivered(result.id);
  }
  deliverRevocations(revocations);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Expiry, GC, topology

HOLDBACK_INLINE std::size_t ControllerCore::expire(TimePoint now) noexcept {
  const std::optional<PoolPressure> pressure = sampler_.samplePool(now);  // host code, no lock
  return expireImpl(now, pressure ? &*pressure : nullptr);
}

HOLDBACK_INLINE std::size_t ControllerCore::expire(TimePoint now,
                                                   const PoolPressure& pressure) noexcept {
  return expireImpl(now, &pressure);
}

HOLDBACK_INLINE std::size_t ControllerCore::expireImpl(TimePoint now,
                                                       const PoolPressure* pressure) noexcept {
  std::vector<Completion> finalized;
  std::vector<Retired> retired;  // freed after the lock
  {
    MutexLock lock(mu_);
    if (pressure != nullptr) applyPressure(now, *pressure, false);
    if (stopped_) return 0;
    std::vector<std::pair<Item*, Outcome>> victims;
    const Duration no_endpoint_ttl = settings_.noEndpointTtl;
    const PoolRegime regime = regime_;
    table_.forEachItem([&](Item* item) {
      if (auto dead = deadOutcome(item->deadline(), item->enqueueTime, item->effectiveTtl,
                                  no_endpoint_ttl, regime, now)) {
        victims.emplace_back(item, *dead);
      }
    });
    finalized.resize(victims.size());
    retired.reserve(victims.size());
    for (std::size_t i = 0; i < victims.size(); ++i) {
      retired.push_back(table_.finalize(victims[i].first, victims[i].second, now, finalized[i]));
    }
    table_.collectGarbage(now, flow_idle_timeout_, band_idle_timeout_, retired);
    reapLeases(now);
    retireRevocations(now);
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
    // New smoothing constants restart the estimators (the leases are kept).
    const DemandSmoothing smoothing = settings_.policy->demandSmoothing();
    for (DemandSlot& slot : demand_slots_) {
      const DemandSmoothing& old = slot.estimator.smoothing();
      if (old.rise != smoothing.rise || old.decay != smoothing.decay ||
          old.holdingSamples != smoothing.holdingSamples) {
        slot.estimator = DemandEstimator(smoothing);
      }
    }
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
  out.stopped = stopped_;
  out.eviction = eviction_stats_;
  out.eviction.enabled = settings_.eviction.enabled;
  out.eviction.pendingReclaim = pending_reclaim_;
  out.eviction.outstanding = outstanding_.size();
  out.eviction.cooling = cooling_.size();
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
