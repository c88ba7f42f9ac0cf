// The event loop, the traffic and the gateway side of the simulation (src/sim/engine.hpp): every
// arrival is enqueued into the FlowController and followed by one dispatchCycle, a 1 ms ticker
// runs dispatchCycle, expire() runs every second; a dispatched request is routed to an endpoint.
#include "engine.hpp"

#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

Simulation::Simulation(const Scenario& s, const Arm& arm, const RunOptions& options)
    : s_(s),
      arm_(arm),
      options_(options),
      servers_(static_cast<std::size_t>(s.pool.endpoints)),
      source_(std::make_shared<SimEndpoints>(static_cast<std::size_t>(s.pool.endpoints))),
      detector_(makeDetector(s).value()),
      picker_(static_cast<std::size_t>(s.pool.endpoints)),
      end_(fromSeconds(s.durationSeconds)),
      stop_(end_ + fromSeconds(s.drainSeconds)) {
  for (std::size_t c = 0; c < s.classes.size(); ++c) {
    rngs_.emplace_back(s.seed * 0x100000001b3ULL + 0x51ed27 * (c + 1));
  }
  for (auto& e : source_->pool()) e.updateTime = at(0);
  if (arm.flowControl) {
    FlowControllerOptions o;
    o.policy = makePolicy(s, arm).value();
    o.detector = detector_;
    o.endpoints = source_;
    o.onOutcome = [this](Completion&& c) { onOutcome(std::move(c)); };
    o.defaultBand.maxRequests = 1'000'000;
    o.defaultNegativeBand = o.defaultBand;
    o.clock = [this] { return at(now_); };
    o.priorityDomain = arm.priorityDomain;
    o.activityWindow = arm.activityWindow;
    fc_ = std::move(FlowController::create(std::move(o))).value();
  }
}

ArmResult Simulation::run() {
  for (std::size_t c = 0; c < s_.classes.size(); ++c) {
    const ArrivalSpec& a = s_.classes[c].arrival;
    if (a.process == ArrivalProcess::kBacklog) {
      const Nanos spacing = a.backlog == 0 ? 0 : fromSeconds(a.rampSeconds) / a.backlog;
      for (std::int64_t i = 0; i < a.backlog; ++i) schedule(i * spacing, EventType::kArrival, c);
    } else {
      scheduleNextArrival(c, 0);
    }
  }
  schedule(fromMs(s_.pool.scrapeIntervalMs), EventType::kScrape, 0);
  if (fc_) {
    schedule(fromMs(1.0), EventType::kTick, 0);
    schedule(kSecond, EventType::kExpire, 0);
  }
  schedule(0, EventType::kSample, 0);
  while (!events_.empty()) {
    const Event e = events_.top();
    if (e.time > stop_) break;
    events_.pop();
    now_ = e.time;
    handle(e);
  }
  if (fc_) fc_->shutdown(at(now_));
  return collect();
}

void Simulation::schedule(Nanos t, EventType type, std::size_t index) {
  events_.push(Event{t, seq_++, type, index});
}

bool Simulation::burstAt(Nanos t) const {
  for (const TrafficClass& c : s_.classes) {
    if (c.arrival.process != ArrivalProcess::kOnOff) continue;
    const Nanos period = fromSeconds(c.arrival.onSeconds + c.arrival.offSeconds);
    return t % period < fromSeconds(c.arrival.onSeconds);
  }
  return false;
}
bool Simulation::hasWindows() const {
  return std::any_of(s_.classes.begin(), s_.classes.end(), [](const TrafficClass& c) {
    return c.arrival.process == ArrivalProcess::kOnOff;
  });
}

// Piecewise-constant rate Poisson process: memorylessness lets a draw that crosses a phase
// boundary restart from the boundary with the new rate.
void Simulation::scheduleNextArrival(std::size_t c, Nanos from) {
  const ArrivalSpec& a = s_.classes[c].arrival;
  Random& rng = rngs_[c];
  Nanos t = from;
  for (int guard = 0; guard < 1'000'000 && t < end_; ++guard) {
    double rate = a.rate;
    Nanos phaseEnd = end_;
    if (a.process == ArrivalProcess::kOnOff) {
      const Nanos on = fromSeconds(a.onSeconds);
      const Nanos period = on + fromSeconds(a.offSeconds);
      const Nanos phaseStart = t - t % period;
      const bool isOn = t % period < on;
      rate = isOn ? a.rate : a.offRate;
      phaseEnd = std::min(end_, phaseStart + (isOn ? on : period));
    }
    if (rate > 0.0) {
      const Nanos next = t + std::max<Nanos>(1, fromSeconds(rng.exponential(1.0 / rate)));
      if (next < phaseEnd) {
        schedule(next, EventType::kArrival, c);
        return;
      }
    }
    t = phaseEnd;
  }
}

void Simulation::handle(const Event& e) {
  switch (e.type) {
    case EventType::kArrival:
      arrive(e.index);
      break;
    case EventType::kTick:
      cycle();
      schedule(now_ + fromMs(1.0), EventType::kTick, 0);
      break;
    case EventType::kScrape:
      scrape();
      schedule(now_ + fromMs(s_.pool.scrapeIntervalMs), EventType::kScrape, 0);
      break;
    case EventType::kStep:
      step(e.index);
      break;
    case EventType::kComplete:
      finish(e.index);
      break;
    case EventType::kExpire:
      (void)fc_->expire(at(now_));
      schedule(now_ + kSecond, EventType::kExpire, 0);
      break;
    case EventType::kSample:
      sample();
      schedule(now_ + fromMs(options_.sampleIntervalMs), EventType::kSample, 0);
      break;
  }
}

void Simulation::arrive(std::size_t c) {
  const TrafficClass& tc = s_.classes[c];
  if (tc.arrival.process != ArrivalProcess::kBacklog) scheduleNextArrival(c, now_);
  Request r;
  r.cls = static_cast<std::uint32_t>(c);
  r.input = sampleLength(tc.inputTokens, rngs_[c]);
  r.output = sampleLength(tc.outputTokens, rngs_[c]);
  r.arrival = now_;
  const std::size_t id = requests_.size();
  requests_.push_back(r);
  if (!fc_) {
    route(id);
    return;
  }
  FlowRequest fr;
  fr.flowId = tc.name;
  fr.priority = tc.priority;
  fr.sizeBytes = static_cast<std::uint64_t>(r.input) * 4;
  if (tc.ttlSeconds > 0.0) fr.ttl = std::chrono::nanoseconds(fromSeconds(tc.ttlSeconds));
  fr.payload = id;
  (void)fc_->enqueue(std::move(fr), at(now_));
  cycle();
}

void Simulation::cycle() {
  const DispatchResult r = fc_->dispatchCycle(at(now_));
  ++cycles_;
  if (r.kind == DispatchResult::Kind::kNothingQueued) return;
  ++cyclesWithWork_;
  if (r.kind == DispatchResult::Kind::kGated) ++gatedCycles_;
}

void Simulation::onOutcome(Completion&& c) {
  const std::size_t id = *std::any_cast<std::size_t>(&c.payload);
  if (c.outcome.dispatched()) {
    route(id);
    return;
  }
  requests_[id].state = c.outcome.rejected() ? State::kRejected : State::kEvicted;
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

void Simulation::route(std::size_t id) {
  Request& r = requests_[id];
  r.dispatched = now_;
  std::vector<Endpoint>& pool = source_->pool();
  const std::size_t best = picker_.pick(pool, *detector_, at(now_)).value_or(0);
  r.endpoint = static_cast<int>(best);
  r.state = State::kServerQueue;
  pool[best].inFlightRequests += 1;
  pool[best].inFlightTokens += r.input + r.output;
  servers_[best].queue.push_back(id);
  admit(best);
}
}  // namespace detail

ArmResult runArm(const Scenario& scenario, const Arm& arm, const RunOptions& options) {
  detail::Simulation sim(scenario, arm, options);
  return sim.run();
}

double erlangCMeanWait(double lambda, double mu, int c) {
  const double a = lambda / mu;
  const double rho = a / c;
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  double term = 1.0;  // a^k / k!
  double sum = 0.0;
  for (int k = 0; k < c; ++k) {
    sum += term;
    term *= a / (k + 1);
  }
  const double top = term / (1.0 - rho);  // a^c / c! / (1 - rho)
  const double probWait = top / (sum + top);
  return probWait / (c * mu - lambda);
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
