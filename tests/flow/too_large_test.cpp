// A request whose KV footprint exceeds every endpoint's KV capacity can never start: the
// controller rejects it at enqueue (kRejectedOther / kTooLarge) once the pool's capacity is known,
// and evicts it (kEvictedOther / kTooLarge) when it was queued before (PoolPressure::
// largestKvCapacityTokens; flow/outcome.hpp maps both to HTTP 413).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/pool_pressure.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::request;

FlowRequest footprintRequest(const char* flow, Priority priority, std::int64_t tokens) {
  FlowRequest r = request(flow, priority);
  r.kvTokens = tokens;
  return r;
}

// Two idle endpoints of 16 slots; KV capacities 6000 and 10000 tokens.
std::shared_ptr<VectorEndpointSource> twoSizedEndpoints() {
  std::vector<Endpoint> pool = VectorEndpointSource::named(2);
  pool[0].kvCapacityTokens = 6000;
  pool[1].kvCapacityTokens = 10000;
  return std::make_shared<VectorEndpointSource>(std::move(pool));
}

std::unique_ptr<FlowController> controllerOverSized(std::shared_ptr<VectorEndpointSource> pool,
                                                    testing::Recorder& rec) {
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = 1.0})).value();
  o.detector = ConcurrencyDetector::create({.maxConcurrency = 16}).value();
  o.endpoints = std::move(pool);
  o.onOutcome = rec.callback();
  return FlowController::create(std::move(o)).value();
}

Outcome outcomeOf(const testing::Recorder& rec, RequestId id) {
  for (const auto& r : rec.all()) {
    if (r.id == id) return r.outcome;
  }
  ADD_FAILURE() << "no outcome for request " << id;
  return {};
}

TEST(FlowTooLargeTest, LargestCapacityIsKnownOnlyWhenEveryEndpointsIs) {
  std::vector<Endpoint> pool = VectorEndpointSource::named(3);
  EXPECT_EQ(largestKvCapacity({}), 0);
  EXPECT_EQ(largestKvCapacity(pool), 0);
  pool[0].kvCapacityTokens = 4000;
  pool[1].kvCapacityTokens = 9000;
  EXPECT_EQ(largestKvCapacity(pool), 0);  // endpoint 2 unknown: anything may fit there
  pool[2].kvCapacityTokens = -5;
  EXPECT_EQ(largestKvCapacity(pool), 0);  // negative reads as unknown
  pool[2].kvCapacityTokens = 7000;
  EXPECT_EQ(largestKvCapacity(pool), 9000);
}

TEST(FlowTooLargeTest, AFootprintNoEndpointHoldsIsRejectedOnceTheCapacityIsKnown) {
  testing::Recorder rec;
  auto fc = controllerOverSized(twoSizedEndpoints(), rec);
  TimePoint now{};
  (void)fc->dispatchCycle(now);  // the first sample learns the pool's capacity
  const RequestId huge = fc->enqueue(footprintRequest("rag", 0, 10001), now).id();
  ASSERT_EQ(rec.size(), 1u);  // answered at once, not queued
  EXPECT_EQ(outcomeOf(rec, huge), (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kTooLarge}));
  EXPECT_EQ(toHttp(outcomeOf(rec, huge)).status, 413);
  // Exactly the largest endpoint's capacity fits there; an undeclared footprint is never too large.
  const RequestId full = fc->enqueue(footprintRequest("rag", 0, 10000), now).id();
  const RequestId undeclared = fc->enqueue(footprintRequest("chat", 0, 0), now).id();
  const RequestId negative = fc->enqueue(footprintRequest("chat", 0, -7), now).id();
  for (int k = 0; k < 3; ++k) (void)fc->dispatchCycle(now += 1ms);
  EXPECT_TRUE(outcomeOf(rec, full).dispatched());
  EXPECT_TRUE(outcomeOf(rec, undeclared).dispatched());
  EXPECT_TRUE(outcomeOf(rec, negative).dispatched());
}

TEST(FlowTooLargeTest, ARequestQueuedBeforeTheCapacityWasKnownIsEvictedNotHeldForever) {
  testing::Recorder rec;
  auto fc = controllerOverSized(twoSizedEndpoints(), rec);
  TimePoint now{};
  // No sample yet: the capacity is unknown, so both are queued (no TTL: they would wait forever).
  const RequestId huge = fc->enqueue(footprintRequest("rag", 5, 1'000'000), now).id();
  const RequestId fits = fc->enqueue(footprintRequest("rag", 5, 500), now).id();
  EXPECT_EQ(rec.size(), 0u);
  const DispatchResult r = fc->dispatchCycle(now += 1ms);
  // The dead head does not cost the cycle its dispatch: the next request goes in the same cycle.
  EXPECT_EQ(r.evicted, 1u);
  EXPECT_EQ(r.id, fits);
  EXPECT_EQ(outcomeOf(rec, huge), (Outcome{QueueOutcome::kEvictedOther, OutcomeCause::kTooLarge}));
  EXPECT_TRUE(outcomeOf(rec, fits).dispatched());
}

TEST(FlowTooLargeTest, ExpireFinalizesTooLargeRequestsWhenTheCapacityShrinks) {
  auto pool = twoSizedEndpoints();
  testing::Recorder rec;
  auto fc = controllerOverSized(pool, rec);
  TimePoint now{};
  // Both endpoints full: the requests stay queued.
  pool->update([](std::vector<Endpoint>& eps) {
    for (Endpoint& e : eps) e.inFlightRequests = 16;
  });
  const RequestId big = fc->enqueue(footprintRequest("rag", 0, 8000), now).id();
  const RequestId small = fc->enqueue(footprintRequest("rag", 0, 4000), now).id();
  (void)fc->dispatchCycle(now += 1ms);
  EXPECT_EQ(rec.size(), 0u);
  // The 10000-token endpoint leaves the pool: 8000 tokens now fit nowhere, 4000 still do.
  pool->update([](std::vector<Endpoint>& eps) { eps.pop_back(); });
  PoolPressure pressure;
  pressure.largestKvCapacityTokens = largestKvCapacity(pool->snapshot());
  EXPECT_EQ(fc->expire(now += 1ms, pressure), 1u);
  EXPECT_EQ(outcomeOf(rec, big), (Outcome{QueueOutcome::kEvictedOther, OutcomeCause::kTooLarge}));
  EXPECT_EQ(rec.size(), 1u);
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
  (void)small;
}

TEST(FlowTooLargeTest, AnEndpointOfUnknownCapacityMakesNothingTooLarge) {
  std::vector<Endpoint> eps = VectorEndpointSource::named(2);
  eps[0].kvCapacityTokens = 6000;  // endpoint 1 unknown
  testing::Recorder rec;
  auto fc = controllerOverSized(std::make_shared<VectorEndpointSource>(std::move(eps)), rec);
  TimePoint now{};
  (void)fc->dispatchCycle(now);
  const RequestId id = fc->enqueue(footprintRequest("rag", 0, 50'000), now).id();
  (void)fc->dispatchCycle(now += 1ms);
  EXPECT_TRUE(outcomeOf(rec, id).dispatched());
}

}  // namespace
}  // namespace holdback
