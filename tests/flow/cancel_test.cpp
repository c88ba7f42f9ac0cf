// Cancellation, tickets, and outcome callbacks that re-enter the controller.
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
// Cancellation

TEST_F(FlowControllerTest, CancelRemovesImmediatelyAndFreesCapacity) {
  auto o = options();
  o.bands = {{.priority = 0, .maxRequests = 1}};
  auto fc = make(std::move(o));
  Ticket t = fc->enqueue(request("a", 0, 1), t0);
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
  EXPECT_TRUE(t.cancel());
  EXPECT_FALSE(t.cancel());  // exactly once
  EXPECT_EQ(fc->stats().queuedRequests, 0u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome,
            (Outcome{QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled}));
  fc->enqueue(request("a", 0, 2), t0);  // capacity was freed at once
  EXPECT_EQ(rec.size(), 1u);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  EXPECT_EQ(rec.dispatchedPayloads(), std::vector<int>{2});
}

TEST_F(FlowControllerTest, CancelledRequestIsNeverDispatched) {
  auto fc = make(options());
  Ticket a = fc->enqueue(request("a", 0, 1), t0);
  Ticket b = fc->enqueue(request("a", 0, 2), t0);
  Ticket moved = std::move(a);
  EXPECT_TRUE(moved.cancel());
  EXPECT_EQ(fc->dispatchCycle(t0).id, b.id());
  EXPECT_FALSE(b.cancel());  // already dispatched
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kNothingQueued);
  EXPECT_EQ(rec.size(), 2u);
}

TEST_F(FlowControllerTest, MovedFromTicketIsEmpty) {
  auto fc = make(options());
  Ticket a = fc->enqueue(request("a", 0), t0);
  const RequestId id = a.id();
  Ticket b = std::move(a);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): the moved-from state
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(a.cancel());
  EXPECT_EQ(b.id(), id);
  Ticket c;
  c = std::move(b);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): the moved-from state
  EXPECT_FALSE(b.valid());
  EXPECT_TRUE(c.cancel());
}

TEST_F(FlowControllerTest, TicketOutlivingControllerIsHarmless) {
  Ticket t;
  {
    auto fc = make(options());
    t = fc->enqueue(request("a", 0), t0);
  }
  EXPECT_FALSE(t.cancel());
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedOther);
}

TEST_F(FlowControllerTest, CallbackMayReenterTheController) {
  FlowController* self = nullptr;
  auto o = options();
  int reentered = 0;
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched() && reentered++ == 0) {
      self->enqueue(request("again", 0, 99), c.finalizedAt);
      (void)self->stats();
    }
  };
  auto fc = make(std::move(o));
  self = fc.get();
  fc->enqueue(request("a", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
}

TEST_F(FlowControllerTest, CallbackMayCancelOthersAndShutDown) {
  FlowController* self = nullptr;
  RequestId other = 0;
  std::vector<Outcome> seen;
  auto o = options();
  o.onOutcome = [&](Completion&& c) {
    seen.push_back(c.outcome);
    if (c.outcome.dispatched()) {
      EXPECT_TRUE(self->cancel(other));  // delivered re-entrantly, before we return
      self->shutdown(c.finalizedAt);     // no lock is held: does not deadlock
    }
  };
  auto fc = make(std::move(o));
  self = fc.get();
  fc->enqueue(request("a", 0), t0);
  other = fc->enqueue(request("b", 0), t0).id();
  fc->enqueue(request("c", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0].dispatched());
  EXPECT_EQ(seen[1].kind, QueueOutcome::kEvictedCancelled);
  EXPECT_EQ(seen[2].kind, QueueOutcome::kEvictedOther);
  EXPECT_EQ(toString(fc->dispatchCycle(t0).kind), "stopped");
}

}  // namespace
}  // namespace holdback
