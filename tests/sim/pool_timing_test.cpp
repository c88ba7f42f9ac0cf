// One pool model, two runtimes: the fake model server's pool mode (StepEngine,
// examples/model-server/step_engine.hpp) and the simulator's pool (src/sim/pool_model.cpp) give
// the same first-token and completion times for the same requests and parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <vector>

#include "sim/pool_timing.hpp"
#include "sim/simulator.hpp"
#include "step_engine.hpp"

namespace holdback::sim {
namespace {

using holdback_examples::StepEngine;

TEST(PoolTimingTest, Formulas) {
  const PoolTiming t{
      .prefillBaseMs = 4.0, .prefillPerTokenMs = 0.5, .tpotBaseMs = 6.0, .tpotPerRunningMs = 2.0};
  EXPECT_DOUBLE_EQ(t.prefillMs(10), 9.0);
  EXPECT_DOUBLE_EQ(t.tpotMs(3), 12.0);
  EXPECT_TRUE(admitsHead(0, 2, 0, 1000, 100));  // alone: runs even when it exceeds the KV
  EXPECT_TRUE(admitsHead(1, 2, 50, 50, 100));
  EXPECT_FALSE(admitsHead(1, 2, 50, 51, 100));
  EXPECT_FALSE(admitsHead(2, 2, 0, 1, 100));
}

// Replays the simulator's dispatches into a StepEngine on a virtual clock and compares.
void expectEngineMatchesSimulator(const Scenario& s) {
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const ArmResult sim = runArm(s, none, RunOptions{.collectSeries = true});
  ASSERT_GT(sim.requests.size(), 100u);

  StepEngine engine({.timing = s.pool.timing(),
                     .slots = s.pool.slots,
                     .kvCapacityTokens = s.pool.kvCapacityTokens});
  const auto ns = [](double seconds) { return std::llround(seconds * 1e9); };
  std::deque<StepEngine::Sequence> seqs;  // stable addresses
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < sim.requests.size(); ++i) {
    if (!std::isnan(sim.requests[i].dispatched)) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return sim.requests[a].dispatched < sim.requests[b].dispatched;
  });
  std::vector<StepEngine::Sequence*> changed;
  std::vector<StepEngine::Sequence*> byRequest(sim.requests.size(), nullptr);
  std::size_t next = 0;
  for (;;) {
    const auto step = engine.nextStep();
    if (next < order.size() && (!step || ns(sim.requests[order[next]].dispatched) < *step)) {
      const RequestRecord& r = sim.requests[order[next]];
      StepEngine::Sequence& q = seqs.emplace_back();
      q.input = r.inputTokens;
      q.output = r.outputTokens;
      byRequest[order[next]] = &q;
      engine.enqueue(q, ns(r.dispatched), changed);
      ++next;
    } else if (step) {
      engine.step(*step, changed);
    } else {
      break;
    }
    changed.clear();
  }
  std::size_t compared = 0;
  for (std::size_t i = 0; i < sim.requests.size(); ++i) {
    const RequestRecord& r = sim.requests[i];
    if (byRequest[i] == nullptr || r.outcome != "completed") continue;
    const StepEngine::Sequence& q = *byRequest[i];
    ASSERT_TRUE(q.done) << "request " << i;
    EXPECT_NEAR(static_cast<double>(q.admitted) / 1e9, r.admitted, 1e-6) << "request " << i;
    EXPECT_NEAR(static_cast<double>(q.firstToken) / 1e9, r.firstToken, 1e-6) << "request " << i;
    EXPECT_NEAR(static_cast<double>(q.finished) / 1e9, r.finished, 1e-6) << "request " << i;
    ++compared;
  }
  EXPECT_GT(compared, 100u);
}

Scenario oneServerScenario() {
  Scenario s;
  s.pool.endpoints = 1;
  s.durationSeconds = 20.0;
  s.drainSeconds = 60.0;
  s.classes = {TrafficClass{
      .name = "mixed",
      .priority = 0,
      .arrival = {.process = ArrivalProcess::kPoisson, .rate = 12.0},
      .inputTokens = {.distribution = LengthDistribution::kUniform, .min = 64, .max = 2048},
      .outputTokens = {.distribution = LengthDistribution::kUniform, .min = 1, .max = 96}}};
  return s;
}

TEST(PoolTimingTest, StepEngineMatchesSimulatorSlotBound) {
  Scenario s = oneServerScenario();
  s.pool.slots = 4;
  s.pool.kvCapacityTokens = 1 << 20;
  expectEngineMatchesSimulator(s);
}

TEST(PoolTimingTest, StepEngineMatchesSimulatorKvBound) {
  Scenario s = oneServerScenario();
  s.pool.slots = 16;
  s.pool.kvCapacityTokens = 4096;  // a few prompts fill it: admissions wait for KV
  s.pool.prefillPerTokenMs = 0.2;
  s.pool.tpotPerRunningMs = 1.0;
  expectEngineMatchesSimulator(s);
}

}  // namespace
}  // namespace holdback::sim
