// Concurrency of the policies; run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"
#include "holdback/testing/conformance_support.hpp"

namespace holdback {
namespace {

TEST(SoftReflectiveConcurrencyTest, SharedTickCountsEveryAlternatingCall) {
  auto policy = std::move(SoftReflectiveCeilingPolicy::create()).value();
  constexpr int kThreads = 4;
  constexpr int kCalls = 5000;
  std::vector<int> opened(kThreads, 0);
  testing::runConcurrently(kThreads, [&](int t) {
    const std::vector<Priority> priorities{100, 0, -50};
    std::vector<double> ceilings(3);
    for (int i = 0; i < kCalls; ++i) {
      ceilings.assign(3, 1.0);
      policy->computeLimit(0.75, priorities, ceilings);  // period 3
      // Gated bands open together: never band 2 open with band 1 closed.
      if (ceilings[2] == 1.0 && ceilings[1] != 1.0) opened[static_cast<std::size_t>(t)] = -1000000;
      if (ceilings[2] == 1.0) ++opened[static_cast<std::size_t>(t)];
    }
  });
  EXPECT_EQ(policy->ticks(), static_cast<std::uint64_t>(kThreads * kCalls));
  int total_open = 0;
  for (const int o : opened) {
    EXPECT_GE(o, 0);
    total_open += o;
  }
  // Exactly every third tick opens, however the calls interleave.
  EXPECT_EQ(total_open, kThreads * kCalls / 3);
}

TEST(PriorityHoldbackConcurrencyTest, ConcurrentCallersSeeIdenticalCeilings) {
  auto policy = std::move(PriorityHoldbackPolicy::create(
                              {.strategy = HoldbackStrategy::kSigmoidSmoothed, .minCeiling = 0.6}))
                    .value();
  const std::vector<Priority> priorities{100, 50, 0, -1};
  std::vector<double> expected(4, 1.0);
  policy->computeLimit(0.5, priorities, expected);
  std::vector<int> mismatches(4, 0);
  testing::runConcurrently(4, [&](int t) {
    std::vector<double> c(4);
    for (int i = 0; i < 5000; ++i) {
      c.assign(4, 1.0);
      policy->computeLimit(0.5, priorities, c);
      if (c != expected) ++mismatches[static_cast<std::size_t>(t)];
    }
  });
  for (const int m : mismatches) EXPECT_EQ(m, 0);
}

// The memo of the value-domain and static strategies (one list, a sequence lock): callers that
// alternate between lists replace it under each other's reads, and every caller still gets the
// ceilings of its own list.
TEST(PriorityHoldbackConcurrencyTest, MemoUnderConcurrentlyChangingListsReturnsEachListsCeilings) {
  for (const HoldbackStrategy strategy :
       {HoldbackStrategy::kLinearProportional, HoldbackStrategy::kStatic}) {
    PriorityHoldbackOptions o{.strategy = strategy, .minCeiling = 0.2};
    if (strategy == HoldbackStrategy::kStatic) o.ceilings = {{100, 0.9}, {50, 0.6}, {0, 0.3}};
    auto policy = std::move(PriorityHoldbackPolicy::create(o)).value();
    const std::vector<std::vector<Priority>> lists{
        {100, 50, 0, -1}, {100, 50, 0, -2}, {100, 60, 0}, {100, 50, 25, 10, 0, -1, -5, -9, -20}};
    std::vector<std::vector<double>> expected;
    for (const auto& list : lists) {
      // A fresh policy for each list: its first call computes.
      auto fresh = std::move(PriorityHoldbackPolicy::create(o)).value();
      expected.emplace_back(list.size(), 1.0);
      fresh->computeLimit(0.5, list, expected.back());
    }
    std::vector<int> mismatches(4, 0);
    testing::runConcurrently(4, [&](int t) {
      std::vector<double> c;
      for (int i = 0; i < 5000; ++i) {
        // Thread t mostly repeats its own list (memo hits) and every 3rd call takes the next one.
        const std::size_t k = (static_cast<std::size_t>(t) + (i % 3 == 0 ? 1U : 0U)) % lists.size();
        c.assign(lists[k].size(), 1.0);
        policy->computeLimit(0.5, lists[k], c);
        if (c != expected[k]) ++mismatches[static_cast<std::size_t>(t)];
      }
    });
    for (const int m : mismatches) EXPECT_EQ(m, 0);
  }
}

// The hold of the reserve is state shared by every caller: concurrent callers with their own
// clocks, bursts and lulls still get bounded, non-increasing ceilings, and the state stays usable.
TEST(ReservationConcurrencyTest, HoldStateSurvivesConcurrentCallers) {
  auto policy = std::move(ReservationPolicy::create({.epsilon = 0.01, .minCeiling = 0.5})).value();
  const std::vector<Priority> priorities{10, 0, -1};
  const std::vector<BandDemand> burst{
      {.arrivalRate = 60.0, .inFlight = 30.0, .completionRate = 20.0},
      {.holdingTime = 2.0, .inFlight = 4.0, .completionRate = 2.0},
      {.holdingTime = 2.5, .inFlight = 30.0, .completionRate = 10.0}};
  std::vector<BandDemand> idle = burst;
  idle[0].arrivalRate = 0.0;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::vector<int> bad(4, 0);
  testing::runConcurrently(4, [&](int t) {
    std::vector<double> c(3);
    for (int i = 0; i < 5000; ++i) {
      const auto& demand = (i / 100 + t) % 2 == 0 ? burst : idle;
      c.assign(3, 1.0);
      policy->computeLimit(
          1.0, priorities, c,
          DemandView{.bands = demand,
                     .requestUnit = 1.0 / 64,
                     .now = t0 + std::chrono::milliseconds(i) + std::chrono::microseconds(t)});
      const bool ok = c[0] == 1.0 && c[1] <= c[0] && c[2] <= c[1] && c[2] >= 0.5;
      if (!ok) ++bad[static_cast<std::size_t>(t)];
    }
  });
  for (const int b : bad) EXPECT_EQ(b, 0);
  // Long after, the lull's one-slot reserve.
  std::vector<double> c(3, 1.0);
  policy->computeLimit(
      1.0, priorities, c,
      DemandView{.bands = idle, .requestUnit = 1.0 / 64, .now = t0 + std::chrono::hours(1)});
  EXPECT_DOUBLE_EQ(c[2], 63.0 / 64);
}

}  // namespace
}  // namespace holdback
