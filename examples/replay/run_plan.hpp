// holdback-replay's plan of one run: what each class sends (taken from the simulator's own run of
// the scenario with the arm "none", so every arm plays the same traffic) and the gateway
// configuration of an arm. Plain functions of their arguments: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "holdback/config/document.hpp"
#include "sim/simulator.hpp"

namespace holdback::replay {

// What one run sends: per class, the open-loop arrivals, or the backlog's ramp and lengths.
struct PlannedRequest {
  std::int64_t input = 1;
  std::int64_t output = 1;
  double arrival = 0.0;  // seconds; for a backlog class only the first `backlog` are timed
};

struct ClassPlan {
  bool backlog = false;
  std::size_t backlogSize = 0;
  std::vector<PlannedRequest> requests;
  std::size_t next = 0;  // backlog: the next request to send
};

// Every class's requests of scenario `s` (only class `onlyClass` when it is >= 0), in arrival
// order.
std::vector<ClassPlan> planTraffic(const sim::Scenario& s, int onlyClass);

// The gateway configuration of an arm: the arm's policy document, the scenario's detector
// document (as the simulator builds them), the arm's eviction, one band per class priority.
config::Json gatewayConfig(const sim::Scenario& s, const sim::Arm& arm);

}  // namespace holdback::replay
