// InFlightTracker: RAII handles, fill(), endpoint removal, and the reference §4.3 lifecycle
// vectors driven through the tracker and the concurrency detector.
#include "holdback/detector/in_flight_tracker.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

std::vector<Endpoint> pool(std::initializer_list<const char*> names) {
  std::vector<Endpoint> out;
  for (const char* n : names) {
    Endpoint e;
    e.name = n;
    e.inFlightRequests = 77;  // stale values that fill() must overwrite
    e.inFlightTokens = 77;
    out.push_back(e);
  }
  return out;
}

TEST(InFlightTrackerTest, HandleReleasesExactlyOnce) {
  InFlightTracker tracker;
  {
    InFlightHandle h = tracker.dispatch("a", 10);
    EXPECT_TRUE(h.active());
    EXPECT_EQ(tracker.load("a").requests, 1);
    EXPECT_EQ(tracker.load("a").tokens, 10);
    h.release();
    EXPECT_FALSE(h.active());
    h.release();  // a second release does nothing
    EXPECT_EQ(tracker.load("a").requests, 0);
    EXPECT_EQ(tracker.load("a").tokens, 0);
  }  // nor does the destructor of a released handle
  EXPECT_EQ(tracker.load("a").requests, 0);
}

TEST(InFlightTrackerTest, DestructorReleasesAForgottenHandle) {
  InFlightTracker tracker;
  {
    const InFlightHandle h = tracker.dispatch("a", 5);
    EXPECT_EQ(tracker.load("a").requests, 1);
  }
  EXPECT_EQ(tracker.load("a").requests, 0);
  EXPECT_EQ(tracker.load("a").tokens, 0);
}

TEST(InFlightTrackerTest, MovingTransfersTheClaim) {
  InFlightTracker tracker;
  InFlightHandle a = tracker.dispatch("x", 3);
  InFlightHandle b = std::move(a);
  EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(b.active());
  EXPECT_EQ(b.tokens(), 3);
  a.release();  // moved-from: nothing
  EXPECT_EQ(tracker.load("x").requests, 1);
  // Move-assigning over an active handle releases what it held.
  InFlightHandle c = tracker.dispatch("y", 4);
  c = std::move(b);
  EXPECT_EQ(tracker.load("y").requests, 0);
  EXPECT_EQ(tracker.load("x").requests, 1);
  c.release();
  EXPECT_EQ(tracker.load("x").requests, 0);
  std::vector<InFlightHandle> handles;
  // NOLINTNEXTLINE(performance-inefficient-vector-operation): the growth (moving handles) is tested
  for (int i = 0; i < 10; ++i) handles.push_back(tracker.dispatch("z", 1));
  EXPECT_EQ(tracker.load("z").requests, 10);
  handles.clear();
  EXPECT_EQ(tracker.load("z").requests, 0);
}

TEST(InFlightTrackerTest, ReleaseTokensEarlyKeepsTheRequest) {
  InFlightTracker tracker;
  InFlightHandle h = tracker.dispatch("a", 40);
  h.releaseTokens();  // first response chunk
  EXPECT_EQ(tracker.load("a").requests, 1);
  EXPECT_EQ(tracker.load("a").tokens, 0);
  EXPECT_EQ(h.tokens(), 0);
  h.releaseTokens();
  h.release();
  EXPECT_EQ(tracker.load("a").requests, 0);
  EXPECT_EQ(tracker.load("a").tokens, 0);
}

TEST(InFlightTrackerTest, NegativeTokensCountAsZero) {
  InFlightTracker tracker;
  const InFlightHandle h = tracker.dispatch("a", -50);
  EXPECT_EQ(h.tokens(), 0);
  EXPECT_EQ(tracker.load("a").tokens, 0);
  EXPECT_EQ(tracker.load("a").requests, 1);
}

TEST(InFlightTrackerTest, FillSetsCountsByNameAndZeroesUnknownEndpoints) {
  InFlightTracker tracker;
  const InFlightHandle a1 = tracker.dispatch("a", 10);
  const InFlightHandle a2 = tracker.dispatch("a", 20);
  const InFlightHandle c = tracker.dispatch("c", 1);
  auto endpoints = pool({"a", "b", "c"});
  tracker.fill(endpoints);
  EXPECT_EQ(endpoints[0].inFlightRequests, 2);
  EXPECT_EQ(endpoints[0].inFlightTokens, 30);
  EXPECT_EQ(endpoints[1].inFlightRequests, 0);
  EXPECT_EQ(endpoints[1].inFlightTokens, 0);
  EXPECT_EQ(endpoints[2].inFlightRequests, 1);
  EXPECT_EQ(endpoints[2].inFlightTokens, 1);
}

TEST(InFlightTrackerTest, RemovedEndpointReadsZeroAndOutstandingHandlesCannotUnderflow) {
  InFlightTracker tracker;
  InFlightHandle old = tracker.dispatch("a", 10);
  EXPECT_TRUE(tracker.removeEndpoint("a"));
  EXPECT_FALSE(tracker.removeEndpoint("a"));
  EXPECT_EQ(tracker.load("a").requests, 0);
  // The endpoint comes back; the old request finishes afterwards.
  const InFlightHandle fresh = tracker.dispatch("a", 5);
  old.release();
  EXPECT_EQ(tracker.load("a").requests, 1);
  EXPECT_EQ(tracker.load("a").tokens, 5);
}

TEST(InFlightTrackerTest, SteadyStateDoesNotAllocate) {
  InFlightTracker tracker;
  tracker.dispatch("a", 1).release();  // first request to "a" allocates its counters
  auto endpoints = pool({"a", "b"});
  testing::AllocationCounter counter;
  {
    InFlightHandle h = tracker.dispatch("a", 7);
    tracker.fill(endpoints);
    h.release();
  }
  EXPECT_EQ(counter.count(), 0u);
  EXPECT_EQ(endpoints[0].inFlightRequests, 1);
}

// ---- reference §4.3 lifecycle vectors -----------------------------------------------------

TEST(InFlightTrackerTest, ReferenceRequestLifecycle) {
  auto detector = std::move(ConcurrencyDetector::create({.maxConcurrency = 1})).value();
  InFlightTracker tracker;
  auto endpoints = pool({"a"});
  const auto saturation = [&] {
    tracker.fill(endpoints);
    return detector->saturation(endpoints, TimePoint{});
  };
  EXPECT_EQ(saturation(), 0.0);
  InFlightHandle h = tracker.dispatch("a");
  EXPECT_EQ(saturation(), 1.0);
  h.release();  // end of stream
  EXPECT_EQ(saturation(), 0.0);
  InFlightHandle h2 = tracker.dispatch("a");
  EXPECT_EQ(saturation(), 1.0);
  tracker.removeEndpoint("a");  // endpoint deleted
  EXPECT_EQ(saturation(), 0.0);
}

TEST(InFlightTrackerTest, ReferenceTokenLifecycle) {
  auto detector = std::move(ConcurrencyDetector::create(
                                {.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 100}))
                      .value();
  InFlightTracker tracker;
  auto endpoints = pool({"a"});
  const auto saturation = [&] {
    tracker.fill(endpoints);
    return detector->saturation(endpoints, TimePoint{});
  };
  InFlightHandle h = tracker.dispatch("a", 10);
  EXPECT_DOUBLE_EQ(saturation(), 0.1);
  h.release();
  EXPECT_EQ(saturation(), 0.0);
  InFlightHandle h2 = tracker.dispatch("a", 10);
  tracker.removeEndpoint("a");
  EXPECT_EQ(saturation(), 0.0);
  // Tokens mode with candidates {a, b}: 50 tokens on a -> 0.25.
  auto two = pool({"a", "b"});
  InFlightHandle h3 = tracker.dispatch("a", 50);
  tracker.fill(two);
  EXPECT_DOUBLE_EQ(detector->saturation(two, TimePoint{}), 0.25);
}

}  // namespace
}  // namespace holdback
