// The simulator-only arm `oracle` (src/sim/oracle.cpp): opt-in, it never delays a top-priority
// request beyond what the empty pool would, it fills the pool with batch when no top-priority
// arrival is due, and it holds the capacity a foreseen burst needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "sim/arm_lookup.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace holdback::sim {
namespace {

// One endpoint of 4 slots, KV that never binds, a batch backlog of 20 behind `top`.
Scenario oracleScenario(TrafficClass top) {
  Scenario s;
  s.pool.endpoints = 1;
  s.pool.slots = 4;
  s.pool.kvCapacityTokens = 1'000'000;
  s.durationSeconds = 60.0;
  s.drainSeconds = 10.0;
  s.seed = 3;
  top.name = "interactive";
  top.priority = 100;
  s.classes = {
      std::move(top),
      {.name = "batch",
       .priority = -1,
       .arrival = {.process = ArrivalProcess::kBacklog, .backlog = 20},
       .inputTokens = {.distribution = LengthDistribution::kUniform, .min = 100, .max = 400},
       .outputTokens = {.distribution = LengthDistribution::kUniform, .min = 50, .max = 200},
       .ttlSeconds = 0.0}};
  return s;
}

// The top class's time to first token per request, in arrival order.
std::vector<double> oracleTopTtfts(const ArmResult& r) {
  std::vector<double> out;
  for (const RequestRecord& q : r.requests) {
    if (q.classIndex == 0) out.push_back(q.firstToken - q.arrival);
  }
  return out;
}

// Each top-class request's TTFT under `arm` against the same request alone on the empty pool:
// the largest excess in seconds.
double oracleWorstExcess(const Scenario& s, const std::string& arm) {
  const ArmResult alone = runArm(s, testArm("none"), {.collectSeries = true, .onlyClass = 0});
  const ArmResult run = runArm(s, testArm(arm), {.collectSeries = true});
  const std::vector<double> a = oracleTopTtfts(alone);
  const std::vector<double> b = oracleTopTtfts(run);
  EXPECT_EQ(a.size(), b.size()) << arm;
  EXPECT_GT(a.size(), 20u) << arm;
  double worst = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, b[i] - a[i]);
  }
  return worst;
}

const ClassResult& oracleBatch(const ArmResult& r) {
  return r.classes.back();
}

TEST(SimOracleTest, RunsOnlyWhenNamed) {
  for (const Arm& a : allArms()) EXPECT_NE(a.name, "oracle");
  const Arm oracle = testArm("oracle");
  EXPECT_TRUE(oracle.oracle);
  EXPECT_FALSE(oracle.flowControl);
  EXPECT_FALSE(oracle.eviction);
  EXPECT_NE(armNames().find(", oracle"), std::string::npos) << armNames();
}

// Poisson interactive traffic that alone never needs more than the pool (so the empty pool serves
// every request at its arrival): the oracle serves every interactive request as the empty pool
// does (to the nanosecond: a prefill does not depend on the batch), while static-1.0, which lets
// batch fill every slot, delays some. (When the top class alone overflows the pool, its requests
// queue in both runs and the decode steps' phase makes the two differ by a few ms.)
TEST(SimOracleTest, NeverDelaysATopPriorityRequestBeyondTheEmptyPool) {
  const Scenario s = oracleScenario({.arrival = {.process = ArrivalProcess::kPoisson, .rate = 3.0},
                                     .inputTokens = {.mean = 200.0},
                                     .outputTokens = {.mean = 20.0}});
  const ArmResult alone = runArm(s, testArm("none"), {.collectSeries = true, .onlyClass = 0});
  for (const RequestRecord& q : alone.requests) ASSERT_EQ(q.admitted, q.arrival);
  EXPECT_LE(oracleWorstExcess(s, "oracle"), 1e-9);
  EXPECT_GT(oracleWorstExcess(s, "static-1.0"), 0.05);
  // And batch still runs in the gaps.
  const ArmResult r = runArm(s, testArm("oracle"));
  EXPECT_GT(oracleBatch(r).completed, 50u);
  EXPECT_EQ(r.inFlightEvictions, 0u);
}

// A trace (read ahead through its cursor) with one burst that needs every slot at t = 20 s: the
// oracle empties the pool of batch before it and serves the burst as the empty pool would.
TEST(SimOracleTest, HoldsTheSlotsAForeseenBurstNeeds) {
  // A row at 10 s larger than the KV cache: refused, it still counts as a foreseen arrival.
  std::string text = "seconds,input_tokens,output_tokens\n0,10,1\n10,2000000,1\n";
  for (int i = 0; i < 4; ++i) text += "20.0" + std::to_string(i) + ",300,150\n";
  text += "59,10,1\n";
  std::string error;
  TrafficClass top{.arrival = {.process = ArrivalProcess::kTrace}};
  top.arrival.traceFormat = TraceFormat::kCsv;
  top.arrival.trace = parseTrace(text, "burst.csv", TraceFormat::kCsv, error);
  ASSERT_NE(top.arrival.trace, nullptr) << error;
  Scenario s = oracleScenario(top);
  s.durationSeconds = 30.0;
  s.seed = 1;  // the trace from its start
  const ArmResult alone = runArm(s, testArm("none"), {.collectSeries = true, .onlyClass = 0});
  const ArmResult run = runArm(s, testArm("oracle"), {.collectSeries = true});
  const std::vector<double> a = oracleTopTtfts(alone);
  const std::vector<double> b = oracleTopTtfts(run);
  EXPECT_EQ(run.classes[0].tooLarge, 1u);
  ASSERT_EQ(a.size(), 6u);  // the first row at 0 s, the one too large, then the burst
  ASSERT_EQ(b.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    if (i != 1) {
      EXPECT_LE(b[i] - a[i], 1e-9) << i;
    }
  }
  // Batch ran before and after the burst.
  std::size_t before = 0;
  std::size_t after = 0;
  for (const RequestRecord& q : run.requests) {
    if (q.classIndex != 1 || q.outcome != "completed") continue;
    before += q.finished < 19.0 ? 1 : 0;
    after += q.admitted > 21.0 ? 1 : 0;
  }
  EXPECT_GT(before, 20u);
  EXPECT_GT(after, 20u);
}

// No top-priority arrival is ever due: the oracle keeps the pool as full of batch as routing
// every request at once does.
TEST(SimOracleTest, FillsThePoolWithBatchWhenNoArrivalIsDue) {
  const Scenario s =
      oracleScenario({.arrival = {.process = ArrivalProcess::kPoisson, .rate = 0.0}});
  const ArmResult oracle = runArm(s, testArm("oracle"));
  const ArmResult none = runArm(s, testArm("none"));
  const double mine = oracleBatch(oracle).windows.back().outputTokensPerSecond;
  const double full = oracleBatch(none).windows.back().outputTokensPerSecond;
  EXPECT_GT(full, 0.0);
  EXPECT_GE(mine, 0.99 * full) << mine << " vs " << full;
}

// When the top class alone needs the whole pool, lower classes wait in the oracle's queue and
// leave it at their TTL, evicted, as the controller's queue would let them.
TEST(SimOracleTest, LowerClassesWaitingPastTheirTtlAreEvicted) {
  Scenario s = oracleScenario({.arrival = {.process = ArrivalProcess::kPoisson, .rate = 200.0},
                               .inputTokens = {.mean = 200.0},
                               .outputTokens = {.mean = 200.0}});
  s.durationSeconds = 10.0;
  s.classes.back().ttlSeconds = 2.0;
  const ArmResult r = runArm(s, testArm("oracle"));
  EXPECT_GT(oracleBatch(r).evicted, 10u);
  EXPECT_LT(oracleBatch(r).completed, oracleBatch(r).evicted);
}

}  // namespace
}  // namespace holdback::sim
