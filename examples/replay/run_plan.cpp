#include "run_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>

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

Json gatewayConfig(const Scenario& s, const Arm& arm) {
  Json policy = arm.policy(s);
  policy["name"] = "policy";
  Json detector = detectorDocument(s);
  detector["name"] = "detector";
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
    if (arm.restoreReserve) eviction["restoreReserve"] = {{"epsilon", arm.restoreEpsilon}};
    flow["eviction"] = eviction;
  }
  return {{"apiVersion", "llm-d.ai/v1alpha1"},
          {"kind", "EndpointPickerConfig"},
          {"featureGates", {"flowControl"}},
          {"plugins", {detector, policy}},
          {"flowControl", flow}};
}

}  // namespace holdback::replay
