// The demand estimator's rise significance (DemandSmoothing::riseSignificance), its bursts
// (DemandEstimator::inBurst), and the reservation policy's protectiveStart option.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

// Poisson arrivals at `rate` per second in 1 ms steps for `seconds`; returns the mean of the
// arrival-rate estimate over the last `measured` seconds.
double meanEstimate(DemandEstimator& estimator, std::mt19937& rng, double rate, double seconds,
                    double measured) {
  std::poisson_distribution<int> per_step(rate * 0.001);
  const int steps = static_cast<int>(seconds * 1000.0);
  const int from = steps - static_cast<int>(measured * 1000.0);
  double sum = 0.0;
  for (int step = 0; step < steps; ++step) {
    estimator.update(0.001, per_step(rng), 0.0, 0.0);
    if (step >= from) sum += estimator.demand().arrivalRate;
  }
  return sum / (measured * 1000.0);
}

// Seconds until the estimate first reaches `level` under Poisson arrivals at `rate`.
double secondsToReach(DemandEstimator& estimator, std::mt19937& rng, double rate, double level) {
  std::poisson_distribution<int> per_step(rate * 0.001);
  for (int step = 1; step <= 10'000; ++step) {
    estimator.update(0.001, per_step(rng), 0.0, 0.0);
    if (estimator.demand().arrivalRate >= level) return step * 0.001;
  }
  return 10.0;
}

double steadyMean(double rate, double z) {
  std::mt19937 rng(7);
  DemandEstimator estimator({.rise = 150ms, .decay = 1s, .riseSignificance = z});
  return meanEstimate(estimator, rng, rate, 60.0, 50.0) / rate;
}

TEST(DemandRiseSignificance, ASteadyRateReadsCloserToItselfThanItsNoiseEnvelope) {
  // 24 req/s averaged over 150 ms is about 3.6 arrivals: following every rise at once and every
  // fall over 1 s sits well above the rate (1.27x; the file comment's table).
  for (double rate : {4.0, 24.0, 100.0}) {
    const double every = steadyMean(rate, 0.0);
    const double z15 = steadyMean(rate, 1.5);
    const double z3 = steadyMean(rate, 3.0);
    EXPECT_GT(every, 1.1) << rate << " req/s: without the test the estimate sits above the rate";
    EXPECT_LT(z15, every - 0.05) << rate << " req/s";
    EXPECT_LT(z3, z15) << rate << " req/s";
    EXPECT_GT(z3, 0.95) << rate << " req/s";
  }
  EXPECT_NEAR(steadyMean(24.0, 3.0), 1.0, 0.1);
}

TEST(DemandRiseSignificance, ABurstIsStillSeenWithinAFewRiseTimes) {
  // 1 req/s for 10 s, then 24 req/s: the jump is many deviations above the lull's noise.
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    DemandEstimator significant({.rise = 150ms, .decay = 1s, .riseSignificance = 1.5});
    meanEstimate(significant, rng, 1.0, 10.0, 1.0);
    EXPECT_LT(significant.demand().arrivalRate, 5.0) << "seed " << seed;
    EXPECT_LT(secondsToReach(significant, rng, 24.0, 12.0), 0.6) << "seed " << seed;
  }
}

TEST(DemandRiseSignificance, ZeroFollowsEveryRiseAsBefore) {
  // The default (0) and an explicit 0 give the same estimates step by step.
  std::mt19937 a(3);
  std::mt19937 b(3);
  DemandEstimator plain({.rise = 150ms, .decay = 1s});
  DemandEstimator zero({.rise = 150ms, .decay = 1s, .riseSignificance = 0.0});
  std::poisson_distribution<int> pa(0.024);
  std::poisson_distribution<int> pb(0.024);
  for (int step = 0; step < 2000; ++step) {
    plain.update(0.001, pa(a), 1.0, 0.0);
    zero.update(0.001, pb(b), 1.0, 0.0);
    ASSERT_EQ(plain.demand().arrivalRate, zero.demand().arrivalRate) << step;
  }
}

// Poisson arrivals at `rate` per second in 1 ms steps for `seconds`, following bursts with
// significance `z`; returns the share of the steps in a burst.
double burstShare(DemandEstimator& estimator, std::mt19937& rng, double rate, double seconds,
                  double z) {
  std::poisson_distribution<int> per_step(rate * 0.001);
  const int steps = static_cast<int>(seconds * 1000.0);
  int in = 0;
  for (int step = 0; step < steps; ++step) {
    estimator.update(0.001, per_step(rng), 0.0, 0.0, z);
    in += estimator.inBurst() ? 1 : 0;
  }
  return static_cast<double>(in) / steps;
}

// Seconds until inBurst() first reads `state` under Poisson arrivals at `rate` (10 s at most).
double secondsUntilBurst(DemandEstimator& estimator, std::mt19937& rng, double rate, double z,
                         bool state) {
  std::poisson_distribution<int> per_step(rate * 0.001);
  for (int step = 1; step <= 10'000; ++step) {
    estimator.update(0.001, per_step(rng), 0.0, 0.0, z);
    if (estimator.inBurst() == state) return step * 0.001;
  }
  return 10.0;
}

TEST(DemandBurst, ABurstLastsWhileTheRateStaysUpAndTheNoiseOfASteadyRateIsNone) {
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    DemandEstimator e({.rise = 150ms, .decay = 1s, .riseSignificance = 1.5});
    // The traffic's start from nothing is a burst until the base has followed it (60 s).
    burstShare(e, rng, 5.5, 120.0, 3.0);
    EXPECT_LT(burstShare(e, rng, 5.5, 60.0, 3.0), 0.05) << "seed " << seed;
    // 24 req/s: seen within half a second (the long average rises too), and held for the 30 s
    // it lasts.
    EXPECT_LT(secondsUntilBurst(e, rng, 24.0, 3.0, true), 0.6) << "seed " << seed;
    EXPECT_GT(burstShare(e, rng, 24.0, 30.0, 3.0), 0.99) << "seed " << seed;
    // Back to 1 req/s: over within a few decay times.
    EXPECT_LT(secondsUntilBurst(e, rng, 1.0, 3.0, false), 3.0) << "seed " << seed;
  }
}

TEST(DemandBurst, ZeroSignificanceFollowsNoBurstAndNeverChangesTheEstimate) {
  std::mt19937 a(5);
  std::mt19937 b(5);
  DemandEstimator plain({.rise = 150ms, .decay = 1s, .riseSignificance = 1.5});
  DemandEstimator bursts({.rise = 150ms, .decay = 1s, .riseSignificance = 1.5});
  std::poisson_distribution<int> pa(0.001);
  std::poisson_distribution<int> pb(0.001);
  bool seen = false;
  for (int step = 0; step < 20'000; ++step) {
    if (step == 10'000) pa = pb = std::poisson_distribution<int>(0.024);  // a burst
    plain.update(0.001, pa(a), 1.0, 0.0);
    bursts.update(0.001, pb(b), 1.0, 0.0, 3.0);
    ASSERT_FALSE(plain.inBurst()) << step;
    seen = seen || bursts.inBurst();
    ASSERT_EQ(plain.demand().arrivalRate, bursts.demand().arrivalRate) << step;
  }
  EXPECT_TRUE(seen);
}

std::unique_ptr<ReservationPolicy> makeStartPolicy(bool protective) {
  auto result = ReservationPolicy::create(
      {.epsilon = 0.01, .minCeiling = 0.25, .minReserve = 4.0, .protectiveStart = protective});
  EXPECT_TRUE(result.ok()) << result.diagnostics().toString();
  return std::move(result).value();
}

TEST(ReservationProtectiveStart, UnknownTurnoverHoldsAtMinCeilingOrKeepsTheFloors) {
  const std::vector<Priority> priorities{10, -1};
  // Arrivals above, nothing completed yet (no completion rate, no holding time).
  const std::vector<BandDemand> demand{{.arrivalRate = 24.0, .inFlight = 12.0}, {.inFlight = 40.0}};
  const DemandView view{.bands = demand, .requestUnit = 1.0 / 64};
  std::vector<double> ceilings(2, 1.0);
  makeStartPolicy(true)->computeLimit(0.8, priorities, ceilings, view);
  EXPECT_DOUBLE_EQ(ceilings[1], 0.25);  // protective: minCeiling
  makeStartPolicy(false)->computeLimit(0.8, priorities, ceilings, view);
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - 4.0 / 64);  // the floor: minReserve
  // Once completions are measured both size the same reserve.
  std::vector<BandDemand> measured = demand;
  measured[0].completionRate = 10.0;
  measured[1].completionRate = 20.0;
  const DemandView known{.bands = measured, .requestUnit = 1.0 / 64};
  std::vector<double> protective(2, 1.0);
  std::vector<double> floors(2, 1.0);
  makeStartPolicy(true)->computeLimit(0.8, priorities, protective, known);
  makeStartPolicy(false)->computeLimit(0.8, priorities, floors, known);
  EXPECT_EQ(protective[1], floors[1]);
  EXPECT_LT(protective[1], 1.0 - 4.0 / 64);
}

}  // namespace
}  // namespace holdback

namespace holdback::config {
namespace {

Result<std::shared_ptr<UsageLimitPolicy>> loadNoiseParams(const std::string& parameters) {
  auto parsed =
      parseJson(R"({"type":"reservation-holdback-policy","parameters":)" + parameters + "}");
  EXPECT_TRUE(parsed.ok());
  return loadUsageLimitPolicy(parsed.value(), builtinPolicyRegistry());
}

TEST(ReservationNoiseConfig, LoadsRiseSignificanceAndProtectiveStart) {
  auto loaded = loadNoiseParams(R"({"riseSignificance":1.5,"protectiveStart":false})");
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const auto& options = dynamic_cast<const ReservationPolicy&>(*loaded.value()).options();
  EXPECT_EQ(options.smoothing.riseSignificance, 1.5);
  EXPECT_FALSE(options.protectiveStart);
  EXPECT_EQ(loaded.value()->demandSmoothing().riseSignificance, 1.5);
  auto defaults = loadNoiseParams("{}");
  ASSERT_TRUE(defaults.ok());
  const auto& d = dynamic_cast<const ReservationPolicy&>(*defaults.value()).options();
  EXPECT_EQ(d.smoothing.riseSignificance, 0.0);
  EXPECT_TRUE(d.protectiveStart);
}

TEST(ReservationNoiseConfig, BadValuesAreReportedTogetherWithTheirPaths) {
  auto loaded = loadNoiseParams(R"({"riseSignificance":-1,"protectiveStart":"no"})");
  ASSERT_FALSE(loaded.ok());
  const std::string text = loaded.diagnostics().toString();
  EXPECT_NE(text.find("/parameters/riseSignificance: -1.0 is outside [0, 10]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("/parameters/protectiveStart"), std::string::npos) << text;
  auto high = loadNoiseParams(R"({"riseSignificance":11})");
  ASSERT_FALSE(high.ok());
  EXPECT_NE(high.diagnostics().toString().find("11.0 is outside [0, 10]"), std::string::npos);
  auto text_value = loadNoiseParams(R"({"riseSignificance":"high"})");
  ASSERT_FALSE(text_value.ok());
  EXPECT_NE(text_value.diagnostics().toString().find("/parameters/riseSignificance"),
            std::string::npos);
}

}  // namespace
}  // namespace holdback::config
