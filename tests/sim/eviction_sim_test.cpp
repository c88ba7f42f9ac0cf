// In-flight eviction in the simulator: the *+evict arms run the library's
// eviction controller, the simulated host aborts each victim on its server after
// pool.revocationLatencyMs and confirms with release(), and the victim's client retries it.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "holdback/config/json.hpp"
#include "sim/arm_lookup.hpp"
#include "sim/evaluate.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {
namespace {

// burst-after-idle shortened: the batch backlog fills the pool, then interactive bursts into it.
Scenario shortScenario(DetectorKind detector) {
  Scenario s;
  EXPECT_TRUE(findScenario("burst-after-idle", s));
  s.durationSeconds = 20.0;
  s.drainSeconds = 5.0;
  s.classes.front().arrival.onSeconds = 5.0;
  s.classes.front().arrival.offSeconds = 5.0;
  s.detector = detector;
  s.pool.dispatchLedger = true;  // the utilization detector reads the ledger, as the other arms
  s.pool.slotTerm = true;
  return s;
}

ArmResult run(const Scenario& s, const std::string& name) {
  return runArm(s, testArm(name), RunOptions{.collectSeries = true});
}

TEST(EvictionSimTest, EvictionArmsExistAndTheOthersHaveNone) {
  for (const char* name : {"static-1.0+evict", "stepwise+evict", "reservation+evict",
                           "reservation+evict-hol", "recommended"}) {
    EXPECT_TRUE(testArm(name).eviction) << name;
  }
  // recommended restores its reserve as reservation+evict does.
  EXPECT_TRUE(testArm("recommended").restoreReserve);
  EXPECT_FALSE(testArm("recommended").revokeOnBlock);
  // reservation+evict restores its reserve instead of upstream's head-of-line trigger.
  EXPECT_TRUE(testArm("reservation+evict").restoreReserve);
  EXPECT_FALSE(testArm("reservation+evict").revokeOnBlock);
  EXPECT_TRUE(testArm("reservation+evict-hol").revokeOnBlock);
  EXPECT_FALSE(testArm("reservation+evict-hol").restoreReserve);
  for (const Arm& a : allArms()) {
    if (a.name.find("+evict") == std::string::npos && a.name != "recommended") {
      EXPECT_FALSE(a.eviction) << a.name;
    }
  }
  EXPECT_EQ(defaultScenario().pool.revocationLatencyMs, 50.0);
  const ArmResult plain = run(shortScenario(DetectorKind::kConcurrency), "static-1.0");
  EXPECT_EQ(plain.revocationsIssued, 0u);
  EXPECT_EQ(plain.inFlightEvictions, 0u);
  EXPECT_EQ(plain.wastedTokens, 0u);
  EXPECT_EQ(plain.repaidPrefillTokens, 0u);
}

// Every revoked request ends once (as revoked), is retried exactly once by its client with the
// same lengths at the moment of its abort, and the counters agree with the per-request records.
void expectConsistent(const ArmResult& r, const Scenario& s) {
  const auto n = static_cast<std::int64_t>(r.requests.size());
  std::map<std::int64_t, int> retries;
  std::uint64_t revoked = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const RequestRecord& q = r.requests[static_cast<std::size_t>(i)];
    if (q.outcome == "revoked") {
      ++revoked;
      EXPECT_FALSE(std::isnan(q.dispatched)) << i;  // only dispatched work is revoked
      EXPECT_FALSE(std::isnan(q.finished)) << i;
      EXPECT_LT(s.classes[q.classIndex].priority, 0) << i;  // sheddable-eviction-filter
    }
    if (q.retryOf < 0) continue;
    ASSERT_LT(q.retryOf, i);
    ++retries[q.retryOf];
    const RequestRecord& o = r.requests[static_cast<std::size_t>(q.retryOf)];
    EXPECT_EQ(o.outcome, "revoked") << i;
    EXPECT_EQ(o.classIndex, q.classIndex);
    EXPECT_EQ(o.inputTokens, q.inputTokens);
    EXPECT_EQ(o.outputTokens, q.outputTokens);
    EXPECT_EQ(o.finished, q.arrival);  // the client retries at once
  }
  EXPECT_EQ(revoked, r.inFlightEvictions);
  EXPECT_EQ(retries.size(), revoked);  // every revoked request is retried ...
  for (const auto& [id, count] : retries) EXPECT_EQ(count, 1) << id;  // ... exactly once
  // Every revocation the controller issued ended: confirmed by the abort's release (or by the
  // victim's own completion inside the latency), none timed out; an abort needs a revocation.
  EXPECT_LE(r.inFlightEvictions, r.revocationsIssued);
  EXPECT_EQ(r.revocationsConfirmed + r.revocationsTimedOut, r.revocationsIssued);
  EXPECT_EQ(r.revocationsTimedOut, 0u);
  // Per class (measured requests) never more than the run's totals.
  std::uint64_t classRevoked = 0, classWasted = 0, classRepaid = 0;
  for (const ClassResult& c : r.classes) {
    classRevoked += c.revoked;
    classWasted += c.wastedTokens;
    classRepaid += c.repaidPrefillTokens;
    EXPECT_LE(c.wastedTokens, c.generatedTokens) << c.name;
  }
  EXPECT_LE(classRevoked, r.inFlightEvictions);
  EXPECT_LE(classWasted, r.wastedTokens);
  EXPECT_LE(classRepaid, r.repaidPrefillTokens);
}

TEST(EvictionSimTest, RevokedRequestsEndOnceAndAreRetriedOnBothDetectors) {
  for (const DetectorKind d : {DetectorKind::kConcurrency, DetectorKind::kUtilization}) {
    const Scenario s = shortScenario(d);
    for (const char* name :
         {"static-1.0+evict", "stepwise+evict", "reservation+evict", "reservation+evict-hol"}) {
      SCOPED_TRACE(std::string(name) + " / " + std::string(toString(d)));
      const ArmResult r = run(s, name);
      expectConsistent(r, s);
    }
    // static-1.0 fills the pool with batch: the interactive bursts block and trigger evictions.
    const ArmResult r = run(s, "static-1.0+evict");
    EXPECT_GT(r.inFlightEvictions, 0u) << toString(d);
    EXPECT_GT(r.wastedTokens + r.repaidPrefillTokens, 0u) << toString(d);
  }
}

// A class's figures in one window ("burst", "idle", "onset", "settled").
WindowStats windowOf(const ClassResult& c, const char* name) {
  for (const WindowStats& w : c.windows) {
    if (w.window == name) return w;
  }
  ADD_FAILURE() << "no window " << name << " for " << c.name;
  return WindowStats{};
}

// Reserve restoration repairs a dip of the reserve within a revocation's lead time, so
// reservation+evict runs the policy without its hold (docs/guide/eviction.md, "Restoration replaces
// the hold"): on the same traffic batch gets more of the bursts than with the hold, and interactive
// requests keep their latency (settled bursts within 1.5x of the arm with the hold).
TEST(EvictionSimTest, RestorationWithoutTheHoldGivesBatchMoreOfTheBursts) {
  const Scenario s = shortScenario(DetectorKind::kConcurrency);
  const Arm noHold = testArm("reservation+evict");
  ReservationOptions switched;
  ASSERT_TRUE(noHold.reservationSwitches);
  noHold.reservationSwitches(s, switched);
  ASSERT_FALSE(switched.holdReserve);
  ASSERT_EQ(noHold.policy(s).at("parameters").at("minReserve"), 8.0);
  // The hold's effect alone, at the policy's default idle reserve (with the arm's larger idle
  // reserve the hold has less to keep beyond it).
  const auto variant = [base = noHold.policy](const Scenario& sc) {
    config::Json doc = base(sc);
    doc["parameters"]["minReserve"] = 1.0;
    return doc;
  };
  const auto hold = [](bool on) {
    return [on](const Scenario&, ReservationOptions& o) { o.holdReserve = on; };
  };
  Arm withoutHold = noHold;
  withoutHold.policy = variant;
  withoutHold.reservationSwitches = hold(false);
  Arm withHold = noHold;
  withHold.policy = variant;
  withHold.reservationSwitches = hold(true);
  const ArmResult a = runArm(s, withoutHold, RunOptions{.collectSeries = true});
  const ArmResult b = runArm(s, withHold);
  const ClassResult& batchA = a.classes.back();
  const ClassResult& batchB = b.classes.back();
  ASSERT_LT(batchA.priority, 0);
  EXPECT_GT(windowOf(batchA, "burst").outputTokensPerSecond,
            1.05 * windowOf(batchB, "burst").outputTokensPerSecond);
  const double settledA = windowOf(a.classes.front(), "settled").ttftMs.p99;
  const double settledB = windowOf(b.classes.front(), "settled").ttftMs.p99;
  EXPECT_LE(settledA, 1.5 * settledB) << settledA << " vs " << settledB;
  expectConsistent(a, s);
}

// `base` with its policy's minReserve set to `requests` whatever the scenario.
Arm withMinReserve(const Arm& base, double requests) {
  Arm a = base;
  a.policy = [policy = base.policy, requests](const Scenario& sc) {
    config::Json doc = policy(sc);
    doc["parameters"]["minReserve"] = requests;
    return doc;
  };
  return a;
}

// A burst's first lead time is what restoration cannot cover: the arm's idle reserve (8 requests)
// absorbs it. On the same traffic the interactive onset p99 is lower than with the policy's
// default reserve of one request, and batch still keeps >= 90 % of that variant's idle goodput.
TEST(EvictionSimTest, TheIdleReserveAbsorbsTheBurstOnset) {
  for (const DetectorKind d : {DetectorKind::kConcurrency, DetectorKind::kUtilization}) {
    SCOPED_TRACE(std::string(toString(d)));
    const Scenario s = shortScenario(d);
    const Arm shipped = testArm("reservation+evict");
    const ArmResult a = runArm(s, shipped);
    const ArmResult b = runArm(s, withMinReserve(shipped, 1.0));
    const double onsetA = windowOf(a.classes.front(), "onset").ttftMs.p99;
    const double onsetB = windowOf(b.classes.front(), "onset").ttftMs.p99;
    EXPECT_LT(onsetA, onsetB);
    EXPECT_GE(windowOf(a.classes.back(), "idle").outputTokensPerSecond,
              0.9 * windowOf(b.classes.back(), "idle").outputTokensPerSecond);
  }
}

// The idle reserve is an eighth of the pool's slots, so the same shape of traffic on a pool four
// times as large (16 servers, every rate and the backlog x4) keeps its onset: with the 64-slot
// pool's 8 requests the larger pool's burst onset waited (docs/guide/eviction.md, "Pools of other
// sizes"), and on a pool half as large the scaled reserve keeps more idle goodput than 8 would.
TEST(EvictionSimTest, TheIdleReserveScalesWithThePool) {
  const auto scaled = [](int endpoints, double factor) {
    Scenario s = shortScenario(DetectorKind::kUtilization);
    s.pool.endpoints = endpoints;
    for (TrafficClass& c : s.classes) {
      c.arrival.rate *= factor;
      c.arrival.offRate *= factor;
      c.arrival.backlog = std::int64_t(double(c.arrival.backlog) * factor);
    }
    return s;
  };
  const Arm shipped = testArm("reservation+evict");
  const Arm fixed8 = withMinReserve(shipped, 8.0);
  EXPECT_EQ(shipped.policy(scaled(4, 1.0))["parameters"]["minReserve"], 8.0);
  EXPECT_EQ(shipped.policy(scaled(16, 4.0))["parameters"]["minReserve"], 32.0);
  EXPECT_EQ(shipped.policy(scaled(2, 0.5))["parameters"]["minReserve"], 4.0);
  {
    const Scenario large = scaled(16, 4.0);
    const ArmResult a = runArm(large, shipped);
    const ArmResult b = runArm(large, fixed8);
    EXPECT_LT(windowOf(a.classes.front(), "onset").ttftMs.p99,
              windowOf(b.classes.front(), "onset").ttftMs.p99);
  }
  {
    const Scenario small = scaled(2, 0.5);
    const ArmResult a = runArm(small, shipped);
    const ArmResult b = runArm(small, fixed8);
    EXPECT_GT(windowOf(a.classes.back(), "idle").outputTokensPerSecond,
              windowOf(b.classes.back(), "idle").outputTokensPerSecond);
  }
}

// Eviction frees slots for the blocked band: on the same traffic static-1.0+evict serves the
// interactive bursts faster than static-1.0 (concurrency detector, fresh counts).
TEST(EvictionSimTest, EvictionShortensTheInteractiveWaitOfStaticOne) {
  const Scenario s = shortScenario(DetectorKind::kConcurrency);
  const ArmResult plain = runArm(s, testArm("static-1.0"));
  const ArmResult evict = runArm(s, testArm("static-1.0+evict"));
  auto burstP99 = [](const ArmResult& r) {
    for (const WindowStats& w : r.classes.front().windows) {
      if (w.window == "burst") return w.ttftMs.p99;
    }
    return kNoValue;
  };
  EXPECT_LT(burstP99(evict), burstP99(plain));
}

// The revocation latency is the time from evict to the slot being free: a victim is revoked at
// or after its dispatch, so its abort lands at least the latency after its dispatch.
TEST(EvictionSimTest, AbortsLandAfterTheRevocationLatency) {
  Scenario s = shortScenario(DetectorKind::kConcurrency);
  s.pool.revocationLatencyMs = 200.0;
  const ArmResult r = run(s, "static-1.0+evict");
  ASSERT_GT(r.inFlightEvictions, 0u);
  for (const RequestRecord& q : r.requests) {
    if (q.outcome != "revoked") continue;
    EXPECT_GE(q.finished - q.dispatched, 0.2 - 1e-9);  // revoked after dispatch, aborted 200 ms on
  }
  expectConsistent(r, s);
}

TEST(EvictionSimTest, RevocationLatencyParsesAndBadValuesNameTheirPath) {
  auto good = config::parseDocument("pool: {revocationLatencyMs: 120}");
  ASSERT_TRUE(good.ok()) << good.diagnostics().toString();
  const auto s = parseScenario(good->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_EQ(s->pool.revocationLatencyMs, 120.0);

  auto bad = config::parseDocument(R"({"pool": {"revocationLatencyMs": -1}})");
  ASSERT_TRUE(bad.ok());
  const auto errors = parseScenario(bad->json);
  ASSERT_FALSE(errors.ok());
  const std::string text = errors.diagnostics().toString();
  EXPECT_NE(text.find("/pool/revocationLatencyMs"), std::string::npos) << text;
  EXPECT_NE(text.find(">= 0"), std::string::npos) << text;
}

TEST(EvictionSimTest, RestoreBurstMemoryParsesAndBadValuesNameTheirPath) {
  EXPECT_EQ(defaultScenario().restoreBurstMemorySeconds, 0.0);  // off unless asked for
  auto good = config::parseDocument("restoreBurstMemorySeconds: 30");
  ASSERT_TRUE(good.ok()) << good.diagnostics().toString();
  const auto s = parseScenario(good->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_EQ(s->restoreBurstMemorySeconds, 30.0);

  auto bad = config::parseDocument(R"({"restoreBurstMemorySeconds": -2})");
  ASSERT_TRUE(bad.ok());
  const auto errors = parseScenario(bad->json);
  ASSERT_FALSE(errors.ok());
  const std::string text = errors.diagnostics().toString();
  EXPECT_NE(text.find("/restoreBurstMemorySeconds"), std::string::npos) << text;
  EXPECT_NE(text.find("-2.0 must be >= 0"), std::string::npos) << text;
}

// The evaluation carries the figures to the JSON report and the summary table.
TEST(EvictionSimTest, ReportsCarryTheEvictionFigures) {
  const Scenario s = shortScenario(DetectorKind::kConcurrency);
  EvaluationOptions o;
  o.seeds = {1, 2};
  o.detectors = {DetectorKind::kConcurrency};
  o.arms = {testArm("static-1.0"), testArm("static-1.0+evict")};
  o.threads = 2;
  const Evaluation e = evaluate(s, o);
  const config::Json doc = config::Json::parse(formatJson(e));
  const config::Json& a = doc["reports"][0]["arms"][1];
  EXPECT_EQ(a["name"], "static-1.0+evict");
  EXPECT_EQ(a["eviction"], true);
  EXPECT_GT(a["evictions"].get<double>(), 0.0);
  EXPECT_GT(a["evictionsPerTopRequest"].get<double>(), 0.0);
  EXPECT_GE(a["revocationsIssued"].get<double>(), a["evictions"].get<double>());
  const config::Json& batch = a["classes"][2];
  EXPECT_EQ(batch["name"], "batch");
  EXPECT_GT(batch["revoked"].get<double>(), 0.0);
  EXPECT_GT(batch["wastedPct"].get<double>(), 0.0);
  EXPECT_LT(batch["wastedPct"].get<double>(), 100.0);
  const std::string text = formatSummary(e);
  EXPECT_NE(text.find("in-flight eviction (revocation latency 50 ms)"), std::string::npos) << text;
  const std::string csv = summaryCsv(e.reports[0].firstSeed);
  EXPECT_NE(csv.find(",revoked,wasted_tokens,repaid_prefill_tokens,generated_tokens\n"),
            std::string::npos);
}

}  // namespace
}  // namespace holdback::sim
