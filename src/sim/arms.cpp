// The arms (src/sim/arms.hpp): a table of plugin documents, built through the
// library's policy and detector registries (no second factory beside the registries).
#include "sim/arms.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "holdback/config/detector_config.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace {

config::Json plugin(std::string_view type, config::Json parameters = nullptr) {
  config::Json doc = {{"type", type}};
  if (!parameters.is_null()) doc["parameters"] = std::move(parameters);
  return doc;
}

config::Json holdback(std::string_view strategy, const Scenario& s) {
  config::Json p = {{"strategy", strategy}, {"minCeiling", s.minCeiling}};
  if (strategy == "sigmoid-smoothed") {
    p["sigmoidSteepness"] = s.sigmoidSteepness;
    p["sigmoidDomain"] = "rank";
  }
  return plugin("priority-holdback-policy", std::move(p));
}

// Highest priority 1.0, lowest minCeiling, the ones between 0.9.
config::Json staticMap(const Scenario& s) {
  std::vector<Priority> ps;
  for (const TrafficClass& c : s.classes) ps.push_back(c.priority);
  std::sort(ps.begin(), ps.end(), std::greater<>());
  ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
  config::Json ceilings = config::Json::object();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    ceilings[std::to_string(ps[i])] = i == 0 ? 1.0 : i + 1 == ps.size() ? s.minCeiling : 0.9;
  }
  return plugin("priority-holdback-policy", {{"strategy", "static"}, {"ceilings", ceilings}});
}

// Reservation sized from measured demand: minCeiling from the scenario, one request
// of reserve at least, demand decaying over 1.5 s, the library's hold of the reserve
// (docs/simulation.md describes the arms, docs/results/ has their results). `extra` is merged into
// the parameters.
config::Json reservation(const Scenario& s, double epsilon, config::Json extra = nullptr) {
  config::Json p = {{"epsilon", epsilon},
                    {"minCeiling", s.minCeiling},
                    {"minReserve", 1.0},
                    {"decayTime", "1500ms"}};
  if (!extra.is_null()) p.merge_patch(extra);
  return plugin("reservation-holdback-policy", std::move(p));
}

// reservation+evict's idle reserve: an eighth of the pool's slots, at least one request.
double idleReserve(const PoolSpec& pool) {
  return std::max(1.0, std::round(double(pool.totalSlots()) / 8.0));
}

// reservation+evict's policy: the idle reserve (and no hold: noHold); `extra` is merged into the
// parameters.
config::Json restoringReservation(const Scenario& s, config::Json extra = nullptr) {
  config::Json p = {{"minReserve", idleReserve(s.pool)}};
  if (!extra.is_null()) p.merge_patch(extra);
  return reservation(s, 0.01, std::move(p));
}

// Restoration repairs the reserve, so the policy does not hold it up (a file's default when
// restoration is on; the simulator builds its arms from the options and says so).
void noHold(const Scenario&, ReservationOptions& o) {
  o.holdReserve = false;
}

// recommended's policy: reservation+evict's counted in room (capacityModel endpoints), with a
// demand estimate that sees a burst within 150 ms (riseTime) but not the arrivals' noise
// (riseSignificance 1.5) and forgets it within 1 s (decayTime), epsilon 2 %, an idle reserve of a
// tenth of the pool's slots (6 of 64), and (recommendedSwitches) neither hold nor protective
// start: restoration covers both; the faster rise lets restoration start on a burst's first
// arrivals, so the idle reserve covers a shorter lead time (docs/guide/policies.md, "The
// recommended configuration").
config::Json recommendedReservation(const Scenario& s) {
  const auto slots = double(s.pool.totalSlots());
  return restoringReservation(s, {{"capacityModel", "endpoints"},
                                  {"riseTime", "150ms"},
                                  {"riseSignificance", 1.5},
                                  {"decayTime", "1000ms"},
                                  {"epsilon", 0.02},
                                  {"minReserve", std::max(1.0, std::round(slots / 10.0))}});
}

void recommendedSwitches(const Scenario&, ReservationOptions& o) {
  o.holdReserve = false;
  o.protectiveStart = false;
}

// The DAGOR-style trim: when the highest class's p95 queue wait exceeds 50 ms its reserve grows
// 1.5x every 500 ms, else shrinks by 0.5 request; the other classes have a 10 s target (in
// effect none: their wait is what the holdback costs them).
void feedback(const Scenario& s, ReservationOptions& o) {
  Priority top = s.classes.empty() ? 0 : s.classes.front().priority;
  for (const TrafficClass& c : s.classes) top = std::max(top, c.priority);
  o.feedback = {.enabled = true,
                .targetWait = std::chrono::seconds(10),
                .targets = {{.priority = top, .wait = std::chrono::milliseconds(50)}},
                .increase = 1.5,
                .decrease = 0.5,
                .interval = std::chrono::milliseconds(500)};
}

// engine-headroom's policy: the lowest class at 1 / (1 + h), every other class at 1.0.
config::Json headroomMap(const Scenario& s, double h) {
  Priority lowest = s.classes.empty() ? 0 : s.classes.front().priority;
  for (const TrafficClass& c : s.classes) lowest = std::min(lowest, c.priority);
  config::Json ceilings = config::Json::object();
  for (const TrafficClass& c : s.classes) {
    ceilings[std::to_string(c.priority)] = c.priority == lowest ? 1.0 / (1.0 + h) : 1.0;
  }
  return plugin("priority-holdback-policy", {{"strategy", "static"}, {"ceilings", ceilings}});
}

config::Json staticOne(const Scenario&) {
  return plugin("static-usage-limit-policy", {{"threshold", 1.0}});
}

}  // namespace

std::vector<Arm> allArms() {
  using S = const Scenario&;
  std::vector<Arm> arms = {
      {.name = "none",
       .description = "no flow control: every arrival is routed at once",
       .flowControl = false},
      {.name = "static-1.0",
       .description = "the uniform static policy (the reference's default)",
       .policy = staticOne},
      {.name = "stepwise",
       .description = "stepwise-spread holdback down to minCeiling",
       .policy = [](S s) { return holdback("stepwise-spread", s); }},
      {.name = "linear",
       .description = "linear-proportional holdback down to minCeiling",
       .policy = [](S s) { return holdback("linear-proportional", s); }},
      {.name = "sigmoid",
       .description = "sigmoid-smoothed holdback (rank domain) down to minCeiling",
       .policy = [](S s) { return holdback("sigmoid-smoothed", s); }},
      {.name = "static-map",
       .description = "static ceilings: highest class 1.0, lowest minCeiling, others 0.9",
       .policy = staticMap},
      {.name = "soft-reflective",
       .description = "soft reflective ceilings",
       .policy = [](S) { return plugin("soft-reflective-ceiling-policy"); }},
      {.name = "stepwise-active",
       .description = "stepwise over the priorities active within the last second",
       .policy = [](S s) { return holdback("stepwise-spread", s); },
       .priorityDomain = PriorityDomain::kActive},
      {.name = "reservation",
       .description = "reservation sized from measured demand (refill sizing), epsilon 1 %",
       .policy = [](S s) { return reservation(s, 0.01); }},
      {.name = "reservation-0.1%",
       .description = "reservation sized from measured demand (refill sizing), epsilon 0.1 %",
       .policy = [](S s) { return reservation(s, 0.001); }},
      {.name = "reservation-occupancy",
       .description = "reservation, occupancy sizing (the first version), epsilon 1 %, decay 5 s",
       .policy =
           [](S s) {
             return reservation(s, 0.01, {{"decayTime", "5s"}});
           },
       .reservationSwitches =
           [](S, ReservationOptions& o) { o.sizing = ReservationSizing::kOccupancy; }},
      {.name = "feedback",
       .description = "feedback trim alone (DAGOR-style anchor): no demand sizing, minReserve 1",
       .policy = [](S s) { return reservation(s, 0.01); },
       .reservationSwitches =
           [](S s, ReservationOptions& o) {
             feedback(s, o);
             o.poissonSizing = false;
           }},
      {.name = "reservation+feedback",
       .description = "reservation (epsilon 1 %) with the feedback trim",
       .policy = [](S s) { return reservation(s, 0.01); },
       .reservationSwitches = feedback},
      // In-flight eviction: the arm's policy plus the controller's eviction.
      {.name = "static-1.0+evict",
       .description = "static-1.0 with in-flight eviction (upstream's recommended setup)",
       .policy = staticOne,
       .eviction = true},
      {.name = "stepwise+evict",
       .description = "stepwise-spread holdback with in-flight eviction",
       .policy = [](S s) { return holdback("stepwise-spread", s); },
       .eviction = true},
      // Restoration repairs a dip of the reserve within a revocation's lead time, so the policy's
      // hold (which keeps a reserve up for a batch holding time after every dip, for want of any
      // other way back) is off here: docs/guide/eviction.md, "Restoration replaces the hold". What
      // restoration cannot cover is a burst's first lead time, so the idle reserve is sized for
      // that instead: an eighth of the pool's slots (8 of the built-in scenarios' 64;
      // docs/guide/eviction.md, "The idle reserve covers the first lead time").
      {.name = "reservation+evict",
       .description = "reservation (epsilon 1 %, no hold, minReserve an eighth of the pool's "
                      "slots) with in-flight eviction that restores its reserve before a block "
                      "(no head-of-line trigger)",
       .policy = [](S s) { return restoringReservation(s); },
       .eviction = true,
       .revokeOnBlock = false,
       .restoreReserve = true,
       .reservationSwitches = noHold},
      // The library's recommended configuration for "protect interactive, keep batch" (the
      // file examples/configs/recommended.yaml, docs/guide/policies.md): reservation+evict with the
      // reserve counted in the protected requests' footprints where they fit
      // (capacityModel: endpoints), fit-first routing, and a concurrency detector that counts
      // KV tokens too (hybrid) since the pool's KV capacity is known.
      {.name = "recommended",
       .description = "reservation+evict with the reserve counted in protected requests' "
                      "footprints that fit endpoint by endpoint (slots and KV tokens), fit-first "
                      "routing, hybrid concurrency",
       .policy = [](S s) { return recommendedReservation(s); },
       .eviction = true,
       .revokeOnBlock = false,
       .restoreReserve = true,
       .restoreEpsilon = 0.02,
       .fitFirst = true,
       .hybridConcurrency = true,
       .reservationSwitches = recommendedSwitches},
      {.name = "reservation+evict-hol",
       .description = "reservation (epsilon 1 %) with in-flight eviction at a head-of-line block "
                      "(upstream's trigger)",
       .policy = [](S s) { return reservation(s, 0.01); },
       .eviction = true},
  };
  return arms;
}

std::vector<Arm> optInArms() {
  std::vector<Arm> arms = {{.name = std::string(kOracleArm),
                            .description =
                                "simulator only: knows the top class's future arrivals and "
                                "dispatches lower classes only into capacity those arrivals do "
                                "not need before the request is expected to finish; no eviction",
                            .flowControl = false,
                            .oracle = true}};
  // The same gateways in front of servers that schedule by the priority the gateway sends
  // (flowControl.enginePriority): "+engine" preempts (pool.engineScheduling priority-preempt),
  // "+engine-queue" orders the servers' queues only (priority).
  std::vector<Arm> base = allArms();
  auto variant = [&](std::string_view name, std::string_view suffix, EngineScheduling mode,
                     std::string_view what) {
    for (const Arm& b : base) {
      if (b.name != name) continue;
      Arm a = b;
      a.name = std::string(name) + std::string(suffix);
      a.description = std::string(what) + "; " + b.description;
      a.engineScheduling = mode;
      arms.push_back(std::move(a));
    }
  };
  constexpr std::string_view kPreempt =
      "servers preempt the lowest priority running request for a higher priority one";
  constexpr std::string_view kQueue = "servers order their queue by priority, no preemption";
  variant("none", "+engine", EngineScheduling::kPriorityPreempt, kPreempt);
  variant("static-1.0", "+engine", EngineScheduling::kPriorityPreempt, kPreempt);
  variant(kRecommendedArm, "+engine", EngineScheduling::kPriorityPreempt, kPreempt);
  variant(kRecommendedArm, "-noevict+engine", EngineScheduling::kPriorityPreempt, kPreempt);
  arms.back().eviction = false;  // recommended's policy and routing, the engine preempts instead
  arms.back().restoreReserve = false;
  arms.back().description += " (no in-flight eviction)";
  // recommended's policy and routing with eviction at a head-of-line block instead of reserve
  // restoration: eviction only when a request actually waits (docs/guide/traces.md, "Why the
  // recommended arm stays below the oracle").
  auto recommendedVariant = [&](std::string_view suffix, std::string_view what) -> Arm& {
    auto b = std::find_if(base.begin(), base.end(),
                          [](const Arm& a) { return a.name == kRecommendedArm; });
    Arm a = *b;
    a.name = std::string(kRecommendedArm) + std::string(suffix);
    a.description = std::string(what);
    a.revokeOnBlock = true;
    arms.push_back(std::move(a));
    return arms.back();
  };
  recommendedVariant("-hol",
                     "recommended with in-flight eviction at a head-of-line block (upstream's "
                     "trigger) instead of reserve restoration")
      .restoreReserve = false;
  // recommended with both triggers: reserve restoration only in a burst of the protected demand,
  // the head-of-line block of the top band at other times (ReserveRestoreOptions::
  // burstSignificance; docs/guide/traces.md, "The burst trigger").
  recommendedVariant("-rise",
                     "recommended with reserve restoration only in a burst of the protected demand "
                     "(burstSignificance 3) and in-flight eviction at the top band's head-of-line "
                     "block")
      .restoreBurstSignificance = 3.0;
  // holdback-gateway's built-in configuration (examples/gateway/gateway_http.hpp,
  // docs/guide/gateway.md "The default configuration"): the recommended policy sized for small
  // pools (no floor, a fixed reserve of one request, no Poisson sizing), restoration at the
  // policy's epsilon, fit-first routing, a utilization detector without the slot term and with
  // the mean aggregation; with restoration a file neither holds the reserve nor starts
  // protective.
  arms.push_back({.name = "gateway-default",
                  .description = "holdback-gateway's built-in configuration (reservation with "
                                 "minCeiling 0, minReserve 1, no Poisson sizing, capacity counted "
                                 "per endpoint; reserve restoration; fit-first routing)",
                  .policy =
                      [](const Scenario& s) {
                        return reservation(s, 0.01,
                                           {{"minCeiling", 0.0},
                                            {"minReserve", 1.0},
                                            {"poissonSizing", false},
                                            {"capacityModel", "endpoints"}});
                      },
                  .eviction = true,
                  .revokeOnBlock = false,
                  .restoreReserve = true,
                  .fitFirst = true,
                  .noSlotTerm = true,
                  .aggregation = "mean",
                  .reservationSwitches = recommendedSwitches});
  variant("none", "+engine-queue", EngineScheduling::kPriority, kQueue);
  variant("static-1.0", "+engine-queue", EngineScheduling::kPriority, kQueue);
  arms.push_back({.name = "engine-headroom",
                  .description = "servers that preempt by priority; the concurrency detector "
                                 "counts twice the pool (hybrid), the lowest class's ceiling is "
                                 "0.5 (it fills the pool), the others' 1.0 (they go on top)",
                  .policy = [](const Scenario& s) { return headroomMap(s, 1.0); },
                  .engineScheduling = EngineScheduling::kPriorityPreempt,
                  .protectedHeadroom = 1.0});
  for (const std::string_view name : {"none+engine", "engine-headroom"}) {  // routed by priority
    for (const Arm& b : std::vector<Arm>(arms)) {
      if (b.name != name) continue;
      Arm a = b;
      a.name = std::string(name) + "-routed";
      a.description += "; routed to the endpoint with the fewest requests of its priority or above";
      a.priorityRouting = true;
      arms.push_back(std::move(a));
    }
  }
  return arms;
}

void applyRestorationOverrides(const Scenario& s, const Arm& arm, EvictionOptions& e) {
  if (!arm.restoreReserve) return;
  auto pick = [](double scenario, double own) { return scenario >= 0.0 ? scenario : own; };
  ReserveRestoreOptions& rr = e.restoreReserve;
  if (s.restoreRevokeOnBlock >= 0) e.revokeOnBlock = s.restoreRevokeOnBlock == 1;
  rr.burstSignificance = pick(s.restoreBurstSignificance, arm.restoreBurstSignificance);
  rr.evictionBudget = pick(s.restoreEvictionBudget, arm.evictionBudget);
  rr.evictionBurst = pick(s.restoreEvictionBurst, arm.evictionBurst);
  rr.wasteBudget = pick(s.restoreWasteBudget, arm.wasteBudget);
  rr.wasteBurst = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(pick(s.restoreWasteBurstSeconds, arm.wasteBurstSeconds)));
}

bool findArm(std::string_view name, Arm& out) {
  for (std::vector<Arm> arms : {allArms(), optInArms()}) {
    for (Arm& a : arms) {
      if (a.name == name) {
        out = std::move(a);
        return true;
      }
    }
  }
  return false;
}

std::string armNames() {
  std::string out;
  for (const std::vector<Arm>& arms : {allArms(), optInArms()}) {
    for (const Arm& a : arms) out += (out.empty() ? "" : ", ") + a.name;
  }
  return out;
}

Result<std::shared_ptr<UsageLimitPolicy>> makePolicy(const Scenario& scenario, const Arm& arm) {
  if (!arm.flowControl || !arm.policy) {
    return Result<std::shared_ptr<UsageLimitPolicy>>(nullptr, Diagnostics{});
  }
  static const config::PolicyRegistry registry = config::builtinPolicyRegistry();
  const config::Json document = arm.policy(scenario);
  if (!arm.reservationSwitches) return config::loadUsageLimitPolicy(document, registry);
  Diagnostics diagnostics;
  auto options =
      config::parseReservationOptions(&document.at("parameters"), "/parameters", diagnostics);
  if (!options) return Result<std::shared_ptr<UsageLimitPolicy>>::failure(std::move(diagnostics));
  arm.reservationSwitches(scenario, *options);
  auto made = ReservationPolicy::create(std::move(*options));
  if (!made) return Result<std::shared_ptr<UsageLimitPolicy>>::failure(made.diagnostics());
  return Result<std::shared_ptr<UsageLimitPolicy>>(
      std::shared_ptr<UsageLimitPolicy>(std::move(made).value()), std::move(diagnostics));
}

Result<std::shared_ptr<SaturationDetector>> makeDetector(const Scenario& scenario, const Arm& arm) {
  const bool headroom = arm.protectedHeadroom > 0.0;
  if (scenario.detector == DetectorKind::kUtilization &&
      (arm.noSlotTerm || !arm.aggregation.empty())) {
    Scenario s = scenario;
    if (arm.noSlotTerm) s.pool.slotTerm = false;
    if (!arm.aggregation.empty()) s.pool.aggregation = arm.aggregation;
    return makeDetector(s);
  }
  if ((!arm.hybridConcurrency && !headroom) || scenario.detector != DetectorKind::kConcurrency) {
    return makeDetector(scenario);
  }
  Scenario s = scenario;
  s.pool.concurrencyMode = CountedResource::kHybrid;
  if (headroom) {  // (1 + h) x the pool's slots and KV tokens
    const double scale = 1.0 + arm.protectedHeadroom;
    s.pool.slots = static_cast<int>(std::lround(s.pool.slots * scale));
    s.pool.kvCapacityTokens =
        static_cast<std::int64_t>(std::llround(double(s.pool.kvCapacityTokens) * scale));
  }
  return makeDetector(s);
}

config::Json detectorDocument(const Scenario& s) {
  if (s.detector == DetectorKind::kConcurrency) {
    config::Json parameters = {{"maxConcurrency", s.pool.slots}};
    if (s.pool.concurrencyMode != CountedResource::kRequests) {
      parameters["concurrencyMode"] = std::string(toString(s.pool.concurrencyMode));
      parameters["maxTokenConcurrency"] = s.pool.kvCapacityTokens;
    }
    // Mixed pools: each endpoint's own slots and KV cache (the simulated host fills them).
    if (!s.pool.groups.empty()) parameters["endpointCapacity"] = true;
    return plugin("concurrency-detector", std::move(parameters));
  }
  // Telemetry older than two scrapes is stale.
  const auto staleNs = 2 * std::llround(s.pool.scrapeIntervalMs * 1e6);
  config::Json parameters = {{"metricsStalenessThreshold", std::to_string(staleNs) + "ns"}};
  if (s.pool.slotTerm) parameters["maxRunningRequests"] = s.pool.slots;  // the slot term
  // Mixed pools: how endpoints of different sizes weigh (each endpoint's own slots reach the
  // slot term through Endpoint::maxRunningRequests).
  parameters["aggregation"] = s.pool.aggregation;
  return plugin("utilization-detector", std::move(parameters));
}

Result<std::shared_ptr<SaturationDetector>> makeDetector(const Scenario& s) {
  static const config::DetectorRegistry registry = config::builtinDetectorRegistry();
  // Replicas that share nothing cannot take turns past the KV threshold (with a share the
  // controller does: flow/pool_pressure.hpp): a request must fit below it whole (a file gets
  // this from dispatchLedger.replicas > 1: config/detail/derived_defaults.hpp).
  const bool unshared = s.pool.gatewayReplicas > 1 && !(s.pool.replicaSyncIntervalMs > 0.0);
  if (s.detector == DetectorKind::kConcurrency || !unshared) {
    return config::loadSaturationDetector(detectorDocument(s), registry);
  }
  using Out = Result<std::shared_ptr<SaturationDetector>>;
  const config::Json document = detectorDocument(s);
  Diagnostics diagnostics;
  auto options = config::parseUtilizationDetectorOptions(&document.at("parameters"), "/parameters",
                                                         diagnostics);
  if (!options) return Out::failure(std::move(diagnostics));
  options->kvStartPastThreshold = false;
  auto made = UtilizationDetector::create(std::move(*options));
  if (!made) return Out::failure(made.diagnostics());
  return Out(std::shared_ptr<SaturationDetector>(std::move(made).value()), std::move(diagnostics));
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
