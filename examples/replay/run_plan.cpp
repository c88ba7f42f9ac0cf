#include "run_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "holdback/core/text.hpp"
#include "sim/evaluate.hpp"

namespace holdback::replay {

using config::Json;
using namespace holdback::sim;

std::vector<ClassPlan> planTraffic(const Scenario& s, int onlyClass) {
  Arm none;
  (void)findArm("none", none);
  const ArmResult sim = runArm(s, none, RunOptions{.collectSeries = true, .onlyClass = onlyClass});
  std::vector<ClassPlan> plan(s.classes.size());
  for (std::size_t c = 0; c < s.classes.size(); ++c) {
    plan[c].backlog = s.classes[c].arrival.process == ArrivalProcess::kBacklog;
    plan[c].backlogSize = static_cast<std::size_t>(s.classes[c].arrival.backlog);
  }
  for (const RequestRecord& r : sim.requests) {
    if (r.retryOf >= 0 || std::isnan(r.arrival) || r.arrival >= s.durationSeconds) continue;
    plan[r.classIndex].requests.push_back(
        {.input = r.inputTokens, .output = r.outputTokens, .arrival = r.arrival});
  }
  for (ClassPlan& p : plan) {
    std::stable_sort(p.requests.begin(), p.requests.end(),
                     [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  }
  return plan;
}

namespace {

// An arm's reservation switches (Arm::reservationSwitches) as the file's deprecated keys, which
// the gateway still honours (with a warning each): the replay runs the arm as the simulator does.
void writeReservationSwitches(const Scenario& s, const Arm& arm, Json& parameters) {
  ReservationOptions o;
  arm.reservationSwitches(s, o);
  parameters["holdReserve"] = o.holdReserve;
  parameters["protectiveStart"] = o.protectiveStart;
  if (!o.poissonSizing) parameters["poissonSizing"] = false;
  if (o.sizing == ReservationSizing::kOccupancy) parameters["sizing"] = "occupancy";
  if (!o.feedback.enabled) return;
  Json targets = Json::object();
  for (const ReservationWaitTarget& t : o.feedback.targets) {
    targets[std::to_string(t.priority)] = formatDuration(t.wait);
  }
  parameters["feedback"] = {{"targetWait", formatDuration(o.feedback.targetWait)},
                            {"targets", targets},
                            {"increase", o.feedback.increase},
                            {"decrease", o.feedback.decrease},
                            {"maxExtra", o.feedback.maxExtra},
                            {"interval", formatDuration(o.feedback.interval)}};
}

}  // namespace

Json gatewayConfig(const Scenario& s, const Arm& arm) {
  Json policy = arm.policy(s);
  policy["name"] = "policy";
  if (arm.reservationSwitches) writeReservationSwitches(s, arm, policy["parameters"]);
  Json detector = detectorDocument(s);
  detector["name"] = "detector";
  // Replicas that share nothing: no start past the KV threshold (the simulator's makeDetector).
  if (detector["type"] == "utilization-detector" && s.pool.gatewayReplicas > 1 &&
      !(s.pool.replicaSyncIntervalMs > 0.0)) {
    detector["parameters"]["kvStartPastThreshold"] = false;
  }
  Json bands = Json::array();
  std::set<holdback::Priority> priorities;
  for (const TrafficClass& c : s.classes) priorities.insert(c.priority);
  for (auto it = priorities.rbegin(); it != priorities.rend(); ++it) {
    bands.push_back({{"priority", *it}});
  }
  Json flow = {{"usageLimitPolicyPluginRef", "policy"},
               {"saturationDetector", {{"pluginRef", "detector"}}},
               {"priorityBands", bands}};
  if (arm.eviction) {
    flow["enableEviction"] = true;
    Json eviction = {{"revokeOnBlock", arm.revokeOnBlock}};
    if (arm.restoreReserve) {
      Json restore = {{"epsilon", arm.restoreEpsilon}};
      if (arm.evictionBudget > 0.0) {  // the simulator's budgets, as the arm sets them
        restore["evictionBudget"] = arm.evictionBudget;
        restore["evictionBurst"] = arm.evictionBurst;
      }
      if (arm.wasteBudget > 0.0) {
        restore["wasteBudget"] = arm.wasteBudget;
        restore["wasteBurst"] = std::to_string(std::llround(arm.wasteBurstSeconds * 1000.0)) + "ms";
      }
      eviction["restoreReserve"] = restore;
    }
    flow["eviction"] = eviction;
  }
  return {{"apiVersion", "llm-d.ai/v1alpha1"},
          {"kind", "EndpointPickerConfig"},
          {"featureGates", {"flowControl"}},
          {"plugins", {detector, policy}},
          {"flowControl", flow}};
}

}  // namespace holdback::replay
