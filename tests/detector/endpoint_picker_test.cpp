// EndpointPicker (include/holdback/detector/endpoint_picker.hpp): the shared routing rule of the
// gateway and the simulator.
#include "holdback/detector/endpoint_picker.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

std::vector<Endpoint> pool(std::size_t n) {
  std::vector<Endpoint> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].name = "e" + std::to_string(i);
    out[i].updateTime = TimePoint{};
  }
  return out;
}

std::shared_ptr<ConcurrencyDetector> concurrency(std::int64_t max) {
  return std::move(ConcurrencyDetector::create({.maxConcurrency = max})).value();
}

TEST(EndpointPickerTest, EmptyPoolHasNoPick) {
  EndpointPicker picker;
  EXPECT_FALSE(picker.pick({}, *concurrency(4), TimePoint{}).has_value());
}

TEST(EndpointPickerTest, FewestInFlightThenSmallestWaitingQueue) {
  auto endpoints = pool(3);
  endpoints[0].inFlightRequests = 2;
  endpoints[1].inFlightRequests = 1;
  endpoints[2].inFlightRequests = 1;
  endpoints[1].waitingQueueSize = 3;
  endpoints[2].waitingQueueSize = 1;
  EndpointPicker picker(3);
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}), 2u);
}

TEST(EndpointPickerTest, PrefersEndpointsWhoseLastScrapeSucceeded) {
  auto endpoints = pool(2);
  endpoints[1].inFlightRequests = 5;  // busier, but the only one up
  const std::vector<std::uint8_t> up{0, 1};
  EndpointPicker picker;
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, up), 1u);
}

TEST(EndpointPickerTest, KeepsToTheDetectorsFilter) {
  auto endpoints = pool(3);
  endpoints[0].inFlightRequests = 4;  // full at maxConcurrency 4: filtered out
  endpoints[1].inFlightRequests = 3;
  endpoints[2].inFlightRequests = 3;
  endpoints[2].waitingQueueSize = 1;
  EndpointPicker picker;
  EXPECT_EQ(picker.pick(endpoints, *concurrency(4), TimePoint{}), 1u);
}

TEST(EndpointPickerTest, NothingPassesTheFilterEveryEndpointIsACandidate) {
  auto endpoints = pool(2);
  endpoints[0].inFlightRequests = 6;
  endpoints[1].inFlightRequests = 5;  // both over maxConcurrency 4
  EndpointPicker picker;
  EXPECT_EQ(picker.pick(endpoints, *concurrency(4), TimePoint{}), 1u);
}

// The defect this fixes: with equal endpoints every tie went to endpoint 0.
TEST(EndpointPickerTest, TiesRotateOverEqualEndpoints) {
  const auto endpoints = pool(4);
  EndpointPicker picker(4);
  std::vector<std::size_t> picks;
  for (int k = 0; k < 8; ++k) picks.push_back(*picker.pick(endpoints, *concurrency(100), {}));
  EXPECT_EQ(picks, (std::vector<std::size_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(EndpointPickerTest, DispatchingSpreadsLoadEvenly) {
  auto endpoints = pool(4);
  EndpointPicker picker(4);
  for (int k = 0; k < 40; ++k) {
    const std::size_t i = *picker.pick(endpoints, *concurrency(100), {});
    endpoints[i].inFlightRequests += 1;
  }
  for (const Endpoint& e : endpoints) EXPECT_EQ(e.inFlightRequests, 10) << e.name;
}

TEST(EndpointPickerTest, SameHistorySamePicks) {
  auto endpoints = pool(5);
  endpoints[3].waitingQueueSize = 2;
  EndpointPicker a(5);
  EndpointPicker b(5);
  for (int k = 0; k < 20; ++k) {
    EXPECT_EQ(a.pick(endpoints, *concurrency(100), {}), b.pick(endpoints, *concurrency(100), {}));
  }
}

TEST(EndpointPickerTest, NoAllocationInSteadyState) {
  const auto endpoints = pool(8);
  const auto detector = concurrency(100);
  EndpointPicker picker(8);
  testing::AllocationCounter counter;
  for (int k = 0; k < 100; ++k) (void)picker.pick(endpoints, *detector, TimePoint{});
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
