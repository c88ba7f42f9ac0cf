// The model servers' own scheduling in the simulator (pool.engineScheduling,
// src/sim/engine_scheduling.cpp): the queue by priority, priority preemption with its recompute,
// the victim's choice, KV pressure, the scenario key and the report's fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "sim/arm_lookup.hpp"
#include "sim/evaluate.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace holdback::sim {
namespace {

std::shared_ptr<const Trace> engineTrace(const std::string& rows) {
  std::string error;
  // A last row far past the run keeps the trace from looping within it.
  auto t = parseTrace("seconds,input_tokens,output_tokens\n" + rows + "1000,1,1\n", "t",
                      TraceFormat::kCsv, error);
  EXPECT_NE(t, nullptr) << error;
  return t;
}

// One endpoint; batch (priority -1) arrives at 0, 1 and 2 ms (100 in, 200 out), interactive
// (priority 10) once at about 300 ms (`input` in, 20 out), when the batch has decoded about 50
// tokens.
Scenario engineScenario(int slots, std::int64_t kv, std::int64_t interactiveInput,
                        EngineScheduling mode) {
  Scenario s;
  s.pool.endpoints = 1;
  s.pool.slots = slots;
  s.pool.kvCapacityTokens = kv;
  s.pool.engineScheduling = mode;
  s.durationSeconds = 5.0;
  s.drainSeconds = 10.0;
  s.classes = {{.name = "batch",
                .priority = -1,
                .arrival = {.process = ArrivalProcess::kTrace,
                            .trace = engineTrace("0,100,200\n0.001,100,200\n0.002,100,200\n")}},
               // A trace's times count from its first row: the run starts past a first row at 0, so
               // the row at 0.3 s arrives at 0.2995 s.
               {.name = "interactive",
                .priority = 10,
                .arrival = {.process = ArrivalProcess::kTrace,
                            .startSeconds = 0.0005,
                            .trace = engineTrace("0,1,1\n0.3," + std::to_string(interactiveInput) +
                                                 ",20\n")}}};
  return s;
}

struct EngineRun {
  ArmResult result;
  std::vector<RequestRecord> batch;  // in arrival order
  RequestRecord interactive;
};

EngineRun runEngine(const Scenario& s) {
  EngineRun out;
  out.result = runArm(s, testArm("none"), {.collectSeries = true});
  for (const RequestRecord& r : out.result.requests) {
    if (r.classIndex == 0) out.batch.push_back(r);
    if (r.classIndex == 1) out.interactive = r;
  }
  EXPECT_EQ(out.batch.size(), 3u);
  return out;
}

TEST(EngineSchedulingTest, FcfsServesTheInteractiveRequestAfterTheBatchQueuedBeforeIt) {
  const EngineRun r = runEngine(engineScenario(1, 100'000, 50, EngineScheduling::kFcfs));
  EXPECT_GE(r.interactive.admitted, r.batch[2].finished);
  EXPECT_EQ(r.result.preemptions, 0u);
}

TEST(EngineSchedulingTest, APriorityQueueServesItNextWithoutPreempting) {
  const EngineRun r = runEngine(engineScenario(1, 100'000, 50, EngineScheduling::kPriority));
  // The running batch request ends first; the interactive one takes its slot before the two
  // batch requests that were waiting longer.
  EXPECT_DOUBLE_EQ(r.interactive.admitted, r.batch[0].finished);
  EXPECT_LT(r.interactive.admitted, r.batch[1].admitted);
  EXPECT_EQ(r.result.preemptions, 0u);
  for (const RequestRecord& b : r.batch) EXPECT_EQ(b.preemptions, 0u);
}

TEST(EngineSchedulingTest, PreemptionStartsItAtOnceAndTheVictimRecomputesItsTokens) {
  // Two slots, both held by batch: the most recently arrived batch request gives way.
  const EngineRun r = runEngine(engineScenario(2, 100'000, 50, EngineScheduling::kPriorityPreempt));
  EXPECT_DOUBLE_EQ(r.interactive.admitted, r.interactive.arrival);
  EXPECT_EQ(r.interactive.outcome, "completed");
  EXPECT_EQ(r.batch[0].preemptions, 0u);
  EXPECT_EQ(r.batch[1].preemptions, 1u);
  EXPECT_EQ(r.batch[2].preemptions, 0u);  // never ran before the interactive request left
  EXPECT_EQ(r.result.preemptions, 1u);
  // The victim keeps the tokens it streamed: its first token is the one before the preemption,
  // and it completes with its whole output.
  EXPECT_LT(r.batch[1].firstToken, r.interactive.arrival);
  EXPECT_EQ(r.batch[1].outcome, "completed");
  // It recomputes its prompt and the ~50 tokens it had generated, once.
  const ClassResult& batch = r.result.classes[0];
  EXPECT_EQ(batch.preemptions, 1u);
  EXPECT_GT(batch.recomputedTokens, 140u);
  EXPECT_LT(batch.recomputedTokens, 170u);
  EXPECT_EQ(r.result.recomputedTokens, batch.recomputedTokens);
  EXPECT_EQ(r.result.classes[1].preemptions, 0u);
  // Back in its place in the queue (its arrival on the server kept): it restarts before batch 2,
  // which waits for batch 0's slot.
  EXPECT_DOUBLE_EQ(r.batch[2].admitted, r.batch[0].finished);
  // The recompute costs it time: it ends later than batch 0 by more than its 1 ms head start.
  EXPECT_GT(r.batch[1].finished - r.batch[0].finished, 0.05);
}

TEST(EngineSchedulingTest, ARequestPreemptsNoneOfItsOwnPriority) {
  // One slot: the batch requests wait for each other, none preempts the one running.
  Scenario s = engineScenario(1, 100'000, 50, EngineScheduling::kPriorityPreempt);
  s.classes.resize(1);
  const ArmResult r = runTestArm(s, "none");
  EXPECT_EQ(r.preemptions, 0u);
  EXPECT_EQ(r.classes[0].completed, 3u);
}

TEST(EngineSchedulingTest, KvPressurePreemptsAsManyAsItTakes) {
  // Eight slots but 700 KV tokens: the three batch requests hold 3 x (100 + ~50 generated); an
  // interactive prompt of 500 tokens needs two of them out (the latest arrivals first).
  const EngineRun r = runEngine(engineScenario(8, 700, 500, EngineScheduling::kPriorityPreempt));
  EXPECT_DOUBLE_EQ(r.interactive.admitted, r.interactive.arrival);
  EXPECT_EQ(r.batch[0].preemptions, 0u);
  EXPECT_EQ(r.batch[1].preemptions, 1u);
  EXPECT_EQ(r.batch[2].preemptions, 1u);
  for (const RequestRecord& b : r.batch) EXPECT_EQ(b.outcome, "completed");
  // Without preemption the prompt waits for the KV the batch frees as it ends.
  const EngineRun queued = runEngine(engineScenario(8, 700, 500, EngineScheduling::kPriority));
  EXPECT_GT(queued.interactive.admitted, queued.interactive.arrival + 0.5);
}

EngineRun runArmNamed(const Scenario& s, const std::string& name) {
  EngineRun out;
  out.result = runArm(s, testArm(name), {.collectSeries = true});
  for (const RequestRecord& r : out.result.requests) {
    if (r.classIndex == 0) out.batch.push_back(r);
    if (r.classIndex == 1) out.interactive = r;
  }
  return out;
}

TEST(EngineSchedulingTest, AGateAtTheFullPoolKeepsTheRequestFromServersThatWouldPreempt) {
  // Concurrency detector, two slots filled by batch: static-1.0 holds the interactive request in
  // the gateway until a batch request ends; engine-headroom counts twice the pool with batch's
  // ceiling at half of it, so the interactive request goes at once and its server preempts.
  Scenario s = engineScenario(2, 100'000, 50, EngineScheduling::kFcfs);
  s.detector = DetectorKind::kConcurrency;
  const EngineRun gated = runArmNamed(s, "static-1.0+engine");
  ASSERT_EQ(gated.batch.size(), 3u);
  EXPECT_GE(gated.interactive.dispatched, gated.batch[0].finished);
  EXPECT_EQ(gated.result.preemptions, 0u);
  const EngineRun headroom = runArmNamed(s, "engine-headroom");
  ASSERT_EQ(headroom.batch.size(), 3u);
  EXPECT_DOUBLE_EQ(headroom.interactive.admitted, headroom.interactive.arrival);
  EXPECT_EQ(headroom.result.preemptions, 1u);
  // Batch still fills the pool, not more: its third request waits in the gateway.
  EXPECT_GE(headroom.batch[2].dispatched, headroom.batch[0].finished);
}

TEST(EngineSchedulingTest, PriorityRoutingSpreadsTheTopClassByItsOwnLoad) {
  // Two endpoints of one slot. Batch alternates a long request (endpoint 0) and a short one
  // (endpoint 1): by 300 ms endpoint 1 is empty and endpoint 0 holds three long ones. The first
  // interactive request starts on endpoint 1. The picker, counting requests in flight (3 against
  // 1), sends the second there too, behind the first with nothing to preempt; routed by
  // priority it goes to endpoint 0, where no interactive request is, and preempts at once.
  Scenario s = engineScenario(1, 100'000, 50, EngineScheduling::kFcfs);
  s.pool.endpoints = 2;
  s.detector = DetectorKind::kConcurrency;
  s.classes[0].arrival.trace = engineTrace(
      "0,100,400\n0.001,100,4\n0.002,100,400\n0.003,100,4\n0.004,100,400\n0.005,100,4\n");
  s.classes[1].arrival.trace = engineTrace("0,1,1\n0.3,50,200\n0.31,50,200\n");
  auto top = [&](const std::string& name) {
    std::vector<RequestRecord> out;
    for (const RequestRecord& q : runArm(s, testArm(name), {.collectSeries = true}).requests) {
      if (q.classIndex == 1) out.push_back(q);
    }
    EXPECT_EQ(out.size(), 2u) << name;
    return out;
  };
  const std::vector<RequestRecord> routed = top("none+engine-routed");
  ASSERT_EQ(routed.size(), 2u);
  EXPECT_NE(routed[0].endpoint, routed[1].endpoint);
  for (const RequestRecord& q : routed) EXPECT_DOUBLE_EQ(q.admitted, q.arrival);
  const std::vector<RequestRecord> picked = top("none+engine");
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].endpoint, picked[1].endpoint);
  EXPECT_GT(picked[1].admitted, picked[1].arrival + 0.5);
}

TEST(EngineSchedulingTest, AnArmCarriesItsOwnSchedulingAndTheFileKeyReadsIt) {
  Arm arm = testArm("none+engine");
  EXPECT_TRUE(arm.engineScheduling == EngineScheduling::kPriorityPreempt);
  EXPECT_TRUE(testArm("static-1.0+engine-queue").engineScheduling == EngineScheduling::kPriority);
  EXPECT_FALSE(testArm("recommended-noevict+engine").eviction);
  EXPECT_FALSE(testArm("recommended").engineScheduling.has_value());
  EXPECT_EQ(engineSchedulingOf(Scenario{}, arm), EngineScheduling::kPriorityPreempt);

  auto parse = [](const std::string& yaml) {
    auto doc = config::parseDocument(yaml);
    EXPECT_TRUE(doc.ok()) << yaml;
    return parseScenario(doc->json);
  };
  const auto ok = parse("pool: {engineScheduling: priority-preempt}\n");
  ASSERT_TRUE(ok.ok()) << ok.diagnostics().toString();
  EXPECT_EQ(ok->pool.engineScheduling, EngineScheduling::kPriorityPreempt);
  EXPECT_EQ(parse("seed: 1\n")->pool.engineScheduling, EngineScheduling::kFcfs);
  EXPECT_NE(parse("pool: {engineScheduling: lifo}\n")
                .diagnostics()
                .toString()
                .find("/pool/engineScheduling"),
            std::string::npos);
  const auto exponential =
      parse("pool: {engineScheduling: priority-preempt, service: exponential}\n");
  ASSERT_FALSE(exponential.ok());
  EXPECT_NE(exponential.diagnostics().toString().find("/pool/engineScheduling"), std::string::npos)
      << exponential.diagnostics().toString();
}

TEST(EngineSchedulingTest, TheReportNamesPreemptionsOnlyWhereServersPreempt) {
  Scenario s = engineScenario(2, 100'000, 50, EngineScheduling::kFcfs);
  EvaluationOptions o;
  o.arms = {testArm("none"), testArm("static-1.0")};
  o.threads = 1;
  const std::string plain = formatJson(evaluate(s, o));
  EXPECT_EQ(plain.find("preemptions"), std::string::npos);
  EXPECT_EQ(plain.find("engineScheduling"), std::string::npos);
  o.arms.push_back(testArm("none+engine"));
  const std::string withEngine = formatJson(evaluate(s, o));
  EXPECT_NE(withEngine.find("\"engineScheduling\": \"priority-preempt\""), std::string::npos);
  EXPECT_NE(withEngine.find("\"preemptionsPerTopRequest\""), std::string::npos);
  EXPECT_NE(withEngine.find("\"recomputedPct\""), std::string::npos);
}

}  // namespace
}  // namespace holdback::sim
