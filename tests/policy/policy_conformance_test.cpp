// The UsageLimitPolicy conformance suite, instantiated for every built-in policy and strategy.
#include "holdback/testing/usage_limit_policy_conformance.hpp"

#include "alloc_counter.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

using testing::PolicyFactory;
using testing::UsageLimitPolicyConformanceTest;

std::unique_ptr<UsageLimitPolicy> holdbackPolicy(PriorityHoldbackOptions options) {
  return std::move(PriorityHoldbackPolicy::create(std::move(options))).value();
}

const PolicyFactory kPolicyBuiltins[] = {
    {"StaticUsageLimitDefault", [] { return std::move(StaticUsageLimitPolicy::create()).value(); }},
    {"StaticUsageLimitHalf",
     [] { return std::move(StaticUsageLimitPolicy::create({.threshold = 0.5})).value(); }},
    {"StepwiseSpread",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.4});
     }},
    {"LinearProportional",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kLinearProportional,
                              .minCeiling = 0.2,
                              .maxCeiling = 0.9});
     }},
    {"SigmoidRank",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kSigmoidSmoothed, .minCeiling = 0.6});
     }},
    {"SigmoidValueSteep",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                              .minCeiling = 0.0,
                              .sigmoidSteepness = 100.0,
                              .sigmoidMidpoint = 1.0,
                              .sigmoidDomain = SigmoidDomain::kValue});
     }},
    {"SigmoidNearlyFlat",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                              .minCeiling = 0.1,
                              .sigmoidSteepness = 1e-300,
                              .sigmoidDomain = SigmoidDomain::kValue});
     }},
    {"StaticMap",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kStatic,
                              .ceilings = {{100, 1.0}, {20, 0.75}, {-1, 0.6}}});
     }},
    {"StaticMapWithDefault",
     [] {
       return holdbackPolicy({.strategy = HoldbackStrategy::kStatic,
                              .ceilings = {{100, 1.0}, {0, 0.3}},
                              .defaultCeiling = 0.9});
     }},
    {"SoftReflective", [] { return std::move(SoftReflectiveCeilingPolicy::create()).value(); }},
    {"ReservationDefault", [] { return std::move(ReservationPolicy::create({})).value(); }},
    {"ReservationBounded",
     [] {
       return std::move(ReservationPolicy::create({.epsilon = 0.001,
                                                   .epsilons = {{.priority = 0, .epsilon = 0.2}},
                                                   .minCeiling = 0.2,
                                                   .maxCeiling = 0.9,
                                                   .minReserve = 3.0,
                                                   .requestUnit = 0.01}))
           .value();
     }},
};

INSTANTIATE_TEST_SUITE_P(Builtins, UsageLimitPolicyConformanceTest,
                         ::testing::ValuesIn(kPolicyBuiltins), testing::PolicyFactoryName{});

class PolicyAllocationTest : public ::testing::TestWithParam<PolicyFactory> {};

TEST_P(PolicyAllocationTest, ComputeLimitDoesNotAllocate) {
  auto policy = GetParam().make();
  std::vector<Priority> priorities{1000, 100, 50, 20, 0, -1, -5, -100};
  std::vector<double> ceilings(priorities.size(), 1.0);
  testing::AllocationCounter counter;
  for (const double s : {0.0, 0.55, 0.7, 0.95, 1.0, 2.0}) {
    policy->computeLimit(s, priorities, ceilings);
  }
  EXPECT_EQ(counter.count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Builtins, PolicyAllocationTest, ::testing::ValuesIn(kPolicyBuiltins),
                         testing::PolicyFactoryName{});

}  // namespace
}  // namespace holdback
