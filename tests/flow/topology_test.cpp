// Shutdown, band provisioning, desired priorities and garbage collection.
#include "holdback/flow/flow_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FakeDetector;
using testing::FakeEndpoints;
using testing::FlowControllerTest;
using testing::holdbackPolicy;
using testing::Recorder;
using testing::request;
using testing::staticPolicy;
using Kind = DispatchResult::Kind;

// ---------------------------------------------------------------------------------------------
// Shutdown

TEST_F(FlowControllerTest, ShutdownFinalizesEverythingAndRejectsNewWork) {
  auto o = options();
  o.bands = {{.priority = 5}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 5, 1), t0);
  fc->enqueue(request("b", 0, 2), t0);
  fc->shutdown(t0 + 1s);
  ASSERT_EQ(rec.size(), 2u);
  for (const auto& r : rec.all()) {
    EXPECT_EQ(r.outcome, (Outcome{QueueOutcome::kEvictedOther, OutcomeCause::kNotRunning}));
    EXPECT_EQ(r.finalizedAt, t0 + 1s);
  }
  fc->enqueue(request("c", 5, 3), t0 + 2s);
  ASSERT_EQ(rec.size(), 3u);
  EXPECT_EQ(rec.all()[2].outcome,
            (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kNotRunning}));
  EXPECT_EQ(fc->dispatchCycle(t0 + 2s).kind, Kind::kStopped);
  fc->shutdown(t0 + 3s);  // idempotent
  EXPECT_EQ(rec.size(), 3u);
  EXPECT_TRUE(fc->stats().stopped);
}

// ---------------------------------------------------------------------------------------------
// Bands and provisioning (§3.10)

TEST_F(FlowControllerTest, PriorityZeroAlwaysExists) {
  auto o = options();
  o.bands = {{.priority = 3}};
  auto fc = make(std::move(o));
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{3, 0}));
}

TEST_F(FlowControllerTest, ProvisionOnFirstUseFromTemplates) {
  auto o = options();
  o.defaultBand.maxRequests = 7;
  o.defaultNegativeBand = BandTemplate{.maxRequests = 2};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 9), t0);
  fc->enqueue(request("a", -4), t0);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{9, 0, -4}));
  const auto stats = fc->stats();
  EXPECT_EQ(stats.bands[0].maxRequests, 7u);
  EXPECT_EQ(stats.bands[2].maxRequests, 2u);
}

TEST_F(FlowControllerTest, UnprovisionedPriorityFallsBackToBandZero) {
  auto o = options();
  o.provisionOnFirstUse = false;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 9, 1), t0);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{0}));
  fc->dispatchCycle(t0);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].requested, 9);
  EXPECT_EQ(rec.all()[0].band, 0);
}

TEST_F(FlowControllerTest, MaxBandsCapsProvisioning) {
  auto o = options();
  o.maxBands = 2;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 1), t0);
  fc->enqueue(request("a", 2), t0);  // cap reached: band 0
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{1, 0}));
}

TEST_F(FlowControllerTest, DesiredPrioritiesProvisionAndRemoveIdleBands) {
  auto o = options();
  o.bands = {{.priority = 50}};
  auto fc = make(std::move(o));
  const std::vector<Priority> want{10, 20};
  fc->setDesiredPriorities(want);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 20, 10, 0}));
  fc->enqueue(request("a", 20), t0);
  const std::vector<Priority> none;
  fc->setDesiredPriorities(none);  // 10 is idle and removed; 20 has work; 50, 0 are initial
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 20, 0}));
  fc->dispatchCycle(t0);
  fc->setDesiredPriorities(none);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 0}));
  // Counters of a removed band survive in the stats.
  const auto stats = fc->stats();
  ASSERT_EQ(stats.bands.size(), 4u);
  EXPECT_FALSE(stats.bands[1].provisioned);
  EXPECT_EQ(stats.bands[1].priority, 20);
  EXPECT_EQ(stats.bands[1].outcomes[0], 1u);
}

TEST_F(FlowControllerTest, ExpireCollectsIdleFlowsAndBands) {
  auto o = options();
  o.flowIdleTimeout = 1min;
  o.bandIdleTimeout = 2min;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 7), t0);
  fc->dispatchCycle(t0);
  EXPECT_EQ(fc->stats().bands[0].flows, 1u);
  fc->expire(t0 + 59s);
  EXPECT_EQ(fc->stats().bands[0].flows, 1u);
  fc->expire(t0 + 60s);
  EXPECT_EQ(fc->stats().bands[0].flows, 0u);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{7, 0}));
  fc->expire(t0 + 120s);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{0}));
}

}  // namespace
}  // namespace holdback
