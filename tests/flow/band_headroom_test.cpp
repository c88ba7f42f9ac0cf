// FlowController::bandHeadroom: the advisory room left in the band a priority is placed in.
#include <gtest/gtest.h>

#include <chrono>

#include "flow_controller_fixture.hpp"
#include "holdback/flow/flow_controller.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;

TEST_F(FlowControllerTest, BandHeadroomIsLimitMinusQueuedClampedAtZero) {
  detector->set(2.0);  // gated: everything stays queued
  auto o = options();
  o.bands = {{.priority = 10, .maxRequests = 3}};
  auto fc = make(std::move(o));
  auto room = fc->bandHeadroom(10);
  ASSERT_TRUE(room);
  EXPECT_EQ(room->bandPriority, 10);
  EXPECT_EQ(room->maxRequests, 3u);
  EXPECT_EQ(room->requests, 3u);
  fc->enqueue(request("a", 10), t0);
  fc->enqueue(request("b", 10), t0);
  EXPECT_EQ(fc->bandHeadroom(10)->requests, 1u);
  EXPECT_EQ(fc->bandHeadroom(10)->queuedRequests, 2u);
  fc->enqueue(request("c", 10), t0);
  fc->enqueue(request("d", 10), t0);  // rejected: the band is full
  EXPECT_EQ(fc->bandHeadroom(10)->requests, 0u);
  detector->set(0.0);
  fc->dispatchCycle(t0);
  EXPECT_EQ(fc->bandHeadroom(10)->requests, 1u);
}

TEST_F(FlowControllerTest, BandHeadroomReadsTheBandAPriorityLandsIn) {
  auto o = options();
  o.provisionOnFirstUse = false;  // unknown priorities go to band 0
  o.defaultBand.maxRequests = 7;
  auto fc = make(std::move(o));
  auto room = fc->bandHeadroom(42);
  ASSERT_TRUE(room);
  EXPECT_EQ(room->bandPriority, 0);
  EXPECT_EQ(room->requests, 7u);
  // With provisioning on, a priority without a band has nothing to read yet.
  auto p = make(options());
  EXPECT_FALSE(p->bandHeadroom(42));
  p->enqueue(request("a", 42), t0);
  ASSERT_TRUE(p->bandHeadroom(42));
  EXPECT_EQ(p->bandHeadroom(42)->bandPriority, 42);
}

}  // namespace
}  // namespace holdback
