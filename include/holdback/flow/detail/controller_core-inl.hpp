// Implementation of holdback/flow/detail/controller_core.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/controller_core.hpp"

#include "holdback/flow/admission-inl.hpp"  // detail::hasCapacityOf, detail::resolveTtlOf

#include <algorithm>
#include <utility>

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
  s.bandScheduling = BandScheduler::Config::of(o);
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
  table_.applyBands(topologyOf(options), options.bands);
  sampler_.keepEndpointRoom(settings_.eviction.enabled &&
                            settings_.eviction.restoreReserve.enabled);
  footprints_.reserve(PoolPressure::kMaxRoomBands);
  reserveScratch(table_.ordered().size());
}

HOLDBACK_INLINE void ControllerCore::reserveScratch(std::size_t bands) {
  domain_bands_.reserve(bands);
  domain_priorities_.reserve(bands);
  ceilings_.reserve(bands);
  scheduler_.reserve(bands);
  room_view_.reserve(bands);
  scratch_bands_ = bands;
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
      ttl =
          resolveTtlOf(request.ttl, band->requestTtl, settings_.defaultTtl, request.deadline, now);
      if (ttl.deadlinePassed) {
        outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kTtlExpired};
      } else if (exceedsEveryEndpoint(request.kvTokens, largest_kv_)) {
        outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kTooLarge};
      } else {
        const CapacityUsage global{settings_.maxBytes, table_.totalBytes(), settings_.maxRequests,
                                   table_.totalRequests()};
        const CapacityUsage local{band->maxBytes, band->queued_bytes, band->maxRequests,
                                  band->queued_requests};
        if (!hasCapacityOf(request.sizeBytes, global, &local)) {
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
      if (measuresDemand()) demand_.arrived(band, *settings_.policy, leases_, request.kvTokens);
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
  evictor_.leaseReleased(*lease, now, settings_.eviction);  // a revoked one: its confirmation
  // A revoked lease's holding time was cut short: not a holding-time sample.
  if (!lease->revoked) demand_.completed(lease->band, now - lease->dispatchedAt);
  return true;
}

HOLDBACK_INLINE bool ControllerCore::updateLease(RequestId id, std::uint64_t footprint,
                                                 std::uint64_t generated) noexcept {
  MutexLock lock(mu_);
  return leases_.setTokens(id, footprint, generated);
}

HOLDBACK_INLINE bool ControllerCore::setLeaseEndpoint(RequestId id, std::size_t endpoint) noexcept {
  const std::uint32_t stored = endpoint < LeaseTable::kNoEndpoint
                                   ? static_cast<std::uint32_t>(endpoint)
                                   : LeaseTable::kNoEndpoint;
  MutexLock lock(mu_);
  return leases_.setEndpoint(id, stored);
}

HOLDBACK_INLINE bool ControllerCore::markLeaseStarted(RequestId id) noexcept {
  MutexLock lock(mu_);
  return leases_.markStarted(id);
}

HOLDBACK_INLINE bool ControllerCore::setLeaseParked(RequestId id, bool parked) noexcept {
  MutexLock lock(mu_);
  return leases_.setParked(id, parked);
}

HOLDBACK_INLINE ReplicaRestoreFigures ControllerCore::replicaRestoreFigures() const noexcept {
  MutexLock lock(mu_);
  ReplicaRestoreFigures mine = replicas_.published();
  // Published with or without restoration: the others' policies size from the pool's turnover.
  mine.completionRate = demand_.completionRate();
  mine.leases = static_cast<double>(leases_.size());
  for (Band* band : table_.ordered()) {
    if (band->queued_requests == 0) continue;
    const FlowQueueView* f = band->bestHeadFlow();
    if (f == nullptr || f->size() == 0) continue;
    const Item* head = static_cast<const Flow*>(f)->items.front();
    mine.addHead(band->prio, ReplicaRestoreFigures::secondsOf(head->enqueueTime));
  }
  return mine;
}

HOLDBACK_INLINE void ControllerCore::recordPeerArrival(Priority priority,
                                                       std::int64_t kvTokens) noexcept {
  MutexLock lock(mu_);
  demand_.peerArrived(priority, kvTokens);
}

HOLDBACK_INLINE void ControllerCore::setReplicaShare(
    const std::optional<ReplicaShare>& share) noexcept {
  MutexLock lock(mu_);
  // Room past the KV threshold (pool_pressure.hpp): the coordinator's rule for the sampler.
  const ReplicaCoordinator::PastThresholdSetting past = replicas_.install(share);
  sampler_.setPastThreshold(past.mode, past.turn);
}

// ---------------------------------------------------------------------------------------------
// The dispatch cycle

// inline: the hot path (in the one translation unit that compiles the controller's cycle).
inline void ControllerCore::applyPressure(TimePoint now, const PressureSample& p,
                                          bool with_saturation) noexcept {
  if (p.poolEmpty != regime_.empty) regime_ = PoolRegime{p.poolEmpty, now};
  if (!p.poolEmpty) largest_kv_ = p.largestKvCapacityTokens;
  if (with_saturation) {
    last_saturation_ = p.saturation.effective;
    last_all_stale_ = p.endpoints > 0 && p.staleEndpoints >= p.endpoints;
    last_prefill_ = p.saturation.prefill;
    last_decode_ = p.saturation.decode;
    last_room_bands_ = std::min(p.roomBands, p.room.size());
    for (std::size_t k = 0; k < last_room_bands_; ++k) {
      last_room_[k].priority = p.room[k].priority;
      last_room_[k].room = BandRoom{p.room[k].fits, p.room[k].fitsAfter};
    }
  }
}

HOLDBACK_INLINE std::span<const BandRoom> ControllerCore::roomView() noexcept {
  room_view_.clear();
  bool any = false;
  for (const Priority prio : domain_priorities_) {
    BandRoom room;
    for (std::size_t k = 0; k < last_room_bands_; ++k) {
      if (last_room_[k].priority == prio) {
        room = last_room_[k].room;
        any = true;
        break;
      }
    }
    room_view_.push_back(room);
  }
  return any ? std::span<const BandRoom>(room_view_) : std::span<const BandRoom>();
}

HOLDBACK_INLINE void ControllerCore::declareFootprints(
    std::span<const BandDemand> demand) noexcept {
  // Band i protects the bands above it: their mean footprint weighted by their arrival rates
  // (equally while none has a rate), declared footprints only. Band 0 protects nothing.
  footprints_.clear();
  double weighted = 0.0;
  double rates = 0.0;
  double plain = 0.0;
  double declared = 0.0;
  const std::size_t n = std::min(demand.size(), domain_priorities_.size());
  for (std::size_t i = 0; i < n && footprints_.size() < PoolPressure::kMaxRoomBands; ++i) {
    const double own = demand[i].footprintTokens;
    if (i > 0) {
      const double protect = rates > 0.0      ? weighted / rates
                             : declared > 0.0 ? plain / declared
                                              : 0.0;
      footprints_.push_back(BandFootprint{domain_priorities_[i], protect, own});
    }
    if (own > 0.0 && std::isfinite(own)) {
      const double rate = demand[i].arrivalRate;
      if (rate > 0.0 && std::isfinite(rate)) {
        weighted += rate * own;
        rates += rate;
      }
      plain += own;
      declared += 1.0;
    }
  }
  sampler_.setFootprints(footprints_);
}

HOLDBACK_INLINE DispatchResult ControllerCore::dispatch(TimePoint now,
                                                        const PoolPressure& pressure) noexcept {
  const PressureSample sample = PressureSample::of(pressure);
  return dispatchImpl(now, &sample, /*sample=*/false);
}

// The cycle's steps are always inlined (controller_core.hpp): the hot path, all in the one
// translation unit that compiles the controller's cycle.
HOLDBACK_INLINE DispatchResult ControllerCore::dispatchImpl(TimePoint now,
                                                            const PressureSample* given,
                                                            bool sample) noexcept {
  // The sample lives in this frame: dispatchCycle stays a forwarder the compiler inlines.
  PressureSample sampled;
  const PressureSample* pressure = given;
  if (sample && sampler_.sampleInto(now, true, sampled)) pressure = &sampled;  // host code, no lock
  CycleView cycle(now);
  {
    MutexLock lock(mu_);
    if (!beginCycle(cycle, pressure)) return cycle.result;  // the pressure applied; kStopped
    selectDomain(cycle);                                    // the bands the policy sees
    computeCeilings(cycle);                                 // demand, computeLimit once
    restoreReserve(cycle);                                  // the reserve, before a block
    serveBands(cycle);                                      // gate, pick, dispatch one
  }
  finishCycle(cycle);  // outcomes, the lease delivered, revocations: host code, no lock
  return cycle.result;
}

inline bool ControllerCore::beginCycle(CycleView& cycle, const PressureSample* pressure) noexcept {
  if (pressure != nullptr) applyPressure(cycle.now, *pressure, true);
  cycle.saturation = last_saturation_;
  cycle.result.saturation = last_saturation_;
  cycles_ += 1;
  if (stopped_) cycle.result.kind = DispatchResult::Kind::kStopped;
  return !stopped_;
}

inline void ControllerCore::selectDomain(CycleView& cycle) noexcept {
  // The priorities the policy sees (capacity for every band: no allocation in steady state).
  cycle.ordered = table_.ordered();
  if (cycle.ordered.size() > scratch_bands_) reserveScratch(cycle.ordered.size());
  domain_bands_.clear();
  domain_priorities_.clear();
  const bool provisioned = settings_.priorityDomain == PriorityDomain::kProvisioned;
  const Duration window = settings_.activityWindow;
  for (Band* band : cycle.ordered) {
    const bool in_domain = provisioned || band->queued_requests > 0 ||
                           (band->last_arrival && elapsed(*band->last_arrival, cycle.now) < window);
    if (!in_domain) {
      band->last_ceiling.reset();  // a domain band's is set by computeCeilings
      continue;
    }
    domain_bands_.push_back(band);
    domain_priorities_.push_back(band->prio);
  }
  ceilings_.assign(domain_bands_.size(), 1.0);
  cycle.domain = domain_bands_;
}

inline void ControllerCore::computeCeilings(CycleView& cycle) noexcept {
  const double s = cycle.saturation;
  const bool demand_on = demandOn();
  cycle.leasesOn = demand_on || settings_.eviction.enabled;
  cycle.restores = settings_.eviction.enabled && settings_.eviction.restoreReserve.enabled;
  if (demand_on || cycle.restores) {  // measuresDemand()
    demand_.update(cycle.now, cycle.ordered, domain_bands_, *settings_.policy, leases_,
                   cycle.restores ? settings_.eviction.restoreReserve.burstSignificance : 0.0);
  }
  if (demand_on) {
    DemandView view;
    view.bands = demand_.view();
    view.now = cycle.now;
    if (leases_.size() > 0) view.requestUnit = s / static_cast<double>(leases_.size());
    // With replicas: the pool's turnover per replica, not this replica's own (DemandView);
    // the pool's own when the demand estimates count the pool's arrivals.
    if (const std::optional<double> pool = replicas_.poolCompletionRate(demand_.completionRate())) {
      view.completionRate = *pool;
    }
    if (settings_.policy->usesRoom()) {
      view.room = roomView();
      declareFootprints(view.bands);  // for the next samples
    }
    settings_.policy->computeLimit(s, domain_priorities_, ceilings_, view);
  } else {
    settings_.policy->computeLimit(s, domain_priorities_, ceilings_);
  }
  cycle.ceilings = ceilings_;
  for (std::size_t i = 0; i < cycle.domain.size(); ++i) {
    cycle.domain[i]->last_ceiling = cycle.ceilings[i];
  }
  cycle.result.kind = DispatchResult::Kind::kNothingQueued;
}

inline void ControllerCore::restoreReserve(CycleView& cycle) noexcept {
  // Whether or not anything is queued (its point is to act before a block).
  if (!cycle.restores || !evict_) return;
  evictor_.restoreReserve(evictionCycle(cycle.now, cycle.saturation), cycle.revocations);
  cycle.result.revoked = cycle.revocations.size();
}

inline void ControllerCore::serveBands(CycleView& cycle) noexcept {
  if (table_.totalRequests() == 0) return;
  scheduler_.plan(settings_.bandScheduling, cycle.saturation, domain_bands_, ceilings_,
                  cycle.ordered);
  const bool scheduled = scheduler_.active();
  for (std::size_t k = 0; k < cycle.domain.size(); ++k) {
    const std::size_t i = scheduled ? scheduler_.at(k) : k;  // strict priority: i == k
    if (isGated(cycle.saturation, cycle.ceilings[i])) {      // HoL: before looking at its items
      blockAt(cycle, i);
      return;
    }
    if (serveBand(cycle, i)) return;
  }
}

inline void ControllerCore::blockAt(CycleView& cycle, std::size_t i) noexcept {
  Band* band = cycle.domain[i];
  band->counters->gated_cycles += 1;
  if (last_all_stale_) stale_gated_cycles_ += 1;
  cycle.result.kind = DispatchResult::Kind::kGated;
  cycle.result.priority = band->prio;
  if (settings_.eviction.enabled && settings_.eviction.revokeOnBlock && evict_) {
    evictor_.reclaim(evictionCycle(cycle.now, cycle.saturation), i, cycle.revocations);
  }
  cycle.result.revoked = cycle.revocations.size();
}

inline bool ControllerCore::serveBand(CycleView& cycle, std::size_t i) noexcept {
  Band* band = cycle.domain[i];
  while (band->queued_requests > 0) {
    const FlowQueueView* picked = band->fairness->pick(*band, band->fairness_state.get());
    if (picked == nullptr || picked->size() == 0) return false;  // nothing eligible: next band
    Item* head = static_cast<const Flow*>(picked)->items.front();
    if (cycle.finalized.full()) return true;  // too many dead heads this cycle
    if (auto dead =
            deadOutcomeOf(*head, cycle.now, largest_kv_, settings_.noEndpointTtl, regime_)) {
      cycle.finalized.add(table_, head, *dead, cycle.now);
      cycle.result.evicted += 1;
      continue;  // a dead head never costs the cycle its dispatch
    }
    if (yieldsToPeer(*band, *head)) {  // another replica's head of this band waited longer
      cycle.result.kind = DispatchResult::Kind::kGated;
      cycle.result.priority = band->prio;
      yielded_cycles_ += 1;
      return true;
    }
    dispatchHead(cycle, i, head);
    return true;
  }
  return false;
}

inline void ControllerCore::dispatchHead(CycleView& cycle, std::size_t i, Item* head) noexcept {
  Band* band = cycle.domain[i];
  cycle.result.kind = DispatchResult::Kind::kDispatched;
  cycle.result.priority = band->prio;
  cycle.result.id = head->id;
  if (cycle.leasesOn) {
    const std::uint32_t slot = demand_.slotOf(band, *settings_.policy, leases_);
    if (leases_.add(head->id, slot, band->prio, cycle.now, 0, head->kvTokens)) {
      evictor_.leaseStarted(band->prio, settings_.eviction);
      cycle.leased = settings_.eviction.enabled;
    }
    demand_.dispatched(slot, elapsed(head->enqueueTime, cycle.now));
  }
  cycle.finalized.add(table_, head, {QueueOutcome::kDispatched, OutcomeCause::kNone}, cycle.now);
  scheduler_.dispatched(i);
}

inline void ControllerCore::finishCycle(CycleView& cycle) noexcept {
  for (std::size_t i = 0; i < cycle.finalized.size(); ++i) {
    deliver(std::move(cycle.finalized.at(i).completion));
  }
  if (cycle.leased) {  // only now may the host be asked to evict it (never before its dispatch)
    MutexLock lock(mu_);
    leases_.markDelivered(cycle.result.id);
  }
  deliverRevocations(cycle.revocations, evict_);  // host code: after the lock
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
