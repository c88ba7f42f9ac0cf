// Fairness (round robin, global strict) and ordering (FCFS, EDF) policies inside the controller.
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
// Fairness and ordering (§5)

TEST_F(FlowControllerTest, RoundRobinVector) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = roundRobinFairness()}};
  auto fc = make(std::move(o));
  for (int i = 0; i < 2; ++i) {
    fc->enqueue(request("flow3", 0), t0);
    fc->enqueue(request("flow1", 0), t0);
    fc->enqueue(request("flow2", 0), t0);
  }
  for (int i = 0; i < 6; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(rec.dispatchedFlows(),
            (std::vector<std::string>{"flow1", "flow2", "flow3", "flow1", "flow2", "flow3"}));
}

TEST_F(FlowControllerTest, RoundRobinSkipsEmptyAndFollowsMembership) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = roundRobinFairness()}};
  auto fc = make(std::move(o));
  fc->enqueue(request("flow1", 0), t0);
  fc->enqueue(request("flow2", 0), t0);
  fc->dispatchCycle(t0);  // flow1
  fc->enqueue(request("flow3", 0), t0);
  fc->enqueue(request("flow1", 0), t0);
  fc->dispatchCycle(t0);  // flow2
  fc->dispatchCycle(t0);  // flow3
  fc->dispatchCycle(t0);  // flow1 (wrap)
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"flow1", "flow2", "flow3", "flow1"}));
}

// A flow that empties stays in the band's by-id index until a pick passes it (lazy removal);
// neither that nor its collection while it is the round-robin cursor may change the order, the
// active-flow count or the per-flow gauges.
TEST_F(FlowControllerTest, RoundRobinOrderHoldsWhenEmptiedFlowsAreDroppedLazilyOrCollected) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = roundRobinFairness()}};
  o.flowIdleTimeout = 1min;
  o.defaultRequestTtl = 0s;  // b and c stay queued past the collection
  o.fairnessIdLabelLimit = 10;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("b", 0), t0);
  fc->enqueue(request("c", 0), t0);
  fc->dispatchCycle(t0);  // a: empty now, still in the by-id index, and the cursor
  auto stats = fc->stats();
  EXPECT_EQ(stats.bands[0].activeFlows, 2u);
  ASSERT_EQ(stats.bands[0].flowQueues.size(), 2u);
  EXPECT_EQ(stats.bands[0].flowQueues[0].flowId, "b");
  fc->expire(t0 + 2min);  // collects a (the cursor's flow), keeps b and c (queued)
  EXPECT_EQ(fc->stats().bands[0].flows, 2u);
  fc->enqueue(request("a", 0), t0 + 2min);  // a new flow "a"
  fc->dispatchCycle(t0 + 2min);             // after the cursor "a": b
  fc->enqueue(request("b", 0), t0 + 2min);  // b refills before the next pick
  fc->dispatchCycle(t0 + 2min);             // c
  fc->dispatchCycle(t0 + 2min);             // a (wrap)
  fc->dispatchCycle(t0 + 2min);             // b
  EXPECT_EQ(fc->dispatchCycle(t0 + 2min).kind, Kind::kNothingQueued);
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"a", "b", "c", "a", "b"}));
  stats = fc->stats();
  EXPECT_EQ(stats.bands[0].activeFlows, 0u);
  EXPECT_TRUE(stats.bands[0].flowQueues.empty());
}

TEST_F(FlowControllerTest, GlobalStrictIsOneLogicalFcfsQueue) {
  auto fc = make(options());
  fc->enqueue(request("x", 0, 1), t0 + 3ms);
  fc->enqueue(request("y", 0, 2), t0 + 1ms);
  fc->enqueue(request("x", 0, 3), t0 + 2ms);
  fc->enqueue(request("z", 0, 4), t0 + 1ms);  // same time as payload 2: sequence breaks the tie
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0 + 5ms);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{2, 4, 3, 1}));
}

TEST_F(FlowControllerTest, FcfsIsExactForIdenticalTimestamps) {
  auto fc = make(options());
  for (int i = 0; i < 50; ++i) fc->enqueue(request(i % 2 ? "a" : "b", 0, i), t0);
  for (int i = 0; i < 50; ++i) fc->dispatchCycle(t0);
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(rec.dispatchedPayloads(), expected);
}

TEST_F(FlowControllerTest, EdfOrdersByDeadline) {
  auto o = options();
  o.bands = {{.priority = 0, .ordering = edfOrdering()}};
  o.defaultRequestTtl = 0s;  // no TTL unless the request has one
  auto fc = make(std::move(o));
  auto none = request("f", 0, 1);
  auto late = request("f", 0, 2);
  late.ttl = 500ms;
  auto soon = request("f", 0, 3);
  soon.deadline = t0 + 100ms;
  auto tie = request("f", 0, 4);
  tie.ttl = 400ms;  // same deadline as `late` (t0+500ms), but enqueued later
  fc->enqueue(std::move(none), t0);
  fc->enqueue(std::move(late), t0);
  fc->enqueue(std::move(soon), t0);
  fc->enqueue(std::move(tie), t0 + 100ms);
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0 + 100ms - 1ns);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{3, 2, 4, 1}));
}

TEST(EdfOrderingTest, NoTtlSortsLastAndNeverOverflows) {
  QueuedRequestView a, b;
  a.enqueueTime = TimePoint::max() - 1ns;
  a.effectiveTtl = 1h;
  b.enqueueTime = TimePoint{};
  EXPECT_EQ(EdfOrderingPolicy::deadlineOf(a), TimePoint::max());
  EXPECT_EQ(EdfOrderingPolicy::deadlineOf(b), TimePoint::max());
  EdfOrderingPolicy edf;
  EXPECT_TRUE(edf.less(b, a));  // equal deadlines: earlier enqueue first
}

}  // namespace
}  // namespace holdback
