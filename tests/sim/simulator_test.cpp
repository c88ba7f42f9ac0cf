// The discrete-event simulator (src/sim/simulator.hpp): determinism, the M/M/c
// sanity check, the direction of the default scenario's result, and scenario parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "holdback/detector/detectors.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {
namespace {

std::vector<ArmResult> runArms(const Scenario& s, const std::vector<std::string>& names,
                               const RunOptions& options = {}) {
  std::vector<ArmResult> out;
  for (const std::string& name : names) {
    Arm arm;
    EXPECT_TRUE(findArm(name, arm)) << name;
    out.push_back(runArm(s, arm, options));
  }
  return out;
}

const ClassResult& classNamed(const ArmResult& a, const std::string& name) {
  const auto it = std::find_if(a.classes.begin(), a.classes.end(),
                               [&](const ClassResult& c) { return c.name == name; });
  EXPECT_NE(it, a.classes.end()) << name;
  return *it;
}

const WindowStats& windowNamed(const ClassResult& c, const std::string& window) {
  const auto it = std::find_if(c.windows.begin(), c.windows.end(),
                               [&](const WindowStats& w) { return w.window == window; });
  EXPECT_NE(it, c.windows.end()) << window;
  return *it;
}

TEST(SimulatorTest, SameSeedSameTableDifferentSeedDifferentTable) {
  Scenario s = defaultScenario();
  s.durationSeconds = 20.0;
  s.drainSeconds = 5.0;
  s.seed = 7;
  const std::vector<std::string> arms{"none", "stepwise", "soft-reflective"};
  const std::string first = formatTable(s, runArms(s, arms));
  const std::string second = formatTable(s, runArms(s, arms));
  EXPECT_EQ(first, second);
  s.seed = 8;
  EXPECT_NE(first, formatTable(s, runArms(s, arms)));
}

TEST(SimulatorTest, ErlangCFormula) {
  // M/M/1: Wq = rho / (mu - lambda).
  EXPECT_NEAR(erlangCMeanWait(0.5, 1.0, 1), 1.0, 1e-12);
  // c = 2, a = 1 (rho 0.5): C = 1/3, Wq = C / (2 - 1) = 1/3.
  EXPECT_NEAR(erlangCMeanWait(1.0, 1.0, 2), 1.0 / 3.0, 1e-12);
  EXPECT_TRUE(std::isinf(erlangCMeanWait(2.0, 1.0, 2)));
}

// One class, no gating, exponential service, one endpoint with c slots: the server's FCFS queue
// is an M/M/c queue. Mean wait within 10 % of Erlang C (about 48k customers at rho = 0.8; the
// batch-means standard error of the estimate is about 3 %).
TEST(SimulatorTest, MeanWaitMatchesErlangC) {
  Scenario s;
  s.pool.endpoints = 1;
  s.pool.slots = 4;
  s.pool.service = ServiceModel::kExponential;
  s.pool.meanServiceMs = 1000.0;
  s.durationSeconds = 15000.0;
  s.drainSeconds = 0.0;
  s.seed = 3;
  s.classes = {{.name = "only", .arrival = {.process = ArrivalProcess::kPoisson, .rate = 3.2}}};
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const ArmResult r = runArm(s, none);
  const WindowStats& w = windowNamed(r.classes.at(0), "all");
  ASSERT_GT(w.serverWaitMs.count, 40'000u);
  const double expected = erlangCMeanWait(3.2, 1.0, 4) * 1000.0;  // 1.49 s
  EXPECT_NEAR(w.serverWaitMs.mean, expected, 0.10 * expected);
  EXPECT_DOUBLE_EQ(w.queueMs.mean, 0.0);  // no gateway queue without flow control
}

// The default scenario, both detectors: every holdback arm at least halves the interactive TTFT
// p99 of the burst windows against no flow control, and stepwise beats static-1.0 with the
// concurrency detector; the price is batch throughput.
TEST(SimulatorTest, HoldbackProtectsInteractiveLatencyInTheDefaultScenario) {
  for (const DetectorKind detector : {DetectorKind::kUtilization, DetectorKind::kConcurrency}) {
    Scenario s = defaultScenario();
    s.detector = detector;
    const auto arms = runArms(s, {"none", "static-1.0", "stepwise", "sigmoid", "stepwise-active"});
    const double none = windowNamed(classNamed(arms[0], "interactive"), "burst").ttftMs.p99;
    for (std::size_t i = 2; i < arms.size(); ++i) {
      const double p99 = windowNamed(classNamed(arms[i], "interactive"), "burst").ttftMs.p99;
      EXPECT_LT(p99, 0.5 * none) << toString(detector) << " " << arms[i].arm.name;
      // The interactive class gets through during bursts (24 req/s offered).
      EXPECT_GT(windowNamed(classNamed(arms[i], "interactive"), "burst").completedPerSecond, 15.0);
    }
    if (detector == DetectorKind::kConcurrency) {
      const double stat = windowNamed(classNamed(arms[1], "interactive"), "burst").ttftMs.p99;
      const double step = windowNamed(classNamed(arms[2], "interactive"), "burst").ttftMs.p99;
      EXPECT_LT(step, 0.5 * stat);
      const double batchStatic =
          windowNamed(classNamed(arms[1], "batch"), "idle").completedPerSecond;
      const double batchStep = windowNamed(classNamed(arms[2], "batch"), "idle").completedPerSecond;
      EXPECT_LT(batchStep, batchStatic);  // the reserve costs batch throughput in idle windows
      // Showing the policy only the active priorities gives some of it back.
      const double batchActive =
          windowNamed(classNamed(arms[4], "batch"), "idle").completedPerSecond;
      EXPECT_GT(batchActive, batchStep);
    }
  }
}

TEST(SimulatorTest, SeriesAndCsv) {
  Scenario s = defaultScenario();
  s.durationSeconds = 5.0;
  s.drainSeconds = 1.0;
  const auto arms = runArms(s, {"none", "stepwise"}, {.collectSeries = true});
  // 6 s sampled every 100 ms, per arm.
  EXPECT_EQ(arms[1].samples.size(), 61u);
  EXPECT_FALSE(std::isnan(arms[1].samples.back().ceilings[2]));  // batch band ceiling
  const std::string requests = requestsCsv(s, arms);
  const auto rows = static_cast<std::size_t>(std::count(requests.begin(), requests.end(), '\n'));
  EXPECT_EQ(rows, 1 + arms[0].requests.size() + arms[1].requests.size());
  EXPECT_EQ(requests.rfind("arm,class,priority,endpoint,", 0), 0u);
  const std::string intervals = intervalsCsv(s, arms);
  EXPECT_NE(intervals.find("ceiling_batch,queued_batch"), std::string::npos);
  EXPECT_NE(intervals.find(",running,reserve_interactive,reserve_standard,reserve_batch,"
                           "free_slots,free_kv_tokens\n"),
            std::string::npos);
  // The free room in both resources: slots and KV tokens of the pool minus what runs.
  const IntervalSample& last = arms[1].samples.back();
  std::size_t running = 0;
  std::int64_t held = 0;
  for (const std::size_t r : last.running) running += r;
  for (const std::int64_t k : last.kvTokens) held += k;
  ASSERT_EQ(last.kvTokens.size(), static_cast<std::size_t>(s.pool.endpoints));
  EXPECT_GT(held, 0);  // 5 s into the default scenario the pool is busy
  const std::int64_t freeKv = s.pool.endpoints * s.pool.kvCapacityTokens - held;
  const std::size_t freeSlots = static_cast<std::size_t>(s.pool.endpoints * s.pool.slots) - running;
  EXPECT_NE(
      intervals.find("," + std::to_string(freeSlots) + ".000000," + std::to_string(freeKv) + "\n"),
      std::string::npos);
  EXPECT_NE(intervals.find("\nstepwise,5.000000,"), std::string::npos);
  const std::string summary = summaryCsv(arms);
  EXPECT_NE(summary.find("\nstepwise,interactive,100,burst,"), std::string::npos);
  const std::string script = gnuplotScript(s, arms);
  EXPECT_NE(script.find("set output 'bands-stepwise.png'"), std::string::npos);
  EXPECT_EQ(script.find("bands-none.png"), std::string::npos);  // no bands without flow control
  EXPECT_NE(script.find("set output 'ttft-cdf-utilization-interactive.png'"), std::string::npos);
  EXPECT_NE(script.find("set output 'saturation-utilization.png'"), std::string::npos);
  EXPECT_NE(script.find("arms = \"none stepwise\""), std::string::npos);
  const std::string cdf = ttftCdfCsv(s, arms);
  EXPECT_EQ(cdf.rfind("arm,class,ttft_ms,fraction\n", 0), 0u);
  EXPECT_NE(cdf.find(",1.000000\n"), std::string::npos);  // each CDF ends at 1
}

TEST(SimulatorTest, ParseScenarioReadsJsonAndYamlAndReportsEveryProblem) {
  auto yaml = config::parseDocument(R"(
durationSeconds: 10
detector: concurrency
pool: {endpoints: 2, slots: 8, service: exponential, meanServiceMs: 200}
classes:
  - name: chat
    priority: 10
    arrival: {process: on-off, rate: 5, offRate: 0.5, onSeconds: 2, offSeconds: 3}
    inputTokens: {distribution: exponential, mean: 100}
    ttlSeconds: 5
)");
  ASSERT_TRUE(yaml.ok()) << yaml.diagnostics().toString();
  const auto s = parseScenario(yaml->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_EQ(s->durationSeconds, 10.0);
  EXPECT_EQ(s->detector, DetectorKind::kConcurrency);
  EXPECT_EQ(s->pool.endpoints, 2);
  EXPECT_EQ(s->pool.service, ServiceModel::kExponential);
  ASSERT_EQ(s->classes.size(), 1u);
  EXPECT_EQ(s->classes[0].arrival.process, ArrivalProcess::kOnOff);
  EXPECT_EQ(s->classes[0].arrival.offRate, 0.5);
  EXPECT_EQ(s->classes[0].inputTokens.distribution, LengthDistribution::kExponential);

  auto bad = config::parseDocument(R"({"durationSeconds": -1, "pool": {"slots": 0, "x": 1},
      "classes": [{"name": "a", "arrival": {"process": "bursty"}},
                  {"name": "a", "inputTokens": {"distribution": "uniform", "min": 9, "max": 2}}]})");
  ASSERT_TRUE(bad.ok());
  const auto errors = parseScenario(bad->json);
  ASSERT_FALSE(errors.ok());
  const std::string text = errors.diagnostics().toString();
  for (const char* path :
       {"/durationSeconds", "/pool/slots", "/pool/x", "/classes/0/arrival/process",
        "/classes/1/name", "/classes/1/inputTokens/max"}) {
    EXPECT_NE(text.find(std::string(path) + ":"), std::string::npos) << path << "\n" << text;
  }
}

TEST(SimulatorTest, AScenarioTooLargeToHoldIsRejectedBeforeItRuns) {
  // Every key within its range, and 1e6 s at 1e6 req/s is 1e12 requests: an error naming the
  // estimate, the class and the limit, not a run that exhausts memory.
  auto huge = config::parseDocument(R"({"durationSeconds": 1000000,
      "classes": [{"name": "flood", "arrival": {"process": "poisson", "rate": 1000000}},
                  {"name": "small", "arrival": {"process": "poisson", "rate": 1}}]})");
  ASSERT_TRUE(huge.ok());
  const auto rejected = parseScenario(huge->json);
  ASSERT_FALSE(rejected.ok());
  const std::string text = rejected.diagnostics().toString();
  EXPECT_NE(text.find("/durationSeconds:"), std::string::npos) << text;
  EXPECT_NE(text.find("1e+12"), std::string::npos) << text;
  EXPECT_NE(text.find("\"flood\""), std::string::npos) << text;
  EXPECT_NE(text.find("2e+06"), std::string::npos) << text;

  // A closed-loop backlog is bounded by what the pool can complete: 64 slots x 1e6 s at 10 ms a
  // request is far over the limit; the built-in scenarios at their own durations are not.
  Scenario s = defaultScenario();
  EXPECT_TRUE(scenarioSizeError(s).empty()) << scenarioSizeError(s);
  EXPECT_LT(estimatedRequestsPerRun(s), kMaxRequestsPerRun / 10);
  for (const char* name : {"burst-after-idle", "short-bursts", "kv-bound"}) {
    Scenario c;
    ASSERT_TRUE(findScenario(name, c));
    EXPECT_TRUE(scenarioSizeError(c).empty()) << name << ": " << scenarioSizeError(c);
  }
  s.durationSeconds = 1e6;
  EXPECT_GT(estimatedRequestsPerRun(s), kMaxRequestsPerRun);
  EXPECT_NE(scenarioSizeError(s).find("\"batch\""), std::string::npos) << scenarioSizeError(s);
  // An open-loop estimate follows the higher of an on/off class's two rates.
  Scenario one = defaultScenario();
  one.classes.resize(1);
  one.durationSeconds = 100.0;
  one.classes[0].arrival = {.process = ArrivalProcess::kOnOff, .rate = 2.0, .offRate = 7.0};
  EXPECT_DOUBLE_EQ(estimatedRequestsPerRun(one), 700.0);
}

TEST(SimulatorTest, ARunStopsAtItsRequestLimitAndSaysSo) {
  // The backstop behind the estimate: a run that creates maxRequests requests stops there and
  // is marked truncated (holdback simulate then refuses to print partial figures).
  Scenario s = defaultScenario();
  s.durationSeconds = 20.0;
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const ArmResult capped = runArm(s, none, RunOptions{.maxRequests = 50});
  EXPECT_TRUE(capped.truncated);
  std::uint64_t arrived = 0;
  for (const ClassResult& c : capped.classes) arrived += c.arrived;
  EXPECT_LE(arrived, 50u);
  const ArmResult whole = runArm(s, none);
  EXPECT_FALSE(whole.truncated);
  std::uint64_t all = 0;
  for (const ClassResult& c : whole.classes) all += c.arrived;
  EXPECT_GT(all, 50u);
}

// kv-bound: with the batch backlog alone, the servers' KV cache stops admission while slots are
// still free (a server with a queue runs fewer than its 16 slots on average); in
// burst-after-idle, whose batch contexts are shorter, the same backlog keeps every slot busy.
TEST(SimulatorTest, KvBoundFillsTheKvCacheBeforeTheSlots) {
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  // The mean running count of the servers that have a queue, sampled after the ramp.
  auto runningWhileQueued = [&](const char* name) {
    Scenario s;
    EXPECT_TRUE(findScenario(name, s));
    s.durationSeconds = 30.0;
    s.drainSeconds = 0.0;
    const ArmResult r = runArm(s, none, {.collectSeries = true, .onlyClass = 2});
    double sum = 0.0;
    std::size_t n = 0;
    for (const IntervalSample& sample : r.samples) {
      if (sample.time < 15.0) continue;
      for (std::size_t e = 0; e < sample.running.size(); ++e) {
        if (sample.serverQueue[e] == 0) continue;
        sum += static_cast<double>(sample.running[e]);
        ++n;
      }
    }
    EXPECT_GT(n, 0u) << name;
    return n == 0 ? 0.0 : sum / static_cast<double>(n);
  };
  EXPECT_LT(runningWhileQueued("kv-bound"), 13.0);  // 32768 tokens hold ~11 of its requests
  EXPECT_GT(runningWhileQueued("burst-after-idle"), 15.5);
}

TEST(SimulatorTest, ConcurrencyModeSelectsWhatTheConcurrencyDetectorCounts) {
  auto doc = config::parseDocument("detector: concurrency\npool: {concurrencyMode: hybrid}");
  ASSERT_TRUE(doc.ok());
  const auto s = parseScenario(doc->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_EQ(s->pool.concurrencyMode, CountedResource::kHybrid);
  EXPECT_EQ(defaultScenario().pool.concurrencyMode, CountedResource::kRequests);
  for (const CountedResource mode :
       {CountedResource::kRequests, CountedResource::kTokens, CountedResource::kHybrid}) {
    Scenario c = s.value();
    c.pool.concurrencyMode = mode;
    const auto detector = makeDetector(c);
    ASSERT_TRUE(detector.ok()) << detector.diagnostics().toString();
    const auto* concurrency = dynamic_cast<const ConcurrencyDetector*>(detector->get());
    ASSERT_NE(concurrency, nullptr);
    EXPECT_EQ(toString(concurrency->options().mode), toString(mode));
    EXPECT_EQ(concurrency->options().maxConcurrency, c.pool.slots);
    if (mode != CountedResource::kRequests) {
      EXPECT_EQ(concurrency->options().maxTokenConcurrency, c.pool.kvCapacityTokens);
    }
  }
  auto bad = config::parseDocument("pool: {concurrencyMode: kv}");
  ASSERT_TRUE(bad.ok());
  const auto error = parseScenario(bad->json);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.diagnostics().toString().find("/pool/concurrencyMode"), std::string::npos)
      << error.diagnostics().toString();
}

// The kv-bound failure the recommended arm fixes: with the concurrency detector counting
// requests only, reservation+evict dispatches interactive requests at once onto servers whose
// slots are free but whose KV cache the batch holds (TTFT p99 in idle windows many times the
// unloaded); recommended counts KV tokens too and routes where a request starts now.
TEST(SimulatorTest, RecommendedKeepsInteractiveFastOnAKvBoundPool) {
  Scenario s;
  ASSERT_TRUE(findScenario("kv-bound", s));
  s.detector = DetectorKind::kConcurrency;
  s.durationSeconds = 60.0;  // one idle and one burst phase
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const double unloaded =
      windowNamed(classNamed(runArm(s, none, {.onlyClass = 0}), "interactive"), "idle").ttftMs.p99;
  ASSERT_GT(unloaded, 0.0);
  const auto arms = runArms(s, {"reservation+evict", "recommended", "static-1.0"});
  const auto idleRatio = [&](const ArmResult& a) {
    return windowNamed(classNamed(a, "interactive"), "idle").ttftMs.p99 / unloaded;
  };
  EXPECT_GT(idleRatio(arms[0]), 3.0);
  EXPECT_LE(idleRatio(arms[1]), 1.5);
  // ... while batch keeps most of static-1.0's idle output.
  const auto idleBatch = [&](const ArmResult& a) {
    return windowNamed(classNamed(a, "batch"), "idle").outputTokensPerSecond;
  };
  EXPECT_GE(idleBatch(arms[1]), 0.85 * idleBatch(arms[2]));
}

}  // namespace
}  // namespace holdback::sim
