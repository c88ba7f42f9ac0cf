// Expiry: the regime-aware sweep, TTL and deadline resolution, dead heads in the cycle.
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
// TTL expiry (§3.7)

TEST_F(FlowControllerTest, ExpireIsInclusiveAndRegimeAware) {
  auto o = options();
  o.defaultRequestTtl = 100ms;
  o.noEndpointRequestTtl = 2s;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  EXPECT_EQ(fc->expire(t0 + 99ms), 0u);
  EXPECT_EQ(fc->expire(t0 + 100ms), 1u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome, (Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired}));
  EXPECT_EQ(rec.all()[0].finalizedAt, t0 + 100ms);

  // Empty pool: the no-endpoint budget applies, charged from the regime change.
  fc->enqueue(request("b", 0, 2), t0 + 1s);
  pool->setSize(0);
  EXPECT_EQ(fc->expire(t0 + 1s + 500ms), 0u);  // regime empty since 1.5 s
  EXPECT_EQ(fc->expire(t0 + 3s + 499ms), 0u);
  EXPECT_EQ(fc->expire(t0 + 3s + 500ms), 1u);
  EXPECT_EQ(rec.all()[1].outcome,
            (Outcome{QueueOutcome::kEvictedNoEndpoints, OutcomeCause::kNoEndpoints}));
}

TEST_F(FlowControllerTest, TtlResolution) {
  {
    auto o = options();
    o.defaultRequestTtl = 5s;  // noEndpoint follows
    auto fc = make(std::move(o));
    fc->enqueue(request("a", 0), t0);
    pool->setSize(0);
    EXPECT_EQ(fc->expire(t0 + 4s), 0u);
    EXPECT_EQ(fc->expire(t0 + 9s), 1u);
    pool->setSize(1);
  }
  {
    auto o = options();
    o.defaultRequestTtl = 0s;  // never expire
    auto fc = make(std::move(o));
    fc->enqueue(request("a", 0), t0);
    EXPECT_EQ(fc->expire(t0 + 100h), 0u);
  }
  {
    auto fc = make(options());  // unset: 60 s
    fc->enqueue(request("a", 0), t0);
    EXPECT_EQ(fc->expire(t0 + 59s), 0u);
    EXPECT_EQ(fc->expire(t0 + 60s), 1u);
  }
}

TEST_F(FlowControllerTest, PerRequestTtlAndDeadline) {
  auto fc = make(options());
  auto r1 = request("a", 0, 1);
  r1.ttl = 10ms;
  fc->enqueue(std::move(r1), t0);
  auto r2 = request("a", 0, 2);
  r2.deadline = t0 + 20ms;
  fc->enqueue(std::move(r2), t0);
  pool->setSize(0);  // the caller deadline is hard, whatever the regime
  EXPECT_EQ(fc->expire(t0 + 20ms), 1u);
  EXPECT_EQ(rec.all()[0].payload, 2);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedTtl);
  auto r3 = request("a", 0, 3);
  r3.deadline = t0;  // already passed
  fc->enqueue(std::move(r3), t0 + 1ms);
  EXPECT_EQ(rec.all()[1].outcome,
            (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kTtlExpired}));
}

TEST_F(FlowControllerTest, FarDeadlineWithNegativeClockIsKept) {
  auto fc = make(options());
  auto r = request("a", 0, 1);
  r.deadline = TimePoint::max();
  const TimePoint early = TimePoint{} - 100h;  // any epoch works
  fc->enqueue(std::move(r), early);
  EXPECT_EQ(rec.size(), 0u);
  EXPECT_EQ(fc->expire(early + 59s), 0u);  // the 60 s default TTL still applies
  EXPECT_EQ(fc->expire(early + 60s), 1u);
}

TEST_F(FlowControllerTest, DeadHeadIsEvictedAndDoesNotCostTheDispatch) {
  auto o = options();
  o.defaultRequestTtl = 100ms;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  fc->enqueue(request("a", 0, 2), t0 + 50ms);
  const auto r = fc->dispatchCycle(t0 + 120ms);
  EXPECT_EQ(r.kind, Kind::kDispatched);
  EXPECT_EQ(r.evicted, 1u);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedTtl);
  EXPECT_EQ(rec.all()[1].payload, 2);
  EXPECT_TRUE(rec.all()[1].outcome.dispatched());
}

}  // namespace
}  // namespace holdback
