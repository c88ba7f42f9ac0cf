// EndpointPicker (include/holdback/detector/endpoint_picker.hpp): the shared routing rule of the
// gateway and the simulator.
#include "holdback/detector/endpoint_picker.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
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

// An unknown waiting queue (NaN: the scrape did not report it) comes after every known one at the
// same load, whatever the order of the endpoints (it used to be unordered, so the first offered
// won).
TEST(EndpointPickerTest, AnUnknownWaitingQueueComesAfterAKnownOne) {
  auto endpoints = pool(2);
  endpoints[0].waitingQueueSize = std::numeric_limits<double>::quiet_NaN();
  endpoints[1].waitingQueueSize = 3;
  EndpointPicker picker(2);
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}), 1u);
  std::swap(endpoints[0], endpoints[1]);
  EndpointPicker other(2);
  EXPECT_EQ(other.pick(endpoints, *concurrency(100), TimePoint{}), 0u);
}

TEST(EndpointPickerTest, PrefersEndpointsWhoseLastScrapeSucceeded) {
  auto endpoints = pool(2);
  endpoints[1].inFlightRequests = 5;  // busier, but the only one up
  const std::vector<std::uint8_t> up{0, 1};
  EndpointPicker picker;
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, up), 1u);
}

// A mixed pool: a long prompt never goes to an endpoint whose KV cache cannot hold it, however
// idle, while one that can exists (a server would refuse it or hold it queued for ever); an
// unknown capacity (0) is taken to hold it.
TEST(EndpointPickerTest, NeverPicksAnEndpointTooSmallForTheRequest) {
  auto endpoints = pool(3);
  endpoints[0].kvCapacityTokens = 8'000;  // idle but too small
  endpoints[1].kvCapacityTokens = 64'000;
  endpoints[1].inFlightRequests = 3;
  endpoints[2].kvCapacityTokens = 8'000;
  endpoints[2].inFlightRequests = 1;
  EndpointPicker picker(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, {}, 20'000), 1u);
  }
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, {}, 2'000), 0u);  // fits all
  // Above every capacity: the usual order (the flow controller refuses such a request first
  // when it knows the pool's capacity).
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, {}, 100'000), 0u);
  endpoints[1].kvCapacityTokens = 0;  // unknown: may hold it
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, {}, 20'000), 1u);
}

// The only endpoint that can hold the request is full for the detector (filtered out): it still
// gets the request, which could start nowhere else.
TEST(EndpointPickerTest, AnEndpointThatCanHoldTheRequestBeatsTheFilter) {
  auto endpoints = pool(2);
  endpoints[0].kvCapacityTokens = 8'000;
  endpoints[1].kvCapacityTokens = 64'000;
  endpoints[1].inFlightRequests = 4;  // full at maxConcurrency 4: filtered out
  for (const bool fitFirst : {false, true}) {
    EndpointPicker picker(2, {.fitFirst = fitFirst});
    EXPECT_EQ(picker.pick(endpoints, *concurrency(4), TimePoint{}, {}, 20'000), 1u);
    EXPECT_EQ(picker.pick(endpoints, *concurrency(4), TimePoint{}, {}, 2'000), 0u);
  }
  // Before the endpoints that are down: a server that cannot hold it never will.
  const std::vector<std::uint8_t> up{1, 0};
  EndpointPicker picker(2);
  EXPECT_EQ(picker.pick(endpoints, *concurrency(100), TimePoint{}, up, 20'000), 1u);
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
  EndpointPicker fit(8, {.fitFirst = true});
  testing::AllocationCounter counter;
  for (int k = 0; k < 100; ++k) (void)picker.pick(endpoints, *detector, TimePoint{});
  for (int k = 0; k < 100; ++k) (void)fit.pick(endpoints, *detector, TimePoint{}, {}, 512);
  EXPECT_EQ(counter.count(), 0u);
}

// The KV-bound case: endpoint 0 runs fewer requests but its KV cache is full; endpoint 1 runs
// more and has room. Fit-first routes the request where it starts now.
TEST(EndpointPickerTest, FitFirstPrefersAnEndpointWhereTheRequestStartsNow) {
  auto endpoints = pool(2);
  for (Endpoint& e : endpoints) {
    e.maxRunningRequests = 16;
    e.kvCapacityTokens = 32768;
  }
  endpoints[0].runningRequests = endpoints[0].inFlightRequests = 10;
  endpoints[0].kvCacheUsage = 0.78;  // 0.02 x 32768 = 655 tokens below the 0.8 threshold
  endpoints[1].runningRequests = endpoints[1].inFlightRequests = 12;
  endpoints[1].kvCacheUsage = 0.4;
  auto utilization = UtilizationDetector::create().value();
  EndpointPicker plain(2);
  EXPECT_EQ(plain.pick(endpoints, *utilization, TimePoint{}, {}, 512), 0u);  // fewest in flight
  EndpointPicker fit(2, {.fitFirst = true});
  EXPECT_TRUE(fit.options().fitFirst);
  EXPECT_EQ(fit.pick(endpoints, *utilization, TimePoint{}, {}, 1024), 1u);
  // A small request fits on both: the old order decides again.
  EXPECT_EQ(fit.pick(endpoints, *utilization, TimePoint{}, {}, 512), 0u);
  // It fits nowhere: the old order.
  EXPECT_EQ(fit.pick(endpoints, *utilization, TimePoint{}, {}, 100000), 0u);
  // A server with a queue has no free slot for it, whatever its KV.
  endpoints[1].waitingQueueSize = 1;
  EXPECT_EQ(fit.pick(endpoints, *utilization, TimePoint{}, {}, 1024), 0u);
}

// A detector without a capacity model (the default room()): fit-first changes nothing.
TEST(EndpointPickerTest, FitFirstWithoutACapacityModelKeepsTheOrder) {
  class Plain final : public SaturationDetector {
   public:
    Plain() : SaturationDetector("plain") {}
    double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return 0.0; }
    FilterResult filter(std::span<const Endpoint> e, TimePoint,
                        std::span<std::size_t> out) const noexcept override {
      FilterResult r;
      for (std::size_t i = 0; i < e.size() && i < out.size(); ++i) out[r.kept++] = i;
      return r;
    }
    std::string_view type() const noexcept override { return "plain"; }
  };
  auto endpoints = pool(3);
  endpoints[0].inFlightRequests = 3;
  endpoints[1].inFlightRequests = 1;
  endpoints[2].inFlightRequests = 2;
  EndpointPicker fit(3, {.fitFirst = true});
  EXPECT_EQ(fit.pick(endpoints, Plain{}, TimePoint{}, {}, 1 << 20), 1u);
}

}  // namespace
}  // namespace holdback
