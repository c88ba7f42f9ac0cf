// Pool-wide oldest first across gateway replicas: a replica publishes the head of each band with
// queued requests (ReplicaPort::restoreFigures) and, with the replica feed
// (ReplicaShare::pooledArrivals), leaves a dispatch to another replica whose head of the same band
// waited longer than ReplicaShare::headTolerance
// (FlowControllerStats::yieldedCycles, flow_control_yielded_cycles_total).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "flow_test_support.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/core/replica_share.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

double seconds(TimePoint t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

class ReplicaYieldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FlowControllerOptions o;
    o.policy = std::move(StaticUsageLimitPolicy::create({}).value());
    o.detector = std::move(UtilizationDetector::create({}).value());
    o.endpoints = std::make_shared<VectorEndpointSource>(
        VectorEndpointSource::named(2), VectorEndpointSource::Freshness::kStampNow);
    o.onOutcome = [this](Completion&& c) {
      if (c.outcome.dispatched()) ++dispatched;
    };
    fc = std::move(FlowController::create(std::move(o)).value());
  }

  // A share from one other replica whose head of band `priority` was enqueued at `at`.
  static ReplicaShare otherHead(Priority priority, TimePoint at) {
    ReplicaShare s;
    s.replicas = 2;
    s.rank = 1;
    s.pooledArrivals = true;  // the replica feed: the rule applies
    s.others.addHead(priority, seconds(at));
    return s;
  }

  const TimePoint t0 = TimePoint{} + std::chrono::hours(2);
  std::unique_ptr<FlowController> fc;
  int dispatched = 0;
};

TEST_F(ReplicaYieldTest, PublishesTheHeadOfEveryBandWithQueuedRequests) {
  EXPECT_EQ(fc->replicaPort().restoreFigures().headsUsed(), 0u);
  fc->enqueue(testing::request("a", -1), t0);
  fc->enqueue(testing::request("b", -1), t0 + 5ms);
  fc->enqueue(testing::request("c", 7), t0 + 9ms);
  const ReplicaRestoreFigures mine = fc->replicaPort().restoreFigures();
  EXPECT_EQ(mine.headsUsed(), 2u);
  ASSERT_TRUE(mine.headOf(-1).has_value());
  EXPECT_DOUBLE_EQ(*mine.headOf(-1), seconds(t0));  // the band's next, the oldest (FCFS)
  ASSERT_TRUE(mine.headOf(7).has_value());
  EXPECT_DOUBLE_EQ(*mine.headOf(7), seconds(t0 + 9ms));
}

TEST_F(ReplicaYieldTest, LeavesTheDispatchToAnOlderHeadOfTheSameBand) {
  fc->enqueue(testing::request("a", 0), t0);
  fc->replicaPort().setShare(otherHead(0, t0 - 1s));  // waited a second longer: theirs goes first
  const DispatchResult r = fc->dispatchCycle(t0 + 1ms);
  EXPECT_EQ(r.kind, DispatchResult::Kind::kGated);
  EXPECT_EQ(r.priority, 0);
  EXPECT_EQ(dispatched, 0);
  const FlowControllerStats stats = fc->stats();
  EXPECT_EQ(stats.yieldedCycles, 1u);
  EXPECT_NE(renderPrometheus(stats, "p")
                .find("holdback_flow_control_yielded_cycles_total{inference_pool=\"p\"} 1\n"),
            std::string::npos);

  // Within the tolerance (100 ms by default), of another band, or the yield turned off: this
  // replica dispatches.
  fc->replicaPort().setShare(otherHead(0, t0 - 50ms));
  EXPECT_EQ(fc->dispatchCycle(t0 + 2ms).kind, DispatchResult::Kind::kDispatched);
  fc->enqueue(testing::request("a", 0), t0 + 3ms);
  fc->replicaPort().setShare(otherHead(5, t0 - 1s));
  EXPECT_EQ(fc->dispatchCycle(t0 + 4ms).kind, DispatchResult::Kind::kDispatched);
  fc->enqueue(testing::request("a", 0), t0 + 5ms);
  ReplicaShare off = otherHead(0, t0 - 1s);
  off.headTolerance = Duration::max();
  fc->replicaPort().setShare(off);
  EXPECT_EQ(fc->dispatchCycle(t0 + 6ms).kind, DispatchResult::Kind::kDispatched);
  // Without the replica feed (the ledger's free room split shares the room instead): no yield.
  fc->enqueue(testing::request("a", 0), t0 + 6500us);
  ReplicaShare unfed = otherHead(0, t0 - 1s);
  unfed.pooledArrivals = false;
  fc->replicaPort().setShare(unfed);
  EXPECT_EQ(fc->dispatchCycle(t0 + 6700us).kind, DispatchResult::Kind::kDispatched);
  // No share (a lone gateway, or the store failed): no yield.
  fc->enqueue(testing::request("a", 0), t0 + 7ms);
  fc->replicaPort().setShare(otherHead(0, t0 - 1s));
  fc->replicaPort().setShare(std::nullopt);
  EXPECT_EQ(fc->dispatchCycle(t0 + 8ms).kind, DispatchResult::Kind::kDispatched);
  EXPECT_EQ(dispatched, 5);
  EXPECT_EQ(fc->stats().yieldedCycles, 1u);
}

TEST_F(ReplicaYieldTest, AYieldingBandHoldsTheBandsBelowIt) {
  // The room left to the other replica's older head is not taken by a lower band either.
  fc->enqueue(testing::request("hi", 10), t0);
  fc->enqueue(testing::request("lo", -1), t0);
  fc->replicaPort().setShare(otherHead(10, t0 - 1s));
  EXPECT_EQ(fc->dispatchCycle(t0 + 1ms).kind, DispatchResult::Kind::kGated);
  EXPECT_EQ(dispatched, 0);
  fc->replicaPort().setShare(otherHead(10, t0 + 1s));  // theirs is younger: ours go, highest first
  const DispatchResult r = fc->dispatchCycle(t0 + 2ms);
  EXPECT_EQ(r.kind, DispatchResult::Kind::kDispatched);
  EXPECT_EQ(r.priority, 10);
}

TEST_F(ReplicaYieldTest, NegativeToleranceCountsAsZero) {
  fc->enqueue(testing::request("a", 0), t0);
  ReplicaShare s = otherHead(0, t0);  // enqueued at the same instant: not older
  s.headTolerance = -5s;
  fc->replicaPort().setShare(s);
  EXPECT_EQ(fc->dispatchCycle(t0 + 1ms).kind, DispatchResult::Kind::kDispatched);
  fc->enqueue(testing::request("a", 0), t0 + 2ms);
  s = otherHead(0, t0 + 1ms);  // older by 1 ms, beyond a tolerance of 0
  s.headTolerance = -5s;
  fc->replicaPort().setShare(s);
  EXPECT_EQ(fc->dispatchCycle(t0 + 3ms).kind, DispatchResult::Kind::kGated);
}

// The port is a handle: a copy taken before the share reaches the same controller, and a port
// that outlives its controller (or a default one) publishes nothing and installs nothing.
TEST_F(ReplicaYieldTest, ThePortIsAHandleThatMayOutliveTheController) {
  const ReplicaPort port = fc->replicaPort();
  fc->enqueue(testing::request("a", 0), t0);
  EXPECT_EQ(port.restoreFigures().headsUsed(), 1u);
  fc->replicaPort().setShare(otherHead(0, t0 - 1s));
  EXPECT_EQ(fc->dispatchCycle(t0 + 1ms).kind, DispatchResult::Kind::kGated);  // port's share
  port.setShare(std::nullopt);
  EXPECT_EQ(fc->dispatchCycle(t0 + 2ms).kind, DispatchResult::Kind::kDispatched);
  fc->enqueue(testing::request("b", 0), t0 + 3ms);
  fc.reset();
  EXPECT_EQ(port.restoreFigures().headsUsed(), 0u);
  port.setShare(otherHead(0, t0));  // nothing to install it in: a no-op
  port.recordPeerArrival(0, 10);
  const ReplicaPort detached;
  EXPECT_EQ(detached.restoreFigures().headsUsed(), 0u);
  detached.setShare(std::nullopt);
}

}  // namespace
}  // namespace holdback
