// Scenarios: the built-in catalog and the scenario-file reader (src/sim/scenario.hpp).
#include "sim/scenario.hpp"

#include "sim/trace_scenarios.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

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

std::vector<CatalogEntry> scenarioCatalog() {
  std::vector<CatalogEntry> out{
      {"default",
       "interactive bursts of 24 req/s for 30 s then 1 req/s for 30 s, standard 3 req/s, a "
       "batch backlog of 400 ramped in over the first 10 s (the burst starts before the pool "
       "is full)"},
      {"burst-after-idle",
       "the batch backlog fills the pool first; interactive idles at 1 req/s for 30 s, then "
       "bursts at 24 req/s for 30 s into the full pool; 3 cycles (180 s)"},
      {"short-bursts",
       "interactive 5 s on at 24 req/s / 25 s off at 1 req/s (off first) for 300 s: short "
       "bursts into the full pool, long idle stretches between them"},
      {"kv-bound",
       "burst-after-idle with long batch contexts (input uniform 1024-4096 tokens): about "
       "eleven batch requests fill a server's 32768-token KV cache while 5 of its 16 slots "
       "stay free, so the KV cache, not the slots, binds"},
      {"replay-small",
       "a pool of 2 x 16 slots, interactive 5 s bursts of 6 req/s between 10 s at 1 req/s "
       "(off first), a batch backlog of 64, for 45 s: small and slow enough for "
       "holdback-replay to play in about a minute on real processes (docs/guide/replay.md)"}};
  for (const CatalogEntry& e : traceCatalog()) out.push_back(e);
  return out;
}

namespace {

// The small scenario holdback-replay plays in real time (docs/guide/replay.md): service times long
// enough that HTTP and process overhead (a millisecond or two) stay small against them.
Scenario replaySmallScenario() {
  Scenario s;
  s.name = "replay-small";
  s.pool.endpoints = 2;
  s.pool.slots = 16;
  s.pool.kvCapacityTokens = 16384;
  s.pool.prefillBaseMs = 20.0;
  s.pool.prefillPerTokenMs = 0.1;
  s.pool.tpotBaseMs = 20.0;
  s.pool.tpotPerRunningMs = 2.0;
  s.durationSeconds = 45.0;
  s.drainSeconds = 10.0;
  s.classes.push_back({.name = "interactive",
                       .priority = 100,
                       .arrival = {.process = ArrivalProcess::kOnOff,
                                   .rate = 6.0,
                                   .offRate = 1.0,
                                   .onSeconds = 5.0,
                                   .offSeconds = 10.0,
                                   .startOff = true},
                       .inputTokens = {.mean = 256.0},
                       .outputTokens = {.mean = 16.0},
                       .ttlSeconds = 30.0});
  s.classes.push_back(
      {.name = "batch",
       .priority = -1,
       .arrival = {.process = ArrivalProcess::kBacklog, .backlog = 64, .rampSeconds = 2.0},
       .inputTokens = {.distribution = LengthDistribution::kUniform, .min = 256, .max = 1024},
       .outputTokens = {.distribution = LengthDistribution::kUniform, .min = 32, .max = 128},
       .ttlSeconds = 0.0});
  return s;
}

}  // namespace

bool findScenario(std::string_view name, Scenario& out) {
  std::string error;
  return findScenario(name, out, error);
}

bool findScenario(std::string_view name, Scenario& out, std::string& error) {
  if (auto found = findTraceScenario(name, out, error)) return *found;
  if (name == "default") {
    out = defaultScenario();
    return true;
  }
  if (name == "replay-small") {
    out = replaySmallScenario();
    return true;
  }
  if (name == "mixed-pool") {
    out = mixedPoolScenario();
    return true;
  }
  Scenario s = defaultScenario();
  TrafficClass& interactive = s.classes.front();
  interactive.arrival.startOff = true;
  if (name == "burst-after-idle") {
    s.durationSeconds = 180.0;
  } else if (name == "kv-bound") {
    s.durationSeconds = 180.0;
    TrafficClass& batch = s.classes.back();
    batch.inputTokens = {.distribution = LengthDistribution::kUniform, .min = 1024, .max = 4096};
  } else if (name == "short-bursts") {
    interactive.arrival.onSeconds = 5.0;
    interactive.arrival.offSeconds = 25.0;
    s.durationSeconds = 300.0;
  } else {
    return false;
  }
  s.name = std::string(name);
  out = std::move(s);
  return true;
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
               const std::string& baseDirectory, TrafficClass& c) {
  config::ParamReader r(&json, path, diagnostics);
  if (auto v = r.string("name")) c.name = *v;
  if (c.name.empty()) r.error("name", "a non-empty class name is required");
  if (auto v = r.integer("priority", -1'000'000'000, 1'000'000'000)) {
    c.priority = static_cast<Priority>(*v);
  }
  if (const config::Json* a = r.value("arrival")) {
    config::ParamReader ar(a, r.pathOf("arrival"), diagnostics);
    if (auto p = ar.oneOf("process", {"poisson", "on-off", "backlog", "trace"})) {
      c.arrival.process = *p == "poisson"  ? ArrivalProcess::kPoisson
                          : *p == "on-off" ? ArrivalProcess::kOnOff
                          : *p == "trace"  ? ArrivalProcess::kTrace
                                           : ArrivalProcess::kBacklog;
    }
    if (c.arrival.process == ArrivalProcess::kTrace) {
      readTraceArrival(ar, baseDirectory, c.arrival);
      for (const char* key : {"inputTokens", "outputTokens"}) {
        if (r.has(key)) r.error(key, "a trace class takes its token counts from the trace");
      }
    }
    readPositive(ar, "rate", c.arrival.rate, 1e6, true);
    readPositive(ar, "offRate", c.arrival.offRate, 1e6, true);
    readPositive(ar, "onSeconds", c.arrival.onSeconds);
    readPositive(ar, "offSeconds", c.arrival.offSeconds);
    if (auto v = ar.integer("backlog", 0, 1'000'000)) c.arrival.backlog = *v;
    readPositive(ar, "rampSeconds", c.arrival.rampSeconds, 1e6, true);
    if (auto v = ar.oneOf("startWith", {"on", "off"})) c.arrival.startOff = *v == "off";
    ar.finish();
  }
  readLength(r, "inputTokens", c.inputTokens);
  readLength(r, "outputTokens", c.outputTokens);
  readPositive(r, "ttlSeconds", c.ttlSeconds, 1e6, true);
  if (auto v = r.boolean("declaresOutput")) c.declaresOutput = *v;
  r.finish();
}

// The fewest tokens a length distribution draws (exponential: 1).
double shortest(const LengthSpec& l) {
  switch (l.distribution) {
    case LengthDistribution::kFixed:
      return std::max(1.0, l.mean);
    case LengthDistribution::kUniform:
      return std::max<double>(1.0, static_cast<double>(l.min));
    case LengthDistribution::kExponential:
      return 1.0;
  }
  return 1.0;
}

double classRequests(const Scenario& s, const TrafficClass& c) {
  const ArrivalSpec& a = c.arrival;
  if (a.process == ArrivalProcess::kTrace) return traceRequests(a, s.durationSeconds);
  if (a.process != ArrivalProcess::kBacklog) {
    const double rate = a.process == ArrivalProcess::kOnOff ? std::max(a.rate, a.offRate) : a.rate;
    return rate * s.durationSeconds;
  }
  const double slots = static_cast<double>(s.pool.totalSlots());
  // The fastest group's shortest service (mixed pools: an upper estimate).
  double serviceMs = std::numeric_limits<double>::infinity();
  for (const EndpointGroup& g : s.pool.endpointGroups()) {
    serviceMs = std::min(serviceMs, s.pool.service == ServiceModel::kExponential
                                        ? s.pool.meanServiceMs
                                        : g.timing.prefillBaseMs +
                                              g.timing.prefillPerTokenMs * shortest(c.inputTokens) +
                                              g.timing.tpotBaseMs * shortest(c.outputTokens));
  }
  const double completions = serviceMs > 0.0
                                 ? slots * (s.durationSeconds + s.drainSeconds) * 1000.0 / serviceMs
                                 : std::numeric_limits<double>::infinity();
  return static_cast<double>(a.backlog) + (a.backlog > 0 ? completions : 0.0);
}

// The estimate over every class, and the class contributing most to it.
struct RequestEstimate {
  double total = 0.0;
  const TrafficClass* largest = nullptr;
  double most = 0.0;
};

RequestEstimate estimateRequests(const Scenario& s) {
  RequestEstimate e;
  for (const TrafficClass& c : s.classes) {
    const double n = classRequests(s, c);
    e.total += n;
    if (e.largest == nullptr || n > e.most) {
      e.largest = &c;
      e.most = n;
    }
  }
  return e;
}

// Three significant digits: "2.16e+08".
std::string approx(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

double estimatedRequestsPerRun(const Scenario& s) {
  return estimateRequests(s).total;
}

std::string scenarioSizeError(const Scenario& s) {
  const RequestEstimate e = estimateRequests(s);
  if (e.total <= kMaxRequestsPerRun) return {};
  return "a run of this scenario may create about " + approx(e.total) + " requests (class \"" +
         (e.largest != nullptr ? e.largest->name : std::string()) + "\": " + approx(e.most) +
         ") over durationSeconds " + config::formatNumber(s.durationSeconds) + "; at most " +
         config::formatNumber(kMaxRequestsPerRun) +
         " are simulated (each is kept, ~300 bytes): lower durationSeconds or the rates";
}

Result<Scenario> parseScenario(const config::Json& document, const std::string& baseDirectory) {
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
  readPositive(r, "restoreBurstMemorySeconds", s.restoreBurstMemorySeconds, 1e6, true);
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
    if (auto v = pr.integer("gatewayReplicas", 1, 64))
      s.pool.gatewayReplicas = static_cast<int>(*v);
    readPositive(pr, "replicaSyncIntervalMs", s.pool.replicaSyncIntervalMs, 1e6, true);
    if (auto v = pr.boolean("replicaFeed")) s.pool.replicaFeed = *v;
    readPositive(pr, "replicaFeedDelayMs", s.pool.replicaFeedDelayMs, 1e6, true);
    if (auto v = pr.boolean("replicaOldestFirst")) s.pool.replicaOldestFirst = *v;
    if (auto v = pr.oneOf("replicaMode", {"share", "reserve"})) {
      s.pool.replicaMode = *v == "reserve" ? ReplicaMode::kReserve : ReplicaMode::kShare;
    }
    readPositive(pr, "replicaReserveRttMs", s.pool.replicaReserveRttMs, 1e6, true);
    readPositive(pr, "replicaReserveRetryMs", s.pool.replicaReserveRetryMs, 1e6);
    if (auto v = pr.boolean("dispatchLedger")) s.pool.dispatchLedger = *v;
    if (auto v = pr.boolean("ledgerBudget")) s.pool.ledgerBudget = *v;
    if (auto v = pr.boolean("ledgerCreditCompletions")) s.pool.ledgerCreditCompletions = *v;
    if (auto v = pr.boolean("slotTerm")) s.pool.slotTerm = *v;
    if (auto v = pr.oneOf("concurrencyMode", {"requests", "tokens", "hybrid"})) {
      s.pool.concurrencyMode = *v == "requests" ? CountedResource::kRequests
                               : *v == "tokens" ? CountedResource::kTokens
                                                : CountedResource::kHybrid;
    }
    if (auto v = pr.oneOf("aggregation", {"capacity", "mean", "max", "weighted"})) {
      s.pool.aggregation = *v;
    }
    if (auto v = pr.oneOf("engineScheduling", {"fcfs", "priority", "priority-preempt"})) {
      (void)parseEngineScheduling(*v, s.pool.engineScheduling);
    }
    readPoolGroups(pr, s.pool);
    readPositive(pr, "revocationLatencyMs", s.pool.revocationLatencyMs, 1e6, true);
    if (auto v = pr.number("lostCompletions")) {
      if (!(*v >= 0.0 && *v <= 1.0)) {
        pr.error("lostCompletions", "must be a fraction in [0, 1]");
      } else {
        s.pool.lostCompletions = *v;
      }
    }
    if (s.pool.engineScheduling == EngineScheduling::kPriorityPreempt &&
        s.pool.service != ServiceModel::kTokens) {
      pr.error("engineScheduling",
               "priority-preempt needs service: tokens (a preempted request "
               "recomputes its tokens)");
    }
    pr.finish();
    applyReplicaModeDefaults(s.pool);
  }
  if (const config::Json* classes = r.value("classes")) {
    if (!classes->is_array() || classes->empty()) {
      r.error("classes", "must be a non-empty array of traffic classes");
    } else {
      s.classes.clear();
      for (std::size_t i = 0; i < classes->size(); ++i) {
        TrafficClass c;
        readClass((*classes)[i], "/classes/" + std::to_string(i), diagnostics, baseDirectory, c);
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
  if (!diagnostics.hasErrors()) {
    if (std::string error = scenarioSizeError(s); !error.empty()) {
      diagnostics.error("/durationSeconds", std::move(error));
    }
  }
  if (diagnostics.hasErrors()) return Result<Scenario>::failure(std::move(diagnostics));
  return Result<Scenario>(std::move(s), std::move(diagnostics));
}

std::string_view toString(DetectorKind kind) noexcept {
  return kind == DetectorKind::kUtilization ? "utilization" : "concurrency";
}

std::string_view toString(ReplicaMode mode) noexcept {
  return mode == ReplicaMode::kReserve ? "reserve" : "share";
}

void applyReplicaModeDefaults(PoolSpec& pool) noexcept {
  if (pool.replicaMode != ReplicaMode::kReserve) return;
  if (!(pool.replicaSyncIntervalMs > 0.0)) pool.replicaSyncIntervalMs = kGatewayReplicaSyncMs;
  pool.replicaFeed = true;
}

std::string_view toString(EngineScheduling mode) noexcept {
  switch (mode) {
    case EngineScheduling::kFcfs:
      return "fcfs";
    case EngineScheduling::kPriority:
      return "priority";
    case EngineScheduling::kPriorityPreempt:
      return "priority-preempt";
  }
  return "fcfs";
}

bool parseEngineScheduling(std::string_view text, EngineScheduling& out) noexcept {
  for (const EngineScheduling m :
       {EngineScheduling::kFcfs, EngineScheduling::kPriority, EngineScheduling::kPriorityPreempt}) {
    if (text == toString(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

std::string_view toString(CountedResource mode) noexcept {
  switch (mode) {
    case CountedResource::kRequests:
      return "requests";
    case CountedResource::kTokens:
      return "tokens";
    case CountedResource::kHybrid:
      return "hybrid";
  }
  return "requests";
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
