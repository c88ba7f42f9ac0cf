// The arms of `holdback simulate`: one row per gateway configuration compared on the same
// traffic. An arm is data: its policy is a plugin document built by the library's policy
// registry (config::loadUsageLimitPolicy), so a new arm is one row in allArms() (src/sim/arms.cpp)
// and a new policy type only needs its registry entry.
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include "holdback/abi.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/reservation.hpp"
#include "holdback/policy/usage_limit_policy.hpp"
#include "sim/scenario.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

struct Arm {
  std::string name;
  std::string description;
  // false: no FlowController, every arrival is routed at once (the arm "none").
  bool flowControl = true;
  // The usage limit policy as a plugin document ({"type": ..., "parameters": ...}) for the
  // scenario (static-map derives its ceilings from the scenario's priorities).
  std::function<config::Json(const Scenario&)> policy;
  PriorityDomain priorityDomain = PriorityDomain::kProvisioned;
  Duration activityWindow = std::chrono::seconds(1);
  // In-flight eviction: the controller revokes sheddable in-flight requests at a
  // head-of-line block (FlowControllerOptions::eviction, grace from deriveEvictionGrace, the
  // built-in filter and order); the simulated host aborts the victim on its server after
  // pool.revocationLatencyMs and its client retries it.
  bool eviction = false;
  std::size_t maxRevocationsPerDecision = 0;  // 0: the library's default (2)
  // Eviction triggers: upstream's head-of-line block (EvictionOptions::revokeOnBlock) and/or
  // reserve restoration (EvictionOptions::restoreReserve, epsilon restoreEpsilon, measured
  // lead time).
  bool revokeOnBlock = true;
  bool restoreReserve = false;
  double restoreEpsilon = 0.01;
  // Restoration only in a protected band's burst (ReserveRestoreOptions::burstSignificance).
  double restoreBurstSignificance = 0.0;
  // Restoration's budgets (ReserveRestoreOptions; 0 = none); a scenario's restoreEvictionBudget
  // and the others (holdback simulate --eviction-budget, --waste-budget) override them.
  double evictionBudget = 0.0;
  double evictionBurst = 4.0;
  double wasteBudget = 0.0;
  double wasteBurstSeconds = 30.0;
  // Routing: the EndpointPicker's fit-first rule (a dispatched request goes where it starts now:
  // a free slot and KV for its input, by the detector's room).
  bool fitFirst = false;
  // The concurrency detector of this arm counts tokens too (hybrid, maxTokenConcurrency = the
  // pool's kvCapacityTokens) whatever pool.concurrencyMode says.
  bool hybridConcurrency = false;
  // The utilization detector of this arm has no slot term whatever pool.slotTerm says: a host
  // that configures none (holdback-gateway's built-in configuration).
  bool noSlotTerm = false;
  // The utilization detector's aggregation for this arm; empty: pool.aggregation.
  std::string aggregation;
  // The reservation policy's experiment switches, which are no configuration keys (a file's
  // holdReserve, protectiveStart, poissonSizing, sizing and feedback are deprecated): applied to
  // the options parsed from `policy` (a reservation-holdback-policy document) before the policy
  // is built. Empty: the document's options as they are.
  std::function<void(const Scenario&, ReservationOptions&)> reservationSwitches;
  // The simulator-only arm `oracle` (no FlowController, flowControl false): it knows the future
  // arrivals of the top-priority classes and dispatches a lower-priority request only when the
  // pool can hold it and those arrivals until it is expected to finish (src/sim/oracle.cpp,
  // docs/simulation.md "The oracle arm"). A bound under the simulator's model, not a policy a
  // gateway could run.
  bool oracle = false;
  // The model servers' scheduling for this arm (pool.engineScheduling otherwise): the arms named
  // "...+engine" run on servers that preempt by priority, "...+engine-queue" on servers that only
  // order their queue by it (docs/results/engine-priority.md). Opt-in arms.
  std::optional<EngineScheduling> engineScheduling;
  // > 0: the concurrency detector counts (1 + h) x the pool's slots and KV tokens (hybrid), and
  // the policy gives the lowest class the ceiling 1 / (1 + h), every other class 1.0: the lowest
  // class fills the pool, the classes above it may add h x the pool on top, for which servers
  // that preempt make room (the arm engine-headroom). Single-group pools and the concurrency
  // detector only (with the utilization detector the arm is the static ceilings alone).
  double protectedHeadroom = 0.0;
  // Routing by priority (the arms "...-routed"; the file's flowControl.routing: priority): the
  // EndpointPicker's rule 4a, a dispatched request goes to the endpoint with the fewest requests
  // in flight of its priority or above per slot (the gateway's ledger counts them by priority),
  // then the fewest in flight.
  bool priorityRouting = false;
};

// The servers' scheduling in a run of `arm` on `scenario`.
[[nodiscard]] inline EngineScheduling engineSchedulingOf(const Scenario& scenario, const Arm& arm) {
  return arm.engineScheduling.value_or(scenario.pool.engineScheduling);
}

// none, static-1.0, stepwise, linear, sigmoid, static-map, soft-reflective, stepwise-active,
// reservation..., static-1.0+evict, stepwise+evict, reservation+evict (reserve restoration),
// recommended, reservation+evict-hol (upstream's trigger): the arms a run without --arms compares.
[[nodiscard]] std::vector<Arm> allArms();
// The arms that run only when named (--arms): the simulator-only `oracle`, recommended-hol
// (recommended with eviction at a head-of-line block instead of reserve restoration), and the arms
// on servers that schedule by priority (none+engine, static-1.0+engine, recommended+engine,
// recommended-noevict+engine, none+engine-queue, static-1.0+engine-queue, engine-headroom,
// none+engine-routed, engine-headroom-routed), and gateway-default (holdback-gateway's built-in
// configuration).
[[nodiscard]] std::vector<Arm> optInArms();
inline constexpr std::string_view kOracleArm = "oracle";
// The configuration the project recommends (examples/configs/recommended.yaml), the arm
// `holdback simulate` compares the others against; a run's --arms may leave it out (callers
// check).
inline constexpr std::string_view kRecommendedArm = "recommended";
// Looks an arm up by name (allArms() and optInArms()); false when unknown.
[[nodiscard]] bool findArm(std::string_view name, Arm& out);
// An arm with reserve restoration: its budgets and head-of-line trigger, or the scenario's where
// set (>= 0: --eviction-budget, --waste-budget, --revoke-on-block). Nothing for other arms.
void applyRestorationOverrides(const Scenario& s, const Arm& arm, EvictionOptions& e);
// "none, static-1.0, ..., oracle" (allArms() then optInArms(), for usage messages).
[[nodiscard]] std::string armNames();

// The arm's policy, built through the library's policy registry; null for an arm without flow
// control. Fails (with the registry's diagnostics) when the arm's document is invalid.
[[nodiscard]] Result<std::shared_ptr<UsageLimitPolicy>> makePolicy(const Scenario& scenario,
                                                                   const Arm& arm);
// The scenario's saturation detector, built through the library's detector registry: the
// concurrency detector with maxConcurrency = slots (and maxTokenConcurrency = kvCapacityTokens
// when it counts tokens), or the utilization detector with a staleness threshold of two scrape
// intervals.
[[nodiscard]] Result<std::shared_ptr<SaturationDetector>> makeDetector(const Scenario& scenario);
// The plugin document ({"type", "parameters"}) makeDetector builds the detector from.
[[nodiscard]] config::Json detectorDocument(const Scenario& scenario);
// The detector of `arm` on `scenario`: makeDetector, with the arm's overrides.
[[nodiscard]] Result<std::shared_ptr<SaturationDetector>> makeDetector(const Scenario& scenario,
                                                                       const Arm& arm);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
