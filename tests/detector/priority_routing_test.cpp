// Routing by priority: the dispatch ledger's requests in flight per priority level
// (DispatchLedgerOptions::priorityLevels, inFlightAtOrAbove; the InFlightTracker's by-name
// counterpart) and EndpointPicker's rule 4a (EndpointPickerOptions::priorityRouting).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/endpoint_picker.hpp"
#include "holdback/detector/in_flight_tracker.hpp"

namespace holdback {
namespace {

constexpr Priority kRoutedTop = 10;
constexpr Priority kRoutedMid = 0;
constexpr Priority kRoutedLow = -1;

DispatchLedgerOptions routedLevels() {
  DispatchLedgerOptions o;
  o.priorityLevels = {kRoutedLow, kRoutedTop, kRoutedMid,
                      kRoutedLow};  // any order, duplicates dropped
  return o;
}

std::vector<std::int64_t> routedCounts(const DispatchLedger& ledger,
                                       const std::vector<EndpointId>& ids, Priority p) {
  std::vector<std::int64_t> out(ids.size(), -7);
  ledger.inFlightAtOrAbove(ids, p, out);
  return out;
}

TEST(PriorityRoutingLedgerTest, CountsRequestsInFlightOfAPriorityOrAbove) {
  DispatchLedger ledger(routedLevels());
  const std::vector<EndpointId> ids{ledger.registerEndpoint("a"), ledger.registerEndpoint("b")};
  std::vector<DispatchHandle> batch;
  for (int i = 0; i < 3; ++i) batch.push_back(ledger.dispatch(ids[0], 100, kRoutedLow));
  DispatchHandle standard = ledger.dispatch(ids[0], 100, kRoutedMid);
  DispatchHandle interactive = ledger.dispatch(ids[1], 100, kRoutedTop);
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedLow), (std::vector<std::int64_t>{4, 1}));
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedMid), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedTop), (std::vector<std::int64_t>{0, 1}));
  // Between levels and beyond them: the levels at or above the priority asked.
  EXPECT_EQ(routedCounts(ledger, ids, 5), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(routedCounts(ledger, ids, -100), (std::vector<std::int64_t>{4, 1}));
  EXPECT_EQ(routedCounts(ledger, ids, 100), (std::vector<std::int64_t>{0, 0}));
  // A request counts at the highest level at or below its priority (below every level: the
  // lowest), and release gives it back.
  DispatchHandle between = ledger.dispatch(ids[1], 0, 5);
  DispatchHandle below = ledger.dispatch(ids[1], 0, -50);
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedMid), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedLow), (std::vector<std::int64_t>{4, 3}));
  interactive.release();
  between.release();
  below = DispatchHandle{};  // move-assigning releases too
  batch.clear();
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedLow), (std::vector<std::int64_t>{1, 0}));
  standard.release();
  standard.release();  // once only
  EXPECT_EQ(routedCounts(ledger, ids, kRoutedLow), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(ledger.load(ids[0]).requests, 0);  // the totals as before
}

TEST(PriorityRoutingLedgerTest, HandleFreeEventsAndStaleIds) {
  DispatchLedger ledger(routedLevels());
  const EndpointId a = ledger.registerEndpoint("a");
  EXPECT_TRUE(ledger.recordDispatch(a, 10, kRoutedTop));
  EXPECT_TRUE(ledger.recordDispatch(a, 10, kRoutedLow));
  EXPECT_EQ(routedCounts(ledger, {a}, kRoutedLow), std::vector<std::int64_t>{2});
  EXPECT_TRUE(ledger.recordCompletion(a, 10, kRoutedTop));
  EXPECT_EQ(routedCounts(ledger, {a}, kRoutedMid), std::vector<std::int64_t>{0});
  // A completion at a level with nothing in flight there completes the request, not the level.
  EXPECT_TRUE(ledger.recordCompletion(a, 10, kRoutedTop));
  EXPECT_EQ(routedCounts(ledger, {a}, kRoutedLow), std::vector<std::int64_t>{1});
  EXPECT_FALSE(ledger.recordCompletion(a, 10, kRoutedLow));  // no request left: dropped
  // A stale id reads 0; a re-registered name starts from 0.
  EXPECT_TRUE(ledger.recordDispatch(a, 10, kRoutedLow));
  ASSERT_TRUE(ledger.removeEndpoint(a));
  EXPECT_EQ(routedCounts(ledger, {a}, kRoutedLow), std::vector<std::int64_t>{0});
  EXPECT_FALSE(ledger.recordDispatch(a, 10, kRoutedLow));
  EXPECT_TRUE(ledger.recordCompletion(ledger.registerEndpoint("other"), 0, kRoutedLow) == false);
}

TEST(PriorityRoutingLedgerTest, WithoutLevelsNothingIsCountedByPriority) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  DispatchHandle h = ledger.dispatch(a, 10, kRoutedTop);
  EXPECT_TRUE(h.active());
  EXPECT_EQ(ledger.load(a).requests, 1);
  EXPECT_EQ(routedCounts(ledger, {a}, kRoutedLow), std::vector<std::int64_t>{0});
}

TEST(PriorityRoutingLedgerTest, DispatchAndReadsDoNotAllocate) {
  DispatchLedger ledger(routedLevels());
  const std::vector<EndpointId> ids{ledger.registerEndpoint("a"), ledger.registerEndpoint("b")};
  std::vector<std::int64_t> out(2);
  testing::AllocationCounter counter;
  for (int i = 0; i < 100; ++i) {
    DispatchHandle h = ledger.dispatch(ids[i % 2], 10, i % 3 == 0 ? kRoutedTop : kRoutedLow);
    ledger.inFlightAtOrAbove(ids, kRoutedMid, out);
    (void)ledger.recordDispatch(ids[0], 1, kRoutedLow);
    (void)ledger.recordCompletion(ids[0], 1, kRoutedLow);
  }
  EXPECT_EQ(counter.count(), 0u);
}

TEST(PriorityRoutingTrackerTest, CountsByNameWithLevels) {
  InFlightTracker tracker(routedLevels());
  InFlightHandle batch = tracker.dispatch("a", 10, kRoutedLow);
  InFlightHandle interactive = tracker.dispatch("b", 10, kRoutedTop);
  std::vector<Endpoint> pool(3);
  pool[0].name = "a";
  pool[1].name = "b";
  pool[2].name = "unknown";
  std::vector<std::int64_t> out(3, -1);
  tracker.inFlightAtOrAbove(pool, kRoutedTop, out);
  EXPECT_EQ(out, (std::vector<std::int64_t>{0, 1, 0}));
  tracker.inFlightAtOrAbove(pool, kRoutedLow, out);
  EXPECT_EQ(out, (std::vector<std::int64_t>{1, 1, 0}));
  interactive.release();
  tracker.inFlightAtOrAbove(pool, kRoutedTop, out);
  EXPECT_EQ(out, (std::vector<std::int64_t>{0, 0, 0}));
}

std::vector<Endpoint> routedPool(std::size_t n, std::int64_t slots) {
  std::vector<Endpoint> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].name = "e" + std::to_string(i);
    out[i].updateTime = TimePoint{};
    out[i].maxRunningRequests = slots;
  }
  return out;
}

std::shared_ptr<ConcurrencyDetector> routedDetector(std::int64_t max) {
  return std::move(ConcurrencyDetector::create({.maxConcurrency = max})).value();
}

// Two servers of 8 slots that preempt by priority: one runs 8 batch requests, the other 1
// interactive. By requests in flight an interactive request goes to the second (1 < 8), where it
// shares the server with another interactive request; by priority it goes to the first, where
// the server preempts a batch request for it.
TEST(PriorityRoutingPickerTest, InteractiveGoesWhereFewestOfItsPriorityOrAboveAre) {
  DispatchLedger ledger(routedLevels());
  const std::vector<EndpointId> ids{ledger.registerEndpoint("e0"), ledger.registerEndpoint("e1")};
  std::vector<DispatchHandle> held;
  for (int i = 0; i < 8; ++i) held.push_back(ledger.dispatch(ids[0], 100, kRoutedLow));
  held.push_back(ledger.dispatch(ids[1], 100, kRoutedTop));
  std::vector<Endpoint> endpoints = routedPool(2, 8);
  ledger.fill(endpoints, ids);
  std::vector<std::int64_t> above(2);
  ledger.inFlightAtOrAbove(ids, kRoutedTop, above);
  const auto d = routedDetector(100);

  EndpointPicker byLoad(2);
  EXPECT_EQ(byLoad.pick(endpoints, *d, TimePoint{}, {}, 0, above), 1u);  // option off: ignored
  EndpointPicker byPriority(2, {.priorityRouting = true});
  EXPECT_TRUE(byPriority.options().priorityRouting);
  EXPECT_EQ(byPriority.pick(endpoints, *d, TimePoint{}, {}, 0, above), 0u);
  // A batch request is routed by its own priority or above: every request counts.
  ledger.inFlightAtOrAbove(ids, kRoutedLow, above);
  EXPECT_EQ(byPriority.pick(endpoints, *d, TimePoint{}, {}, 0, above), 1u);
  // Without the counts (none, or too few) the rule has no effect.
  EXPECT_EQ(byPriority.pick(endpoints, *d, TimePoint{}), 1u);
  const std::vector<std::int64_t> short_counts{0};
  EXPECT_EQ(byPriority.pick(endpoints, *d, TimePoint{}, {}, 0, short_counts), 1u);
}

TEST(PriorityRoutingPickerTest, TiesOnPriorityGoToTheFewestInFlightPerSlot) {
  std::vector<Endpoint> endpoints = routedPool(3, 8);
  endpoints[1].maxRunningRequests = 16;  // a mixed pool: counts per slot
  endpoints[0].inFlightRequests = 6;
  endpoints[1].inFlightRequests = 10;  // 10 / 16 below 6 / 8
  endpoints[2].inFlightRequests = 3;
  const std::vector<std::int64_t> above{1, 2, 2};  // per slot: 1/8 = 2/16 < 2/8
  EndpointPicker picker(3, {.priorityRouting = true});
  EXPECT_EQ(picker.pick(endpoints, *routedDetector(100), TimePoint{}, {}, 0, above), 1u);
}

TEST(PriorityRoutingPickerTest, KeepsToTheDetectorsFilter) {
  std::vector<Endpoint> endpoints = routedPool(3, 4);
  endpoints[0].inFlightRequests = 4;  // full at maxConcurrency 4: filtered out
  endpoints[1].inFlightRequests = 3;
  endpoints[2].inFlightRequests = 3;
  const std::vector<std::int64_t> above{0, 2, 1};
  EndpointPicker picker(3, {.priorityRouting = true});
  EXPECT_EQ(picker.pick(endpoints, *routedDetector(4), TimePoint{}, {}, 0, above), 2u);
}

TEST(PriorityRoutingPickerTest, NoAllocationInSteadyState) {
  std::vector<Endpoint> endpoints = routedPool(64, 8);
  std::vector<std::int64_t> above(64);
  for (std::size_t i = 0; i < 64; ++i) {
    endpoints[i].inFlightRequests = static_cast<std::int64_t>(i % 7);
    above[i] = static_cast<std::int64_t>((i * 5) % 3);
  }
  const auto d = routedDetector(100);
  EndpointPicker picker(64, {.fitFirst = true, .priorityRouting = true});
  (void)picker.pick(endpoints, *d, TimePoint{}, {}, 10, above);
  testing::AllocationCounter counter;
  for (int i = 0; i < 100; ++i) (void)picker.pick(endpoints, *d, TimePoint{}, {}, 10, above);
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
