// The event loop, the traffic and the gateway side of the simulation (src/sim/engine.hpp): every
// arrival is enqueued into the FlowController and followed by one dispatchCycle, a 1 ms ticker
// runs dispatchCycle, expire() runs every second; a dispatched request is routed to an endpoint.
#include "sim/engine.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {
namespace {

// The free room split among synced replicas leaves a reservation arm's reserve (its minReserve,
// per endpoint, rounded up) visible to every replica (DispatchLedgerOptions::sharedRoomSlots).
std::int64_t reservePerEndpoint(const Scenario& s, const Arm& arm) {
  if (s.pool.endpoints <= 0) return 0;
  return static_cast<std::int64_t>(
      std::ceil(policyMinReserve(s, arm) / static_cast<double>(s.pool.endpoints)));
}

}  // namespace

double policyMinReserve(const Scenario& s, const Arm& arm) {
  if (!arm.policy) return 0.0;
  const config::Json policy = arm.policy(s);
  const auto params = policy.find("parameters");
  if (params == policy.end() || !params->is_object()) return 0.0;
  const auto reserve = params->find("minReserve");
  if (reserve == params->end() || !reserve->is_number()) return 0.0;
  return reserve->get<double>();
}

Simulation::Simulation(const Scenario& s, const Arm& arm, const RunOptions& options)
    : s_(s),
      arm_(arm),
      options_(options),
      engine_(engineSchedulingOf(s, arm)),
      servers_(static_cast<std::size_t>(s.pool.endpoints)),
      detector_(makeDetector(s, arm).value()),
      lossRng_(s.seed * 0x9e3779b97f4a7c15ULL + 0x10057),
      end_(fromSeconds(s.durationSeconds)),
      stop_(end_ + fromSeconds(s.drainSeconds)) {
  for (std::size_t c = 0; c < s.classes.size(); ++c) {
    rngs_.emplace_back(s.seed * 0x100000001b3ULL + 0x51ed27 * (c + 1));
  }
  traces_.resize(s.classes.size());
  const auto endpoints = static_cast<std::size_t>(s.pool.endpoints);
  const std::vector<EndpointGroup> specs = s.pool.endpointSpecs();  // mixed pools: per endpoint
  for (std::size_t i = 0; i < endpoints; ++i) servers_[i].spec = specs[i];
  for (const EndpointGroup& g : specs) largestKv_ = std::max(largestKv_, g.kvCapacityTokens);
  const auto replicas = static_cast<std::size_t>(std::max(1, s.pool.gatewayReplicas));
  gateways_.resize(replicas);
  // Priority routing's levels (the defaults without it), for each replica's tracker and ledger.
  const DispatchLedgerOptions levels = priorityLevelsOf(s, arm);
  for (std::size_t g = 0; g < replicas; ++g) {
    Gateway& gw = gateways_[g];
    gw.source = std::make_shared<SimEndpoints>(endpoints);
    gw.picker = EndpointPicker(endpoints, {arm.fitFirst, arm.priorityRouting});
    gw.inFlight = std::make_unique<InFlightTracker>(levels);
    gw.outputs = std::move(OutputEstimator::create()).value();  // default options: valid
    for (std::size_t i = 0; i < endpoints; ++i) {  // capacity: configured, known from the start
      Endpoint& e = gw.source->pool()[i];
      std::tie(e.updateTime, e.maxRunningRequests, e.kvCapacityTokens) =
          std::tuple(at(0), specs[i].slots, specs[i].kvCapacityTokens);
    }
    if (s.pool.dispatchLedger && s.detector == DetectorKind::kUtilization) {
      DispatchLedgerOptions lo;
      lo.dispatchBudget = s.pool.ledgerBudget;
      // Reserve mode credits the requests that ended since the scrape in the view the
      // controller dispatches on as in the room a call carries to the table
      // (ReserveReplica::roomToSend): a freed slot is free at the gate as it is at the table
      // (docs/design/replicas.md, "A replica").
      lo.creditCompletions = s.pool.ledgerCreditCompletions ||
                             (s.pool.replicaMode == ReplicaMode::kReserve && !arm.oracle);
      lo.budgetQueueDepth = UtilizationDetectorOptions{}.queueDepthThreshold;
      lo.replicas = static_cast<std::int64_t>(replicas);  // each replica sees 1/R of the work
      lo.sharedRoomSlots = reservePerEndpoint(s, arm);
      lo.priorityLevels = levels.priorityLevels;
      gw.ledger = std::make_unique<DispatchLedger>(lo);
      for (std::size_t i = 0; i < endpoints; ++i) {
        gw.ids.push_back(gw.ledger->registerEndpoint(
            gw.source->pool()[i].name,
            EndpointCapacity{.maxRunningRequests = specs[i].slots,
                             .kvCapacityTokens = specs[i].kvCapacityTokens}));
      }
      // Until the first scrape: an idle pool sampled at t = 0, as without the ledger.
      for (const EndpointId id : gw.ids) {
        (void)gw.ledger->installScrape(id, Scrape{.updateTime = at(0)}, gw.ledger->mark(id));
      }
      gw.fill();
    }
    if (gw.ledger && replicas > 1 && s.pool.replicaSyncIntervalMs > 0.0) {
      if (!replicaStore_) {
        replicaStore_ = std::make_unique<SimReplicaStore>();
        replicaStore_->published.assign(replicas, std::vector<InFlightLoad>(endpoints));
        replicaStore_->figures.assign(replicas, ReplicaRestoreFigures{});
      }
      replicaSyncs_.push_back(std::make_unique<SimReplicaSync>(*replicaStore_, g));
      replicaSyncers_.push_back(
          std::make_unique<ReplicaSyncer>(*gw.ledger, *replicaSyncs_.back(), gw.ids));
      if (s.pool.replicaFeed) {
        feedOn_ = true;
        gw.ledger->setPeerFeed(true);
      }
    }
    if (!arm.flowControl) continue;
    FlowControllerOptions o;
    o.policy = makePolicy(s, arm).value();
    o.detector = detector_;
    o.endpoints = gw.source;
    o.onOutcome = [this, g](Completion&& c) { onOutcome(g, std::move(c)); };
    o.defaultBand.maxRequests = 1'000'000;
    o.defaultNegativeBand = o.defaultBand;
    o.clock = [this] { return at(now_); };
    o.priorityDomain = arm.priorityDomain;
    o.activityWindow = arm.activityWindow;
    if (arm.eviction) {
      o.eviction.enabled = true;
      // The sensor's lag: upstream's derivation from the detector (10 ms in-flight counts;
      // scrape + staleness + engine budget for scraped metrics). With the dispatch ledger an
      // aborted request's completion is recorded at once but the view is floored at the scraped
      // running count, so the freed slot shows at the next scrape: one scrape interval.
      o.eviction.confirmationGrace =
          gw.ledger
              ? std::chrono::duration_cast<Duration>(
                    std::chrono::nanoseconds(fromMs(s.pool.scrapeIntervalMs)))
              : deriveEvictionGrace(detector_.get(),
                                    std::chrono::duration_cast<Duration>(
                                        std::chrono::nanoseconds(fromMs(s.pool.scrapeIntervalMs))));
      if (arm.maxRevocationsPerDecision > 0) {
        o.eviction.maxRevocationsPerDecision = arm.maxRevocationsPerDecision;
      }
      o.eviction.revokeOnBlock = arm.revokeOnBlock;
      o.eviction.restoreReserve.enabled = arm.restoreReserve;  // lead time: measured
      o.eviction.restoreReserve.epsilon = arm.restoreEpsilon;
      o.eviction.restoreReserve.burstMemory = std::chrono::duration_cast<Duration>(
          std::chrono::duration<double>(s.restoreBurstMemorySeconds));
      applyRestorationOverrides(s, arm, o.eviction);
      o.eviction.evict = [this, g](const Revocation& r) { onRevocation(g, r); };
    }
    gw.fc = std::move(FlowController::create(std::move(o))).value();
  }
  reserveSetup();
}

ArmResult Simulation::run() {
  if (arm_.oracle) oracleSetup();  // before any draw: it reads the classes' streams ahead
  for (std::size_t c = 0; c < s_.classes.size(); ++c) {
    if (options_.onlyClass >= 0 && c != static_cast<std::size_t>(options_.onlyClass)) continue;
    const ArrivalSpec& a = s_.classes[c].arrival;
    if (a.process == ArrivalProcess::kTrace) {
      if (!a.trace) continue;  // parseScenario and findScenario load it; a bare spec sends none
      traces_[c] =
          TraceCursor(a.trace, traceStartNs(*a.trace, a.startSeconds, s_.seed), a.timeScale);
      if (traces_[c].time() < end_) schedule(traces_[c].time(), EventType::kArrival, c);
    } else if (a.process == ArrivalProcess::kBacklog) {
      const Nanos spacing = a.backlog == 0 ? 0 : fromSeconds(a.rampSeconds) / a.backlog;
      for (std::int64_t i = 0; i < a.backlog; ++i) schedule(i * spacing, EventType::kArrival, c);
    } else {
      scheduleNextArrival(c, 0);
    }
  }
  if (feedOn_) {
    // Each replica scrapes on its own timer: a phase per replica, drawn from the seed.
    Random phases(s_.seed * 0x2545f4914f6cdd1dULL + 0xfeed);
    const Nanos interval = fromMs(s_.pool.scrapeIntervalMs);
    for (std::size_t g = 0; g < gateways_.size(); ++g) {
      const auto phase = static_cast<Nanos>(phases.uniform() * static_cast<double>(interval));
      schedule(interval + phase, EventType::kScrape, g + 1);
    }
  } else {
    schedule(fromMs(s_.pool.scrapeIntervalMs), EventType::kScrape, 0);
  }
  if (!replicaSyncers_.empty()) {
    schedule(fromMs(s_.pool.replicaSyncIntervalMs), EventType::kReplicaSync, 0);
  }
  if (arm_.flowControl || arm_.oracle) schedule(fromMs(1.0), EventType::kTick, 0);
  if (arm_.flowControl) schedule(kSecond, EventType::kExpire, 0);
  schedule(0, EventType::kSample, 0);
  while (!events_.empty()) {
    const Event e = events_.top();
    if (e.time > stop_) break;
    events_.pop();
    now_ = e.time;
    handle(e);
  }
  for (Gateway& gw : gateways_) {
    if (!gw.fc) continue;
    const EvictionStats ev = gw.fc->stats().eviction;
    revocationsConfirmed_ += ev.confirmed;
    revocationsTimedOut_ += ev.timedOut;
    gw.fc->shutdown(at(now_));
  }
  return collect();
}

void Simulation::schedule(Nanos t, EventType type, std::size_t index) {
  events_.push(Event{t, seq_++, type, index});
}

Nanos phasePosition(const ArrivalSpec& a, Nanos t) {
  const Nanos on = fromSeconds(a.onSeconds);
  const Nanos period = on + fromSeconds(a.offSeconds);
  return (t + (a.startOff ? on : 0)) % period;
}

const ArrivalSpec* Simulation::windowClass() const {
  for (const TrafficClass& c : s_.classes) {
    if (c.arrival.process == ArrivalProcess::kOnOff) return &c.arrival;
  }
  return nullptr;
}

bool Simulation::burstAt(Nanos t) const {
  const ArrivalSpec* a = windowClass();
  return a != nullptr && phasePosition(*a, t) < fromSeconds(a->onSeconds);
}

bool Simulation::onsetAt(Nanos t) const {
  const ArrivalSpec* a = windowClass();
  return a != nullptr &&
         phasePosition(*a, t) < std::min(fromSeconds(a->onSeconds), fromSeconds(kOnsetSeconds));
}

bool Simulation::hasWindows() const {
  return windowClass() != nullptr;
}

// Piecewise-constant rate Poisson process: memorylessness lets a draw that crosses a phase
// boundary restart from the boundary with the new rate.
std::optional<Nanos> nextArrival(const ArrivalSpec& a, Random& rng, Nanos from, Nanos end) {
  Nanos t = from;
  for (int guard = 0; guard < 1'000'000 && t < end; ++guard) {
    double rate = a.rate;
    Nanos phaseEnd = end;
    if (a.process == ArrivalProcess::kOnOff) {
      const Nanos on = fromSeconds(a.onSeconds);
      const Nanos period = on + fromSeconds(a.offSeconds);
      const Nanos position = phasePosition(a, t);
      const Nanos phaseStart = t - position;
      const bool isOn = position < on;
      rate = isOn ? a.rate : a.offRate;
      phaseEnd = std::min(end, phaseStart + (isOn ? on : period));
    }
    if (rate > 0.0) {
      const Nanos next = t + std::max<Nanos>(1, fromSeconds(rng.exponential(1.0 / rate)));
      if (next < phaseEnd) return next;
    }
    t = phaseEnd;
  }
  return std::nullopt;
}

void Simulation::scheduleNextArrival(std::size_t c, Nanos from) {
  if (auto t = nextArrival(s_.classes[c].arrival, rngs_[c], from, end_)) {
    schedule(*t, EventType::kArrival, c);
  }
}

void Simulation::handle(const Event& e) {
  switch (e.type) {
    case EventType::kArrival:
      arrive(e.index);
      break;
    case EventType::kTick:
      if (arm_.oracle) oracleCycle();
      for (std::size_t g = 0; g < gateways_.size() && !arm_.oracle; ++g) cycle(g);
      schedule(now_ + fromMs(1.0), EventType::kTick, 0);
      break;
    case EventType::kScrape:
      scrape(e.index);
      schedule(now_ + fromMs(s_.pool.scrapeIntervalMs), EventType::kScrape, e.index);
      break;
    case EventType::kStep:
      step(e.index);
      break;
    case EventType::kComplete:
      finish(e.index);
      break;
    case EventType::kExpire:
      for (Gateway& gw : gateways_) (void)gw.fc->expire(at(now_));
      schedule(now_ + kSecond, EventType::kExpire, 0);
      break;
    case EventType::kRevoke:
      abort(e.index);
      break;
    case EventType::kReplicaSync:
      for (std::size_t g = 0; g < gateways_.size(); ++g) {
        Gateway& gw = gateways_[g];
        (void)replicaSyncers_[g]->syncOnce(gw.fc ? gw.fc->replicaPort().restoreFigures()
                                                 : ReplicaRestoreFigures{});
        if (gw.fc) {
          std::optional<ReplicaShare> share = replicaSyncers_[g]->share();
          if (share && feedOn_) share->pooledArrivals = true;  // the feed carries the arrivals
          if (share && !s_.pool.replicaOldestFirst) share->headTolerance = Duration::max();
          gw.fc->replicaPort().setShare(share);
        }
        if (table_) reserveSync(g);
        gw.fill();
      }
      schedule(now_ + fromMs(s_.pool.replicaSyncIntervalMs), EventType::kReplicaSync, 0);
      break;
    case EventType::kFeed:
      deliver(feedEvents_[e.index]);
      break;
    case EventType::kReserve:
      reserveHandle(reserveEvents_[e.index]);
      break;
    case EventType::kSample:
      sample();
      schedule(now_ + fromMs(options_.sampleIntervalMs), EventType::kSample, 0);
      break;
  }
}

void Simulation::arrive(std::size_t c) {
  const TrafficClass& tc = s_.classes[c];
  Request r;
  r.cls = static_cast<std::uint32_t>(c);
  if (tc.arrival.process == ArrivalProcess::kTrace) {
    TraceCursor& trace = traces_[c];
    r.input = trace.input();
    r.output = trace.output();
    trace.advance();
    if (trace.time() < end_) schedule(trace.time(), EventType::kArrival, c);
  } else {
    if (tc.arrival.process != ArrivalProcess::kBacklog) scheduleNextArrival(c, now_);
    r.input = sampleLength(tc.inputTokens, rngs_[c]);
    r.output = sampleLength(tc.outputTokens, rngs_[c]);
  }
  r.arrival = now_;
  submit(r);
}

Request Simulation::retryOf(const Request& revoked, std::size_t id, Nanos now) {
  Request retry;
  retry.cls = revoked.cls;
  retry.input = revoked.input;
  retry.output = revoked.output;
  retry.arrival = now;
  retry.retryOf = static_cast<std::int64_t>(id);
  return retry;
}

// A new request (an arrival or a retry) reaches the gateways: round-robin over the replicas.
void Simulation::submit(Request r) {
  if (static_cast<double>(requests_.size()) >= options_.maxRequests) {
    // The backstop for memory: stop the run here (events at this instant still run).
    truncated_ = true;
    stop_ = std::min(stop_, now_);
    return;
  }
  const TrafficClass& tc = s_.classes[r.cls];
  r.gateway = static_cast<std::uint32_t>(arrivals_++ % gateways_.size());  // round-robin
  const std::size_t id = requests_.size();
  requests_.push_back(r);
  inFlight_.emplace_back();
  Gateway& gw = gateways_[r.gateway];
  if (arm_.oracle) return oracleSubmit(id);
  if (!gw.fc) {
    route(id);
    return;
  }
  FlowRequest fr;
  fr.flowId = tc.name;
  fr.priority = tc.priority;
  fr.sizeBytes = static_cast<std::uint64_t>(r.input) * 4;
  // The KV it holds to the end of its stream: input + output when declared, else + the class's
  // learned output.
  fr.kvTokens =
      r.input +
      (tc.declaresOutput ? r.output : static_cast<std::int64_t>(gw.outputs->estimate(tc.priority)));
  if (tc.ttlSeconds > 0.0) fr.ttl = std::chrono::nanoseconds(fromSeconds(tc.ttlSeconds));
  fr.payload = id;
  if (feedOn_) {
    feed({.kind = FeedEvent::Kind::kArrival,
          .gateway = r.gateway,
          .priority = tc.priority,
          .tokens = fr.kvTokens});
  }
  (void)gw.fc->enqueue(std::move(fr), at(now_));
  cycle(r.gateway);
}

// One dispatch cycle of gateway g. (When the controller offers dispatch(now, PoolPressure), the
// pressure computed here from the gateway's view can be passed in instead.)
void Simulation::cycle(std::size_t g) {
  gateways_[g].fill();  // the detector reads the replica's view: fresh through its ledger
  const DispatchResult r = gateways_[g].fc->dispatchCycle(at(now_));
  ++cycles_;
  if (r.kind == DispatchResult::Kind::kNothingQueued) return;
  ++cyclesWithWork_;
  if (r.kind == DispatchResult::Kind::kGated) ++gatedCycles_;
}

void Simulation::onOutcome(std::size_t /*gateway*/, Completion&& c) {
  const std::size_t id = *std::any_cast<std::size_t>(&c.payload);
  if (c.outcome.dispatched()) {
    requests_[id].leaseId = c.id;
    if (arm_.eviction) gateways_[requests_[id].gateway].leases.emplace(c.id, id);
    route(id);
    return;
  }
  requests_[id].state = c.outcome.cause == OutcomeCause::kTooLarge ? State::kTooLarge
                        : c.outcome.rejected()                     ? State::kRejected
                                                                   : State::kEvicted;
  requests_[id].finished = now_;
  replace(id);
}

// A closed-loop class replaces each request that ended (before the end of the measurement).
void Simulation::replace(std::size_t id) {
  const std::uint32_t c = requests_[id].cls;
  if (s_.classes[c].arrival.process == ArrivalProcess::kBacklog && now_ < end_) {
    schedule(now_, EventType::kArrival, c);
  }
}

// The controller revoked a lease (called from its dispatch cycle, no library lock held): the host
// aborts the request on its server; the abort lands pool.revocationLatencyMs later. A lease that
// ended on its own meanwhile (no longer in the map) is ignored, as the contract allows.
void Simulation::onRevocation(std::size_t gateway, const Revocation& rev) {
  ++revocationsIssued_;
  const auto it = gateways_[gateway].leases.find(rev.id);
  if (it == gateways_[gateway].leases.end()) return;
  Request& r = requests_[it->second];
  if (r.revoking) return;
  if (r.parked) return reserveCancel(it->second);  // it never started: nothing to abort
  r.revoking = true;
  schedule(now_ + fromMs(s_.pool.revocationLatencyMs), EventType::kRevoke, it->second);
}

void Simulation::route(std::size_t id) {
  Request& r = requests_[id];
  Gateway& gw = gateways_[r.gateway];
  if (r.input + r.output > largestKv_) {
    // No server can hold it to its end: the server refuses it at once (a model server's length
    // check), whether or not the gateway knew the capacity. Like a refusal at enqueue, it has no
    // dispatch time (no gateway queueing delay is counted for it).
    r.state = State::kTooLarge;
    r.finished = now_;
    if (gw.fc && r.leaseId != 0) {
      gw.leases.erase(r.leaseId);
      (void)gw.fc->release(r.leaseId, at(now_));
    }
    replace(id);
    return;
  }
  r.dispatched = now_;
  if (table_) return reserveRoute(id);
  gw.fill();
  const std::span<const std::int64_t> above = priorityCounts(id);  // priority routing's counts
  sendTo(id,
         gw.picker.pick(gw.source->pool(), *detector_, at(now_), {}, r.input, above).value_or(0));
}

void Simulation::sendTo(std::size_t id, std::size_t best) {
  Request& r = requests_[id];
  Gateway& gw = gateways_[r.gateway];
  std::vector<Endpoint>& pool = gw.source->pool();
  r.endpoint = static_cast<int>(best);
  r.state = State::kServerQueue;
  // The lease's endpoint, for restoration per endpoint (the picker chose on the source's list).
  if (arm_.eviction && gw.fc) (void)gw.fc->ticket(r.leaseId).setEndpoint(best);
  // The library's in-flight mechanism: a handle per request, its counts copied into the
  // replica's Endpoint view for the picker and the detector.
  if (gw.ledger) {
    (void)gw.ledger->recordDispatch(gw.ids[best], r.input + r.output, priorityOf(r));
    gw.fill();
    if (feedOn_) {
      feed({.kind = FeedEvent::Kind::kDispatch,
            .gateway = r.gateway,
            .endpoint = static_cast<std::uint32_t>(best),
            .tokens = r.input + r.output});
    }
  } else {
    inFlight_[id] = gw.inFlight->dispatch(pool[best].name, r.input + r.output, priorityOf(r));
    gw.inFlight->fill(pool);
  }
  enqueueOnServer(best, id);
  if (now_ < end_) {
    ++dispatchesSinceScrape_;
    maxServerQueue_ = std::max(maxServerQueue_, servers_[best].queue.size());
  }
  admit(best);
}
}  // namespace detail

ArmResult runArm(const Scenario& scenario, const Arm& arm, const RunOptions& options) {
  detail::Simulation sim(scenario, arm, options);
  return sim.run();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
