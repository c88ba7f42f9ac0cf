// The discrete-event engine behind `holdback simulate`; see include/holdback/sim/simulator.hpp.
#include "holdback/sim/simulator.hpp"

#include <algorithm>
#include <any>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <queue>
#include <span>
#include <sstream>
#include <utility>

#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// ---------------------------------------------------------------------------------------------
// Scenario

Scenario defaultScenario() {
  Scenario s;
  s.classes.push_back({.name = "interactive",
                       .priority = 100,
                       .arrival = {.process = ArrivalProcess::kOnOff,
                                   .rate = 24.0,
                                   .offRate = 1.0,
                                   .onSeconds = 30.0,
                                   .offSeconds = 30.0},
                       .inputTokens = {.mean = 512.0},
                       .outputTokens = {.mean = 128.0},
                       .ttlSeconds = 30.0});
  s.classes.push_back({.name = "standard",
                       .priority = 50,
                       .arrival = {.process = ArrivalProcess::kPoisson, .rate = 3.0},
                       .inputTokens = {.mean = 1024.0},
                       .outputTokens = {.mean = 256.0},
                       .ttlSeconds = 60.0});
  s.classes.push_back(
      {.name = "batch",
       .priority = -1,
       .arrival = {.process = ArrivalProcess::kBacklog, .backlog = 400, .rampSeconds = 10.0},
       .inputTokens = {.distribution = LengthDistribution::kUniform, .min = 256, .max = 2048},
       .outputTokens = {.distribution = LengthDistribution::kUniform, .min = 64, .max = 512},
       .ttlSeconds = 0.0});
  return s;
}

namespace {

void readLength(config::ParamReader& parent, std::string_view key, LengthSpec& out) {
  const config::Json* value = parent.value(key);
  if (value == nullptr) return;
  config::ParamReader r(value, parent.pathOf(key), parent.diagnostics());
  if (auto d = r.oneOf("distribution", {"fixed", "uniform", "exponential"})) {
    out.distribution = *d == "fixed"     ? LengthDistribution::kFixed
                       : *d == "uniform" ? LengthDistribution::kUniform
                                         : LengthDistribution::kExponential;
  }
  if (auto v = r.number("mean")) {
    if (!(*v >= 1.0 && *v <= 1e7)) r.error("mean", "must be in [1, 1e7]");
    out.mean = *v;
  }
  if (auto v = r.integer("min", 1, 10'000'000)) out.min = *v;
  if (auto v = r.integer("max", 1, 10'000'000)) out.max = *v;
  if (out.distribution == LengthDistribution::kUniform && out.min > out.max) {
    r.error("max", "must be >= min");
  }
  r.finish();
}

void readPositive(config::ParamReader& r, std::string_view key, double& out, double max = 1e9,
                  bool allowZero = false) {
  if (auto v = r.number(key)) {
    if (!((allowZero ? *v >= 0.0 : *v > 0.0) && *v <= max)) {
      r.error(key, config::formatNumber(*v) + " must be " + (allowZero ? ">= 0" : "> 0") +
                       " and <= " + config::formatNumber(max));
    } else {
      out = *v;
    }
  }
}

void readClass(const config::Json& json, const std::string& path, Diagnostics& diagnostics,
               TrafficClass& c) {
  config::ParamReader r(&json, path, diagnostics);
  if (auto v = r.string("name")) c.name = *v;
  if (c.name.empty()) r.error("name", "a non-empty class name is required");
  if (auto v = r.integer("priority", -1'000'000'000, 1'000'000'000)) {
    c.priority = static_cast<Priority>(*v);
  }
  if (const config::Json* a = r.value("arrival")) {
    config::ParamReader ar(a, r.pathOf("arrival"), diagnostics);
    if (auto p = ar.oneOf("process", {"poisson", "on-off", "backlog"})) {
      c.arrival.process = *p == "poisson"  ? ArrivalProcess::kPoisson
                          : *p == "on-off" ? ArrivalProcess::kOnOff
                                           : ArrivalProcess::kBacklog;
    }
    readPositive(ar, "rate", c.arrival.rate, 1e6, true);
    readPositive(ar, "offRate", c.arrival.offRate, 1e6, true);
    readPositive(ar, "onSeconds", c.arrival.onSeconds);
    readPositive(ar, "offSeconds", c.arrival.offSeconds);
    if (auto v = ar.integer("backlog", 0, 1'000'000)) c.arrival.backlog = *v;
    readPositive(ar, "rampSeconds", c.arrival.rampSeconds, 1e6, true);
    ar.finish();
  }
  readLength(r, "inputTokens", c.inputTokens);
  readLength(r, "outputTokens", c.outputTokens);
  readPositive(r, "ttlSeconds", c.ttlSeconds, 1e6, true);
  r.finish();
}

}  // namespace

Result<Scenario> parseScenario(const config::Json& document) {
  Diagnostics diagnostics;
  Scenario s = defaultScenario();
  config::ParamReader r(&document, "", diagnostics);
  readPositive(r, "durationSeconds", s.durationSeconds, 1e6);
  readPositive(r, "drainSeconds", s.drainSeconds, 1e6, true);
  if (auto v = r.integer("seed", 0, std::numeric_limits<std::int64_t>::max())) {
    s.seed = static_cast<std::uint64_t>(*v);
  }
  if (auto v = r.oneOf("detector", {"utilization", "concurrency"})) {
    s.detector = *v == "utilization" ? DetectorKind::kUtilization : DetectorKind::kConcurrency;
  }
  if (auto v = r.number("minCeiling")) {
    if (!(*v >= 0.0 && *v <= 1.0)) {
      r.error("minCeiling", "must be in [0, 1]");
    } else {
      s.minCeiling = *v;
    }
  }
  readPositive(r, "sigmoidSteepness", s.sigmoidSteepness, 1e3);
  if (const config::Json* p = r.value("pool")) {
    config::ParamReader pr(p, "/pool", diagnostics);
    if (auto v = pr.integer("endpoints", 1, 100'000)) s.pool.endpoints = static_cast<int>(*v);
    if (auto v = pr.integer("slots", 1, 100'000)) s.pool.slots = static_cast<int>(*v);
    readPositive(pr, "prefillBaseMs", s.pool.prefillBaseMs, 1e6, true);
    readPositive(pr, "prefillPerTokenMs", s.pool.prefillPerTokenMs, 1e6, true);
    readPositive(pr, "tpotBaseMs", s.pool.tpotBaseMs, 1e6);
    readPositive(pr, "tpotPerRunningMs", s.pool.tpotPerRunningMs, 1e6, true);
    if (auto v = pr.integer("kvCapacityTokens", 1, 1'000'000'000'000)) s.pool.kvCapacityTokens = *v;
    readPositive(pr, "scrapeIntervalMs", s.pool.scrapeIntervalMs, 1e6);
    if (auto v = pr.oneOf("service", {"tokens", "exponential"})) {
      s.pool.service = *v == "tokens" ? ServiceModel::kTokens : ServiceModel::kExponential;
    }
    readPositive(pr, "meanServiceMs", s.pool.meanServiceMs, 1e9);
    pr.finish();
  }
  if (const config::Json* classes = r.value("classes")) {
    if (!classes->is_array() || classes->empty()) {
      r.error("classes", "must be a non-empty array of traffic classes");
    } else {
      s.classes.clear();
      for (std::size_t i = 0; i < classes->size(); ++i) {
        TrafficClass c;
        readClass((*classes)[i], "/classes/" + std::to_string(i), diagnostics, c);
        s.classes.push_back(std::move(c));
      }
      for (std::size_t i = 0; i < s.classes.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
          if (s.classes[i].name == s.classes[j].name && !s.classes[i].name.empty()) {
            diagnostics.error("/classes/" + std::to_string(i) + "/name",
                              "duplicate class name \"" + s.classes[i].name + "\"");
          }
        }
      }
    }
  }
  r.finish();
  if (diagnostics.hasErrors()) return Result<Scenario>::failure(std::move(diagnostics));
  return Result<Scenario>(std::move(s), std::move(diagnostics));
}

std::string_view toString(DetectorKind kind) noexcept {
  return kind == DetectorKind::kUtilization ? "utilization" : "concurrency";
}

// ---------------------------------------------------------------------------------------------
// Arms

std::vector<Arm> allArms() {
  return {{"none", ArmKind::kNone},
          {"static-1.0", ArmKind::kStatic},
          {"stepwise", ArmKind::kStepwise},
          {"linear", ArmKind::kLinear},
          {"sigmoid", ArmKind::kSigmoid},
          {"static-map", ArmKind::kStaticMap},
          {"soft-reflective", ArmKind::kSoftReflective},
          {"stepwise-active", ArmKind::kStepwiseActive}};
}

bool findArm(std::string_view name, Arm& out) {
  for (Arm& a : allArms()) {
    if (a.name == name) {
      out = std::move(a);
      return true;
    }
  }
  return false;
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

namespace {

// ---------------------------------------------------------------------------------------------
// Engine

using Nanos = std::int64_t;
constexpr Nanos kSecond = 1'000'000'000;

Nanos fromSeconds(double s) {
  return static_cast<Nanos>(std::llround(s * 1e9));
}
Nanos fromMs(double ms) {
  return static_cast<Nanos>(std::llround(ms * 1e6));
}
double toSeconds(Nanos t) {
  return static_cast<double>(t) / 1e9;
}
TimePoint at(Nanos t) {
  return TimePoint{} + std::chrono::nanoseconds(t);
}

// splitmix64-seeded xorshift-free generator: std::mt19937_64 is specified bit-exactly, and the
// variates are computed here (std:: distributions are implementation-defined).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }

 private:
  std::uint64_t state_;
};

std::int64_t sampleLength(const LengthSpec& spec, Random& rng) {
  double v = spec.mean;
  switch (spec.distribution) {
    case LengthDistribution::kFixed:
      break;
    case LengthDistribution::kUniform:
      v = static_cast<double>(spec.min) +
          std::floor(rng.uniform() * static_cast<double>(spec.max - spec.min + 1));
      break;
    case LengthDistribution::kExponential:
      v = std::ceil(rng.exponential(spec.mean));
      break;
  }
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(v));
}

enum class EventType : std::uint8_t {
  kArrival,
  kTick,
  kScrape,
  kStep,
  kComplete,
  kExpire,
  kSample
};

struct Event {
  Nanos time = 0;
  std::uint64_t seq = 0;
  EventType type = EventType::kTick;
  std::size_t index = 0;  // class (arrival), endpoint (step), request (complete)
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

enum class State : std::uint8_t { kQueued, kServerQueue, kRunning, kDone, kRejected, kEvicted };

struct Request {
  std::uint32_t cls = 0;
  int endpoint = -1;
  std::int64_t input = 0;
  std::int64_t output = 0;
  std::int64_t generated = 0;
  Nanos arrival = 0;
  Nanos dispatched = -1;
  Nanos admitted = -1;
  Nanos firstToken = -1;
  Nanos finished = -1;
  State state = State::kQueued;
};

struct Server {
  std::deque<std::size_t> queue;
  std::vector<std::size_t> running;
  std::int64_t kvTokens = 0;
  bool stepScheduled = false;
};

class SimEndpoints final : public EndpointSource {
 public:
  explicit SimEndpoints(std::size_t n) : pool_(n) {
    for (std::size_t i = 0; i < n; ++i) pool_[i].name = "endpoint-" + std::to_string(i);
  }
  std::span<const Endpoint> endpoints(TimePoint) noexcept override { return pool_; }
  std::vector<Endpoint>& pool() { return pool_; }

 private:
  std::vector<Endpoint> pool_;
};

std::shared_ptr<UsageLimitPolicy> makePolicy(const Scenario& s, ArmKind kind) {
  switch (kind) {
    case ArmKind::kNone:
    case ArmKind::kStatic:
      return std::move(StaticUsageLimitPolicy::create({.threshold = 1.0})).value();
    case ArmKind::kStepwise:
    case ArmKind::kStepwiseActive:
      return std::move(
                 PriorityHoldbackPolicy::create(
                     {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = s.minCeiling}))
          .value();
    case ArmKind::kLinear:
      return std::move(
                 PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kLinearProportional,
                                                 .minCeiling = s.minCeiling}))
          .value();
    case ArmKind::kSigmoid:
      return std::move(
                 PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                                                 .minCeiling = s.minCeiling,
                                                 .sigmoidSteepness = s.sigmoidSteepness,
                                                 .sigmoidDomain = SigmoidDomain::kRank}))
          .value();
    case ArmKind::kStaticMap: {
      // Highest class 1.0, lowest minCeiling, the ones between 0.9.
      std::vector<Priority> ps;
      for (const TrafficClass& c : s.classes) ps.push_back(c.priority);
      std::sort(ps.begin(), ps.end(), std::greater<>());
      ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
      std::vector<StaticCeiling> map;
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const double c = i == 0 ? 1.0 : i + 1 == ps.size() ? s.minCeiling : 0.9;
        map.push_back({ps[i], c});
      }
      return std::move(PriorityHoldbackPolicy::create(
                           {.strategy = HoldbackStrategy::kStatic, .ceilings = map}))
          .value();
    }
    case ArmKind::kSoftReflective:
      return std::move(SoftReflectiveCeilingPolicy::create()).value();
  }
  return nullptr;
}

std::shared_ptr<const SaturationDetector> makeDetector(const Scenario& s) {
  if (s.detector == DetectorKind::kConcurrency) {
    return std::move(ConcurrencyDetector::create({.maxConcurrency = s.pool.slots})).value();
  }
  // Telemetry older than two scrapes is stale.
  return std::move(UtilizationDetector::create(
                       {.metricsStalenessThreshold =
                            2 * fromMs(s.pool.scrapeIntervalMs) * std::chrono::nanoseconds(1)}))
      .value();
}

class Simulation {
 public:
  Simulation(const Scenario& s, const Arm& arm, const RunOptions& options)
      : s_(s),
        arm_(arm),
        options_(options),
        servers_(static_cast<std::size_t>(s.pool.endpoints)),
        source_(std::make_shared<SimEndpoints>(static_cast<std::size_t>(s.pool.endpoints))),
        detector_(makeDetector(s)),
        filtered_(static_cast<std::size_t>(s.pool.endpoints)),
        end_(fromSeconds(s.durationSeconds)),
        stop_(end_ + fromSeconds(s.drainSeconds)) {
    for (std::size_t c = 0; c < s.classes.size(); ++c) {
      rngs_.emplace_back(s.seed * 0x100000001b3ULL + 0x51ed27 * (c + 1));
    }
    for (auto& e : source_->pool()) e.updateTime = at(0);
    if (arm.kind != ArmKind::kNone) {
      FlowControllerOptions o;
      o.policy = makePolicy(s, arm.kind);
      o.detector = detector_;
      o.endpoints = source_;
      o.onOutcome = [this](Completion&& c) { onOutcome(std::move(c)); };
      o.defaultBand.maxRequests = 1'000'000;
      o.defaultNegativeBand = o.defaultBand;
      o.clock = [this] { return at(now_); };
      if (arm.kind == ArmKind::kStepwiseActive) {
        o.priorityDomain = PriorityDomain::kActive;
        o.activityWindow = std::chrono::seconds(1);
      }
      fc_ = std::move(FlowController::create(std::move(o))).value();
    }
  }

  ArmResult run() {
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

 private:
  void schedule(Nanos t, EventType type, std::size_t index) {
    events_.push(Event{t, seq_++, type, index});
  }

  [[nodiscard]] bool burstAt(Nanos t) const {
    for (const TrafficClass& c : s_.classes) {
      if (c.arrival.process != ArrivalProcess::kOnOff) continue;
      const Nanos period = fromSeconds(c.arrival.onSeconds + c.arrival.offSeconds);
      return t % period < fromSeconds(c.arrival.onSeconds);
    }
    return false;
  }
  [[nodiscard]] bool hasWindows() const {
    return std::any_of(s_.classes.begin(), s_.classes.end(), [](const TrafficClass& c) {
      return c.arrival.process == ArrivalProcess::kOnOff;
    });
  }

  // Piecewise-constant rate Poisson process: memorylessness lets a draw that crosses a phase
  // boundary restart from the boundary with the new rate.
  void scheduleNextArrival(std::size_t c, Nanos from) {
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

  void handle(const Event& e) {
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

  void arrive(std::size_t c) {
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

  void cycle() {
    const DispatchResult r = fc_->dispatchCycle(at(now_));
    ++cycles_;
    if (r.kind == DispatchResult::Kind::kNothingQueued) return;
    ++cyclesWithWork_;
    if (r.kind == DispatchResult::Kind::kGated) ++gatedCycles_;
  }

  void onOutcome(Completion&& c) {
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
  void replace(std::size_t id) {
    const std::uint32_t c = requests_[id].cls;
    if (s_.classes[c].arrival.process == ArrivalProcess::kBacklog && now_ < end_) {
      schedule(now_, EventType::kArrival, c);
    }
  }

  void route(std::size_t id) {
    Request& r = requests_[id];
    r.dispatched = now_;
    std::vector<Endpoint>& pool = source_->pool();
    const FilterResult f = detector_->filter(pool, at(now_), filtered_);
    std::size_t best = 0;
    bool found = false;
    double bestLoad = 0.0;
    for (std::size_t k = 0; k < f.kept; ++k) {
      const std::size_t i = filtered_[k];
      const Endpoint& e = pool[i];
      const double load = e.waitingQueueSize + e.runningRequests;
      if (!found || load < bestLoad ||
          (load == bestLoad && e.inFlightRequests < pool[best].inFlightRequests)) {
        best = i;
        bestLoad = load;
        found = true;
      }
    }
    if (!found) {  // the concurrency filter does not fail open: fewest in flight
      for (std::size_t i = 1; i < pool.size(); ++i) {
        if (pool[i].inFlightRequests < pool[best].inFlightRequests) best = i;
      }
    }
    r.endpoint = static_cast<int>(best);
    r.state = State::kServerQueue;
    pool[best].inFlightRequests += 1;
    pool[best].inFlightTokens += r.input + r.output;
    servers_[best].queue.push_back(id);
    admit(best);
  }

  [[nodiscard]] Nanos tpot(std::size_t running) const {
    return std::max<Nanos>(
        1, fromMs(s_.pool.tpotBaseMs + s_.pool.tpotPerRunningMs * static_cast<double>(running)));
  }

  void admit(std::size_t e) {
    Server& sv = servers_[e];
    const bool tokens = s_.pool.service == ServiceModel::kTokens;
    while (!sv.queue.empty() && sv.running.size() < static_cast<std::size_t>(s_.pool.slots)) {
      Request& r = requests_[sv.queue.front()];
      if (tokens && !sv.running.empty() && sv.kvTokens + r.input > s_.pool.kvCapacityTokens) break;
      const std::size_t id = sv.queue.front();
      sv.queue.pop_front();
      r.state = State::kRunning;
      r.admitted = now_;
      sv.running.push_back(id);
      if (tokens) {
        sv.kvTokens += r.input;
        r.firstToken = now_ + fromMs(s_.pool.prefillBaseMs +
                                     s_.pool.prefillPerTokenMs * static_cast<double>(r.input));
        r.generated = 1;
      } else {
        r.firstToken = now_;
        const double ms = rngs_[r.cls].exponential(s_.pool.meanServiceMs);
        schedule(now_ + std::max<Nanos>(1, fromMs(ms)), EventType::kComplete, id);
      }
    }
    if (tokens && !sv.running.empty() && !sv.stepScheduled) {
      sv.stepScheduled = true;
      schedule(now_ + tpot(sv.running.size()), EventType::kStep, e);
    }
  }

  // One decode step of a continuous batch: every request past its prefill gets one token.
  void step(std::size_t e) {
    Server& sv = servers_[e];
    sv.stepScheduled = false;
    std::size_t kept = 0;
    for (std::size_t k = 0; k < sv.running.size(); ++k) {
      const std::size_t id = sv.running[k];
      Request& r = requests_[id];
      if (r.firstToken <= now_ && r.generated < r.output) {
        ++r.generated;
        ++sv.kvTokens;
      }
      if (r.firstToken <= now_ && r.generated >= r.output) {
        complete(id);
      } else {
        sv.running[kept++] = id;
      }
    }
    sv.running.resize(kept);
    admit(e);
  }

  // Exponential service.
  void finish(std::size_t id) {
    Server& sv = servers_[static_cast<std::size_t>(requests_[id].endpoint)];
    sv.running.erase(std::find(sv.running.begin(), sv.running.end(), id));
    complete(id);
    admit(static_cast<std::size_t>(requests_[id].endpoint));
  }

  void complete(std::size_t id) {
    Request& r = requests_[id];
    const auto e = static_cast<std::size_t>(r.endpoint);
    r.state = State::kDone;
    r.finished = now_;
    if (s_.pool.service == ServiceModel::kTokens) servers_[e].kvTokens -= r.input + r.generated - 1;
    Endpoint& ep = source_->pool()[e];
    ep.inFlightRequests -= 1;
    ep.inFlightTokens -= r.input + r.output;
    replace(id);
  }

  void scrape() {
    std::vector<Endpoint>& pool = source_->pool();
    for (std::size_t i = 0; i < pool.size(); ++i) {
      const Server& sv = servers_[i];
      pool[i].updateTime = at(now_);
      pool[i].waitingQueueSize = static_cast<double>(sv.queue.size());
      pool[i].runningRequests = static_cast<double>(sv.running.size());
      pool[i].kvCacheUsage = std::min(
          1.0, static_cast<double>(sv.kvTokens) / static_cast<double>(s_.pool.kvCapacityTokens));
    }
  }

  void sample() {
    const double saturation = detector_->saturation(source_->pool(), at(now_));
    if (now_ < end_) {
      saturationSum_ += saturation;
      ++saturationSamples_;
    }
    if (!options_.collectSeries) return;
    IntervalSample s;
    s.time = toSeconds(now_);
    s.saturation = saturation;
    s.ceilings.assign(s_.classes.size(), kNoValue);
    s.queued.assign(s_.classes.size(), 0);
    if (fc_) {
      const FlowControllerStats stats = fc_->stats();
      for (std::size_t c = 0; c < s_.classes.size(); ++c) {
        for (const BandStats& b : stats.bands) {
          if (b.priority != s_.classes[c].priority) continue;
          if (b.lastCeiling) s.ceilings[c] = *b.lastCeiling;
          s.queued[c] = b.queuedRequests;  // classes sharing a priority share a band
        }
      }
    }
    for (const Server& sv : servers_) {
      s.serverQueue.push_back(sv.queue.size());
      s.running.push_back(sv.running.size());
    }
    samples_.push_back(std::move(s));
  }

  static Percentiles percentiles(std::vector<double>& v) {
    Percentiles p;
    p.count = v.size();
    if (v.empty()) return p;
    std::sort(v.begin(), v.end());
    auto rank = [&](double q) {
      const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
      return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
    };
    p.p50 = rank(0.50);
    p.p95 = rank(0.95);
    p.p99 = rank(0.99);
    double sum = 0.0;
    for (const double x : v) sum += x;
    p.mean = sum / static_cast<double>(v.size());
    return p;
  }

  ArmResult collect() {
    ArmResult out;
    out.arm = arm_;
    out.detector = s_.detector;
    out.cycles = cycles_;
    out.cyclesWithWork = cyclesWithWork_;
    out.gatedCycles = gatedCycles_;
    out.meanSaturation =
        saturationSamples_ == 0 ? 0.0 : saturationSum_ / static_cast<double>(saturationSamples_);

    // Seconds of [0, end) in each window.
    std::vector<std::string> names =
        hasWindows() ? std::vector<std::string>{"burst", "idle"} : std::vector<std::string>{"all"};
    std::vector<double> windowSeconds(names.size(), 0.0);
    if (names.size() == 1) {
      windowSeconds[0] = toSeconds(end_);
    } else {
      const Nanos ms = fromMs(1.0);
      Nanos burst = 0;
      for (Nanos t = 0; t < end_; t += ms) burst += burstAt(t) ? ms : 0;
      windowSeconds[0] = toSeconds(burst);
      windowSeconds[1] = toSeconds(end_ - burst);
    }
    auto windowOf = [&](Nanos t) -> std::size_t { return names.size() == 1 || burstAt(t) ? 0 : 1; };

    for (std::size_t c = 0; c < s_.classes.size(); ++c) {
      ClassResult cr;
      cr.name = s_.classes[c].name;
      cr.priority = s_.classes[c].priority;
      std::vector<std::vector<double>> queue(names.size()), wait(names.size()), ttft(names.size());
      std::vector<std::size_t> arrived(names.size(), 0), done(names.size(), 0);
      std::vector<double> tokens(names.size(), 0.0);
      for (const Request& r : requests_) {
        if (r.cls != c) continue;
        if (r.state == State::kDone && r.finished < end_) {
          ++done[windowOf(r.finished)];
          tokens[windowOf(r.finished)] += static_cast<double>(r.output);
        }
        if (r.arrival >= end_) continue;
        const std::size_t w = windowOf(r.arrival);
        ++arrived[w];
        ++cr.arrived;
        switch (r.state) {
          case State::kDone:
            ++cr.completed;
            break;
          case State::kRejected:
            ++cr.rejected;
            break;
          case State::kEvicted:
            ++cr.evicted;
            break;
          default:
            ++cr.unfinished;
            break;
        }
        if (r.dispatched >= 0)
          queue[w].push_back(static_cast<double>(r.dispatched - r.arrival) / 1e6);
        if (r.admitted >= 0)
          wait[w].push_back(static_cast<double>(r.admitted - r.dispatched) / 1e6);
        if (r.firstToken >= 0 && r.firstToken <= now_) {
          ttft[w].push_back(static_cast<double>(r.firstToken - r.arrival) / 1e6);
        }
      }
      for (std::size_t w = 0; w < names.size(); ++w) {
        WindowStats ws;
        ws.window = names[w];
        ws.arrived = arrived[w];
        ws.queueMs = percentiles(queue[w]);
        ws.serverWaitMs = percentiles(wait[w]);
        ws.ttftMs = percentiles(ttft[w]);
        ws.completedPerSecond = static_cast<double>(done[w]) / windowSeconds[w];
        ws.outputTokensPerSecond = tokens[w] / windowSeconds[w];
        cr.windows.push_back(std::move(ws));
      }
      out.classes.push_back(std::move(cr));
    }
    if (options_.collectSeries) {
      auto sec = [](Nanos t) { return t < 0 ? kNoValue : toSeconds(t); };
      for (const Request& r : requests_) {
        RequestRecord rec;
        rec.classIndex = r.cls;
        rec.endpoint = r.endpoint;
        rec.inputTokens = r.input;
        rec.outputTokens = r.output;
        rec.arrival = sec(r.arrival);
        rec.dispatched = sec(r.dispatched);
        rec.admitted = sec(r.admitted);
        rec.firstToken = r.firstToken <= now_ ? sec(r.firstToken) : kNoValue;
        rec.finished = r.state == State::kDone ? sec(r.finished) : kNoValue;
        rec.outcome = r.state == State::kDone       ? "completed"
                      : r.state == State::kRejected ? "rejected"
                      : r.state == State::kEvicted  ? "evicted"
                                                    : "unfinished";
        out.requests.push_back(std::move(rec));
      }
      out.samples = std::move(samples_);
    }
    return out;
  }

  const Scenario& s_;
  Arm arm_;
  RunOptions options_;
  std::vector<Server> servers_;
  std::shared_ptr<SimEndpoints> source_;
  std::shared_ptr<const SaturationDetector> detector_;
  std::vector<std::size_t> filtered_;
  std::unique_ptr<FlowController> fc_;
  std::vector<Random> rngs_;
  std::vector<Request> requests_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  Nanos now_ = 0;
  Nanos end_;
  Nanos stop_;
  std::uint64_t cycles_ = 0;
  std::uint64_t cyclesWithWork_ = 0;
  std::uint64_t gatedCycles_ = 0;
  double saturationSum_ = 0.0;
  std::uint64_t saturationSamples_ = 0;
  std::vector<IntervalSample> samples_;
};

// ---------------------------------------------------------------------------------------------
// Output

std::string fmt(double v, int decimals = 0) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(std::string s, std::size_t width, bool right = true) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string triple(const Percentiles& p) {
  return fmt(p.p50) + " / " + fmt(p.p95) + " / " + fmt(p.p99);
}

const WindowStats* findWindow(const ClassResult& c, std::string_view w) {
  for (const WindowStats& ws : c.windows) {
    if (ws.window == w) return &ws;
  }
  return c.windows.empty() ? nullptr : &c.windows.front();
}

}  // namespace

ArmResult runArm(const Scenario& scenario, const Arm& arm, const RunOptions& options) {
  Simulation sim(scenario, arm, options);
  return sim.run();
}

std::string formatTable(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "scenario: " << scenario.pool.endpoints << " endpoints x " << scenario.pool.slots
      << " slots, " << toString(scenario.detector) << " detector, scrape "
      << fmt(scenario.pool.scrapeIntervalMs) << " ms, " << fmt(scenario.durationSeconds)
      << " s, seed " << scenario.seed << "\n";
  out << "times in ms (p50 / p95 / p99); done/s and tok/s are completions inside the window\n";
  for (const ArmResult& a : arms) {
    const double hol = a.cyclesWithWork == 0 ? 0.0
                                             : 100.0 * static_cast<double>(a.gatedCycles) /
                                                   static_cast<double>(a.cyclesWithWork);
    out << "\n== arm " << a.arm.name << ": head-of-line blocked " << fmt(hol, 1)
        << " % of cycles with queued work, mean saturation " << fmt(a.meanSaturation, 2) << "\n";
    out << pad("class", 12, false) << pad("prio", 5) << "  " << pad("window", 6, false)
        << pad("n", 6) << pad("gateway queue", 22) << pad("TTFT", 24) << pad("done/s", 8)
        << pad("tok/s", 8) << pad("rej", 5) << pad("evict", 6) << pad("unfin", 6) << "\n";
    for (const ClassResult& c : a.classes) {
      bool first = true;
      for (const WindowStats& w : c.windows) {
        out << pad(first ? c.name : "", 12, false)
            << pad(first ? std::to_string(c.priority) : "", 5) << "  " << pad(w.window, 6, false)
            << pad(std::to_string(w.arrived), 6) << pad(triple(w.queueMs), 22)
            << pad(triple(w.ttftMs), 24) << pad(fmt(w.completedPerSecond, 1), 8)
            << pad(fmt(w.outputTokensPerSecond), 8)
            << pad(first ? std::to_string(c.rejected) : "", 5)
            << pad(first ? std::to_string(c.evicted) : "", 6)
            << pad(first ? std::to_string(c.unfinished) : "", 6) << "\n";
        first = false;
      }
    }
  }
  // The trade-off in one place: top class's burst TTFT p99 against the bottom class's throughput.
  if (!arms.empty() && !arms.front().classes.empty()) {
    std::size_t top = 0;
    std::size_t bottom = 0;
    const auto& cs = arms.front().classes;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (cs[i].priority > cs[top].priority) top = i;
      if (cs[i].priority < cs[bottom].priority) bottom = i;
    }
    const bool windows = cs[top].windows.size() > 1;
    out << "\n== summary: " << cs[top].name << " TTFT p99 vs " << cs[bottom].name
        << " throughput (done/s)\n";
    out << pad("arm", 16, false) << pad(windows ? "TTFT p99 burst" : "TTFT p99", 16)
        << (windows ? pad("TTFT p99 idle", 15) : "") << pad(windows ? "tput burst" : "tput", 12)
        << (windows ? pad("tput idle", 11) : "") << "\n";
    for (const ArmResult& a : arms) {
      const ClassResult& t = a.classes[top];
      const ClassResult& b = a.classes[bottom];
      out << pad(a.arm.name, 16, false)
          << pad(fmt(findWindow(t, windows ? "burst" : "all")->ttftMs.p99), 16);
      if (windows) out << pad(fmt(findWindow(t, "idle")->ttftMs.p99), 15);
      out << pad(fmt(findWindow(b, windows ? "burst" : "all")->completedPerSecond, 1), 12);
      if (windows) out << pad(fmt(findWindow(b, "idle")->completedPerSecond, 1), 11);
      out << "\n";
    }
  }
  return out.str();
}

namespace {
std::string csvNumber(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}
}  // namespace

std::string requestsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,priority,endpoint,input_tokens,output_tokens,arrival_s,dispatched_s,"
         "admitted_s,first_token_s,finished_s,queue_ms,ttft_ms,outcome\n";
  for (const ArmResult& a : arms) {
    for (const RequestRecord& r : a.requests) {
      const TrafficClass& c = scenario.classes[r.classIndex];
      out << a.arm.name << ',' << c.name << ',' << c.priority << ',' << r.endpoint << ','
          << r.inputTokens << ',' << r.outputTokens << ',' << csvNumber(r.arrival) << ','
          << csvNumber(r.dispatched) << ',' << csvNumber(r.admitted) << ','
          << csvNumber(r.firstToken) << ',' << csvNumber(r.finished) << ','
          << csvNumber((r.dispatched - r.arrival) * 1e3) << ','
          << csvNumber((r.firstToken - r.arrival) * 1e3) << ',' << r.outcome << '\n';
    }
  }
  return out.str();
}

std::string intervalsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,time_s,saturation";
  for (const TrafficClass& c : scenario.classes) {
    out << ",ceiling_" << c.name << ",queued_" << c.name;
  }
  out << ",server_queue,running\n";
  for (const ArmResult& a : arms) {
    for (const IntervalSample& s : a.samples) {
      out << a.arm.name << ',' << csvNumber(s.time) << ',' << csvNumber(s.saturation);
      for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
        out << ',' << csvNumber(s.ceilings[c]) << ',' << s.queued[c];
      }
      std::size_t q = 0;
      std::size_t r = 0;
      for (const std::size_t x : s.serverQueue) q += x;
      for (const std::size_t x : s.running) r += x;
      out << ',' << q << ',' << r << '\n';
    }
  }
  return out.str();
}

std::string ttftCdfCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,ttft_ms,fraction\n";
  for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
    for (const ArmResult& a : arms) {
      std::vector<double> ttft;
      for (const RequestRecord& r : a.requests) {
        if (r.classIndex == c && r.arrival < scenario.durationSeconds &&
            !std::isnan(r.firstToken)) {
          ttft.push_back((r.firstToken - r.arrival) * 1e3);
        }
      }
      std::sort(ttft.begin(), ttft.end());
      for (std::size_t i = 0; i < ttft.size(); ++i) {
        out << a.arm.name << ',' << scenario.classes[c].name << ',' << csvNumber(ttft[i]) << ','
            << csvNumber(static_cast<double>(i + 1) / static_cast<double>(ttft.size())) << '\n';
      }
    }
  }
  return out.str();
}

std::string summaryCsv(const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,priority,window,arrived,queue_p50_ms,queue_p95_ms,queue_p99_ms,ttft_p50_ms,"
         "ttft_p95_ms,ttft_p99_ms,completed_per_s,output_tokens_per_s,rejected,evicted,unfinished,"
         "hol_blocked_share\n";
  for (const ArmResult& a : arms) {
    const double hol = a.cyclesWithWork == 0 ? 0.0
                                             : static_cast<double>(a.gatedCycles) /
                                                   static_cast<double>(a.cyclesWithWork);
    for (const ClassResult& c : a.classes) {
      for (const WindowStats& w : c.windows) {
        out << a.arm.name << ',' << c.name << ',' << c.priority << ',' << w.window << ','
            << w.arrived << ',' << csvNumber(w.queueMs.p50) << ',' << csvNumber(w.queueMs.p95)
            << ',' << csvNumber(w.queueMs.p99) << ',' << csvNumber(w.ttftMs.p50) << ','
            << csvNumber(w.ttftMs.p95) << ',' << csvNumber(w.ttftMs.p99) << ','
            << csvNumber(w.completedPerSecond) << ',' << csvNumber(w.outputTokensPerSecond) << ','
            << c.rejected << ',' << c.evicted << ',' << c.unfinished << ',' << csvNumber(hol)
            << '\n';
      }
    }
  }
  return out.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

std::string gnuplotScript(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream g;
  g << "# Generated by `holdback simulate --plot`; run with `gnuplot simulation.gp` in this\n"
       "# directory (Debian: apt-get install gnuplot-nox).\n"
       "set datafile separator ','\n"
       "set terminal pngcairo size 1000,600 noenhanced\n"
       "set key outside right\n"
       "set grid\n";
  for (const DetectorKind d : {DetectorKind::kUtilization, DetectorKind::kConcurrency}) {
    std::string list;
    for (const ArmResult& a : arms) {
      if (a.detector == d) list += (list.empty() ? "" : " ") + a.arm.name;
    }
    if (list.empty()) continue;
    const std::string_view name = toString(d);
    g << "arms = \"" << list << "\"\n";
    // intervals.csv: arm, time, saturation, then (ceiling, queued) per class.
    g << "set output 'saturation-" << name << ".png'\n"
      << "set title 'Pool saturation, " << name << " detector'\n"
      << "set xlabel 'time (s)'\nset ylabel 'saturation'\n"
      << "plot for [a in arms] 'intervals.csv' using (strcol(1) eq a ? $2 : NaN):3 "
         "with lines title a\n";
    // ttft-cdf.csv: arm, class, ttft_ms, fraction (sorted per arm and class).
    g << "set logscale x\nset xlabel 'TTFT (ms)'\nset ylabel 'fraction of requests'\n";
    for (const TrafficClass& c : scenario.classes) {
      g << "set output 'ttft-cdf-" << name << "-" << c.name << ".png'\n"
        << "set title 'TTFT CDF, class " << c.name << ", " << name
        << " detector (requests served)'\n"
        << "plot for [a in arms] 'ttft-cdf.csv' using (strcol(1) eq a && strcol(2) eq '" << c.name
        << "' ? $3 : NaN):4 with lines lw 2 title a\n";
    }
    g << "unset logscale x\n";
  }
  g << "set xlabel 'time (s)'\n";
  for (const ArmResult& a : arms) {
    if (a.arm.kind == ArmKind::kNone) continue;
    g << "set output 'bands-" << a.arm.name << ".png'\n"
      << "set multiplot layout 2,1 title 'arm " << a.arm.name << "'\n"
      << "set title 'ceiling per band, and saturation'\nset ylabel 'ceiling'\n"
      << "set yrange [0:1.05]\n"
      << "plot 'intervals.csv' using (strcol(1) eq '" << a.arm.name
      << "' ? $2 : NaN):3 with lines lc 'black' title 'saturation'";
    for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
      g << ", '' using (strcol(1) eq '" << a.arm.name << "' ? $2 : NaN):" << 4 + 2 * c
        << " with lines lw 2 title '" << scenario.classes[c].name << " (p"
        << scenario.classes[c].priority << ")'";
    }
    g << "\nset title 'gateway queue depth per band'\nset ylabel 'requests'\n"
      << "set yrange [0:*]\nplot ";
    for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
      g << (c ? ", " : "") << "'intervals.csv' using (strcol(1) eq '" << a.arm.name
        << "' ? $2 : NaN):" << 5 + 2 * c << " with lines lw 2 title '" << scenario.classes[c].name
        << "'";
    }
    g << "\nunset multiplot\nset yrange [*:*]\n";
  }
  g << "set output\n";
  return g.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
