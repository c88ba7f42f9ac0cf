// A consumer of holdback: builds a policy, computes ceilings, prints them and the version.
#include <cstdio>
#include <vector>

#include "holdback/policy/policies.hpp"
#include "holdback/version.hpp"

int main() {
  auto made = holdback::PriorityHoldbackPolicy::create(
      {.strategy = holdback::HoldbackStrategy::kStepwiseSpread,
       .minCeiling = 0.4,
       .maxCeiling = 0.9});
  if (!made) return 1;
  const std::vector<holdback::Priority> priorities{100, 0, -10};
  std::vector<double> ceilings(priorities.size(), 1.0);
  made.value()->computeLimit(0.5, priorities, ceilings);
  std::printf("holdback %s: %.2f %.2f %.2f\n", holdback::kVersion, ceilings[0], ceilings[1],
              ceilings[2]);
  return ceilings[1] == 0.65 ? 0 : 1;
}
