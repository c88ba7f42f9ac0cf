// The fixture and helpers shared by the FlowController unit tests (tests/flow/*_test.cpp): a
// controller over the fakes of flow_test_support.hpp, with time driven explicitly (no sleeps).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <utility>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

// In the ABI namespace like the library's holdback::testing (holdback/abi.hpp), so that every
// test TU names the same types whatever it includes first.
namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

inline std::shared_ptr<UsageLimitPolicy> staticPolicy(double threshold = 1.0) {
  return std::move(StaticUsageLimitPolicy::create({.threshold = threshold})).value();
}

inline std::shared_ptr<UsageLimitPolicy> holdbackPolicy(double min, double max) {
  return std::move(PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kStepwiseSpread,
                                                   .minCeiling = min,
                                                   .maxCeiling = max}))
      .value();
}

class FlowControllerTest : public ::testing::Test {
 protected:
  FlowControllerOptions options(std::shared_ptr<UsageLimitPolicy> policy = staticPolicy()) {
    FlowControllerOptions o;
    o.policy = std::move(policy);
    o.detector = detector;
    o.endpoints = pool;
    o.onOutcome = rec.callback();
    o.clock = [this] { return now; };
    return o;
  }
  std::unique_ptr<FlowController> make(FlowControllerOptions o) {
    auto result = FlowController::create(std::move(o));
    EXPECT_TRUE(result.ok()) << result.diagnostics().toString();
    if (!result.ok()) return nullptr;
    return std::move(result).value();
  }

  std::shared_ptr<FakeDetector> detector = std::make_shared<FakeDetector>(0.0);
  std::shared_ptr<FakeEndpoints> pool = std::make_shared<FakeEndpoints>(2);
  Recorder rec;
  TimePoint t0 = TimePoint{} + std::chrono::hours(1);
  TimePoint now = t0;
};

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
