// Parity with upstream's eviction benchmark (PR #2107; upstream-reference.md §6, adaptive-holdback
// §1.3) on its own shapes, through holdback's controller (src/sim/eviction_bench.hpp):
// relief time = confirmation + grace per decision (epoch model), no over-eviction at a matched
// grace, over-eviction when the grace is below the sensor lag; plus holdback's wait-vs-evict.
// Deterministic (millisecond-stepped clock): exact figures are asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "sim/eviction_bench.hpp"

namespace holdback::sim {
namespace {

using namespace std::chrono_literals;

TEST(EvictionBenchTest, AnalyticMinimumMatchesUpstreamVectors) {
  struct V {
    std::size_t s, k, c;
    double h;
    std::size_t min, admits;
  };
  for (const V& v : std::vector<V>{{20, 1, 20, 0.9, 3, 1},
                                   {20, 32, 20, 0.9, 20, 18},
                                   {20, 10, 20, 0.9, 12, 10},
                                   {10, 1, 20, 0.9, 0, 1},
                                   {18, 1, 18, 1.0, 1, 1},
                                   {20, 1, 20, 0.95, 2, 1},
                                   {20, 5, 20, 0.0, 0, 0},
                                   {0, 5, 20, 0.9, 0, 5}}) {
    const MinEvictions m = minEvictionsRequired(v.s, v.k, v.c, v.h);
    EXPECT_EQ(m.evictions, v.min) << v.s << "," << v.k << "," << v.c << "," << v.h;
    EXPECT_EQ(m.admits, v.admits) << v.s << "," << v.k << "," << v.c << "," << v.h;
  }
}

EvictionBenchResult run(BurstShape shape, SensorProfile sensor, Duration grace) {
  EvictionBenchCase c;
  c.shape = shape;
  c.sensor = sensor;
  c.grace = grace;
  return runEvictionBench(c);
}

double ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

TEST(EvictionBenchTest, ReliefIsConfirmationPlusGracePerDecisionAtMatchedGrace) {
  // Epoch model: each decision waits for its confirmation (3 ms) and, but for the last, the grace;
  // the relief comes when the last freed unit becomes visible (the sensor lag).
  for (SensorProfile sensor : {SensorProfile::kInFlight, SensorProfile::kLagging}) {
    for (Duration grace : {5ms, 50ms, 200ms, 500ms}) {
      EvictionBenchCase c;
      c.sensor = sensor;
      if (grace < c.lag()) continue;  // not matched
      for (BurstShape shape : {BurstShape::kSingle, BurstShape::kBatch32}) {
        const EvictionBenchResult r = run(shape, sensor, grace);
        SCOPED_TRACE(std::string(toString(shape)) + " " + std::string(toString(sensor)) + " " +
                     std::to_string(ms(grace)));
        // single needs 3 revocations: 2 (cap) then 1, two decisions before the first relief.
        const double decisions = 2;
        ASSERT_TRUE(r.firstReliefMs.has_value());
        EXPECT_DOUBLE_EQ(*r.firstReliefMs, decisions * ms(c.terminationLatency) +
                                               (decisions - 1) * ms(grace) + ms(c.lag()));
        ASSERT_TRUE(r.overEviction.has_value());
        EXPECT_EQ(*r.overEviction, 0) << "no over-eviction at a matched grace";
        EXPECT_EQ(r.admitted, *r.minAdmits);
        if (shape == BurstShape::kSingle) {
          EXPECT_EQ(r.decisions, 2u);
        }
      }
    }
  }
}

TEST(EvictionBenchTest, GraceBelowTheSensorLagKillsAMultipleOfTheRequiredLeases) {
  for (Duration grace : {5ms, 50ms}) {
    const EvictionBenchResult r = run(BurstShape::kSingle, SensorProfile::kLagging, grace);
    ASSERT_TRUE(r.minEvictions.has_value());
    EXPECT_GE(r.revocations, 2 * *r.minEvictions) << ms(grace) << " ms grace";
    EXPECT_GT(*r.overEviction, 0);
  }
}

TEST(EvictionBenchTest, GraceIsTheDominantThroughputParameter) {
  const EvictionBenchResult tight = run(BurstShape::kBatch32, SensorProfile::kInFlight, 5ms);
  const EvictionBenchResult loose = run(BurstShape::kBatch32, SensorProfile::kInFlight, 500ms);
  ASSERT_TRUE(tight.lastAdmissionMs && loose.lastAdmissionMs);
  EXPECT_LT(*tight.lastAdmissionMs * 10, *loose.lastAdmissionMs);
  EXPECT_EQ(*tight.overEviction, 0);  // tight grace against a leading sensor: no over-eviction
}

TEST(EvictionBenchTest, NaturalChurnOutrunsEvictionBehindALaggingSensor) {
  EvictionBenchCase churn;
  churn.shape = BurstShape::kBatch32;
  churn.sensor = SensorProfile::kLagging;
  churn.eviction = false;
  churn.churnMean = 500ms;
  const EvictionBenchResult natural = runEvictionBench(churn);
  const EvictionBenchResult evict = run(BurstShape::kBatch32, SensorProfile::kLagging, 500ms);
  ASSERT_TRUE(natural.lastAdmissionMs && evict.lastAdmissionMs);
  EXPECT_LT(*natural.lastAdmissionMs, *evict.lastAdmissionMs);
}

TEST(EvictionBenchTest, WaitVsEvictRevokesOnlyTheShortfallWithinTheTolerance) {
  EvictionBenchCase base;
  base.shape = BurstShape::kBatch32;
  base.sensor = SensorProfile::kInFlight;
  base.grace = 10ms;
  base.churnMean = 500ms;
  EvictionBenchCase wait = base;
  wait.waitTolerance = 500ms;
  const EvictionBenchResult upstream = runEvictionBench(base);
  const EvictionBenchResult better = runEvictionBench(wait);
  EXPECT_EQ(better.admitted, upstream.admitted);
  EXPECT_LT(better.revocations * 2, upstream.revocations);    // less than half the kills
  EXPECT_LE(better.waitP95Ms, 1.1 * ms(wait.waitTolerance));  // still within the tolerance
}

TEST(EvictionBenchTest, FootprintAwareVictimsFreeMoreForFewerTokens) {
  EvictionBenchCase plain;
  plain.grace = 10ms;
  plain.heterogeneous = true;
  EvictionBenchCase aware = plain;
  aware.footprintAware = true;
  const EvictionBenchResult upstream = runEvictionBench(plain);
  const EvictionBenchResult better = runEvictionBench(aware);
  ASSERT_TRUE(upstream.firstReliefMs && better.firstReliefMs);
  EXPECT_LT(better.revocations, upstream.revocations);
  EXPECT_LT(better.tokensLost, upstream.tokensLost);
  EXPECT_LT(*better.firstReliefMs, *upstream.firstReliefMs);
}

TEST(EvictionBenchTest, WithoutEvictionOrChurnThereIsNoRelief) {
  EvictionBenchCase off;
  off.eviction = false;
  off.horizon = 2s;
  const EvictionBenchResult r = runEvictionBench(off);
  EXPECT_FALSE(r.firstReliefMs.has_value());
  EXPECT_EQ(r.revocations, 0u);
}

TEST(EvictionBenchTest, MatrixTableHasOneRowPerCase) {
  const std::vector<EvictionBenchCase> cases = evictionBenchMatrix();
  std::vector<EvictionBenchResult> results;
  for (const auto& c : cases) results.push_back(runEvictionBench(c));
  const std::string table = formatEvictionBenchTable(cases, results);
  EXPECT_EQ(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')),
            cases.size() + 2);
  // Deterministic: the same case gives the same figures.
  const EvictionBenchResult again = runEvictionBench(cases[5]);
  EXPECT_EQ(again.revocations, results[5].revocations);
  EXPECT_EQ(again.firstReliefMs, results[5].firstReliefMs);
}

}  // namespace
}  // namespace holdback::sim
