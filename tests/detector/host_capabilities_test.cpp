// The capabilities a host reads through the interfaces instead of casting to a concrete type:
// the detector's staleness threshold, declared slots and per-endpoint score; the policy's fixed
// reserve; a fairness policy's served-work observer and state snapshot. Each default means
// "none", and the built-in type that has one reports its own parameter.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "holdback/detector/detectors.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

const TimePoint kCapabilitiesNow = TimePoint{} + std::chrono::hours(1);

TEST(HostCapabilitiesTest, DetectorsReportTheirOwnParametersOrNone) {
  auto u = UtilizationDetector::create({.queueDepthThreshold = 4,
                                        .metricsStalenessThreshold = std::chrono::milliseconds(300),
                                        .maxRunningRequests = 16});
  ASSERT_TRUE(u.ok());
  const SaturationDetector& util = *u.value();
  EXPECT_EQ(util.metricsStalenessThreshold(), std::chrono::milliseconds(300));
  EXPECT_EQ(util.configuredEndpointSlots(), 16);
  Endpoint e;
  e.updateTime = kCapabilitiesNow;
  e.waitingQueueSize = 8;  // 8 / 4 = 2.0, above the default cap of 1.0
  EXPECT_EQ(util.endpointScore(e, kCapabilitiesNow), std::optional<double>(2.0));
  e.updateTime.reset();  // no metrics: stale
  EXPECT_EQ(util.endpointScore(e, kCapabilitiesNow), std::nullopt);

  auto c = ConcurrencyDetector::create({.maxConcurrency = 8});
  ASSERT_TRUE(c.ok());
  const SaturationDetector& conc = *c.value();
  EXPECT_EQ(conc.metricsStalenessThreshold(), std::nullopt);
  EXPECT_EQ(conc.configuredEndpointSlots(), 0);
  EXPECT_EQ(conc.endpointScore(Endpoint{}, kCapabilitiesNow), std::nullopt);
}

TEST(HostCapabilitiesTest, OnlyTheReservationPolicyHasAFixedReserve) {
  auto r = ReservationPolicy::create({.minReserve = 2.5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<const UsageLimitPolicy&>(*r.value()).fixedReserve(), 2.5);
  auto s = StaticUsageLimitPolicy::create();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(static_cast<const UsageLimitPolicy&>(*s.value()).fixedReserve(), 0.0);
}

TEST(HostCapabilitiesTest, TheProgramAwarePolicyObservesServedWorkThroughTheInterface) {
  auto made = ProgramAwareFairnessPolicy::create();
  ASSERT_TRUE(made.ok());
  const std::shared_ptr<const ProgramAwareFairnessPolicy> concrete = std::move(made).value();
  const FairnessPolicy& p = *concrete;
  EXPECT_TRUE(p.observesServed());
  p.recordServed("a", 100, 50, kCapabilitiesNow, std::chrono::milliseconds(5));
  EXPECT_EQ(concrete->attainedService("a", kCapabilitiesNow),
            100 + ProgramAwareFairnessPolicy::kOutputTokenWeight * 50);
  EXPECT_EQ(p.dumpState(kCapabilitiesNow), concrete->dumpState(kCapabilitiesNow));
  EXPECT_FALSE(p.dumpState(kCapabilitiesNow).empty());

  const FairnessPolicy& strict = *globalStrictFairness();
  EXPECT_FALSE(strict.observesServed());
  strict.recordServed("a", 1, 1, kCapabilitiesNow, std::nullopt);  // ignored
  EXPECT_TRUE(strict.dumpState(kCapabilitiesNow).empty());
}

}  // namespace
}  // namespace holdback
