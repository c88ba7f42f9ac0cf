// The reference vectors of upstream-reference.md §2 and the worked examples of the ceiling-engine
// issue, run against the built-in policies.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

std::vector<double> run(UsageLimitPolicy& policy, double saturation,
                        const std::vector<Priority>& priorities) {
  std::vector<double> ceilings(priorities.size(), 1.0);
  policy.computeLimit(saturation, priorities, ceilings);
  return ceilings;
}

void expectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                double tolerance = 1e-9) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "index " << i;
  }
}

std::unique_ptr<PriorityHoldbackPolicy> holdback(PriorityHoldbackOptions options) {
  auto made = PriorityHoldbackPolicy::create(std::move(options));
  EXPECT_TRUE(made.ok()) << made.diagnostics().toString();
  return std::move(made).value();
}

std::unique_ptr<PriorityHoldbackPolicy> linear(HoldbackStrategy strategy, double min, double max) {
  return holdback({.strategy = strategy, .minCeiling = min, .maxCeiling = max});
}

constexpr auto kRank = HoldbackStrategy::kStepwiseSpread;
constexpr auto kValue = HoldbackStrategy::kLinearProportional;

// ---- §2.1 static-usage-limit-policy -----------------------------------------------------------

TEST(StaticUsageLimitPolicyTest, DefaultThresholdIsOne) {
  auto policy = std::move(StaticUsageLimitPolicy::create()).value();
  expectNear(run(*policy, 0.5, {0}), {1.0});
}

TEST(StaticUsageLimitPolicyTest, ThresholdIgnoresSaturationAndPriorities) {
  auto policy = std::move(StaticUsageLimitPolicy::create({.threshold = 0.8})).value();
  for (const double s : {0.0, 0.5, 1.0}) {
    for (const Priority p : {0, 1, 5}) expectNear(run(*policy, s, {p}), {0.8});
  }
  expectNear(run(*policy, 0.3, {100, 0, -5}), {0.8, 0.8, 0.8});
}

TEST(StaticUsageLimitPolicyTest, ThresholdHalfGatesAtHalfSaturation) {
  auto policy = std::move(StaticUsageLimitPolicy::create({.threshold = 0.5})).value();
  const auto ceilings = run(*policy, 0.5, {0});
  EXPECT_TRUE(isGated(0.5, ceilings[0]));
  EXPECT_FALSE(isGated(0.49, ceilings[0]));
}

TEST(StaticUsageLimitPolicyTest, RejectsThresholdOutsideZeroOne) {
  for (const double bad : {0.0, -0.1, 1.0000001, std::numeric_limits<double>::quiet_NaN()}) {
    const auto made = StaticUsageLimitPolicy::create({.threshold = bad});
    ASSERT_FALSE(made.ok()) << bad;
    EXPECT_EQ(made.diagnostics().all().front().path, "/threshold");
  }
  EXPECT_TRUE(StaticUsageLimitPolicy::create({.threshold = 1.0}).ok());
  EXPECT_TRUE(StaticUsageLimitPolicy::create({.threshold = 1e-9}).ok());
}

// ---- §2.2 priority-holdback-policy ------------------------------------------------------------

TEST(PriorityHoldbackVectorsTest, SinglePriorityGetsMaxCeiling) {
  expectNear(run(*linear(kRank, 0.5, 1.0), 0.7, {10}), {1.0});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0.7, {10}), {1.0});
  expectNear(run(*linear(kRank, 0.5, 0.9), 0.7, {10}), {0.9});
  expectNear(run(*linear(kValue, 0.5, 0.9), 0.7, {10}), {0.9});
}

TEST(PriorityHoldbackVectorsTest, EmptyListWritesNothing) {
  auto policy = linear(kRank, 0.5, 1.0);
  std::vector<double> ceilings;
  policy->computeLimit(0.5, {}, ceilings);
  EXPECT_TRUE(ceilings.empty());
  // A non-empty buffer with no priorities keeps its pre-filled values.
  std::vector<double> buffer{1.0, 1.0};
  policy->computeLimit(0.5, {}, buffer);
  EXPECT_EQ(buffer, (std::vector<double>{1.0, 1.0}));
}

TEST(PriorityHoldbackVectorsTest, RankDomain) {
  expectNear(run(*linear(kRank, 0.5, 1.0), 0, {100, 10}), {1.0, 0.5});
  expectNear(run(*linear(kRank, 0.5, 1.0), 0, {100, 50, 10}), {1.0, 0.75, 0.5});
  expectNear(run(*linear(kRank, 0.5, 1.0), 0, {100, 75, 50, 10}),
             {1.0, 0.8333333333333334, 0.6666666666666667, 0.5});
  expectNear(run(*linear(kRank, 0.5, 1.0), 0, {1000, 2, 1}), {1.0, 0.75, 0.5});
  expectNear(run(*linear(kRank, 0.2, 0.9), 0, {50, 40, 30, 20, 10}),
             {0.9, 0.7250000000000001, 0.55, 0.3750000000000001, 0.20000000000000007});
  expectNear(run(*linear(kRank, 0.0, 1.0), 0, {10, 5, 1}), {1.0, 0.5, 0.0});
  expectNear(run(*linear(kRank, 0.8, 0.9), 0, {10, 5, 1}), {0.9, 0.8500000000000001, 0.8});
}

TEST(PriorityHoldbackVectorsTest, RankDomainIsBitExact) {
  // The reference's evaluation order cMax - i * spread / n reproduces these digits exactly.
  const auto c = run(*linear(kRank, 0.2, 0.9), 0, {50, 40, 30, 20, 10});
  EXPECT_EQ(c[1], 0.7250000000000001);
  EXPECT_EQ(c[3], 0.3750000000000001);
  EXPECT_EQ(c[4], 0.20000000000000007);
}

TEST(PriorityHoldbackVectorsTest, ValueDomain) {
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {100, 10}), {1.0, 0.5});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {90, 50, 10}), {1.0, 0.75, 0.5});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {100, 50, 10}), {1.0, 0.7222222222222222, 0.5});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {100, 2, 1}), {1.0, 0.5050505050505051, 0.5});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {10, 10, 10}), {1.0, 1.0, 1.0});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {100, 10, 10}), {1.0, 0.5, 0.5});
  expectNear(run(*linear(kValue, 0.2, 0.9), 0, {50, 40, 30, 20, 10}),
             {0.8999999999999999, 0.7249999999999999, 0.55, 0.375, 0.2});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {10, -5, -20}), {1.0, 0.75, 0.5});
  expectNear(run(*linear(kValue, 0.0, 1.0), 0, {10, 5, 1}), {1.0, 0.4444444444444444, 0.0});
}

TEST(PriorityHoldbackVectorsTest, DomainsConvergeOnEvenSpacingAndDifferOtherwise) {
  expectNear(run(*linear(kRank, 0.5, 1.0), 0, {100, 55, 10}), {1.0, 0.75, 0.5});
  expectNear(run(*linear(kValue, 0.5, 1.0), 0, {100, 55, 10}), {1.0, 0.75, 0.5});
  const double rank_middle = run(*linear(kRank, 0.5, 1.0), 0, {100, 2, 1})[1];
  const double value_middle = run(*linear(kValue, 0.5, 1.0), 0, {100, 2, 1})[1];
  EXPECT_DOUBLE_EQ(rank_middle, 0.75);
  EXPECT_LT(value_middle, 0.51);
  EXPECT_GT(rank_middle - value_middle, 0.2);
}

TEST(PriorityHoldbackVectorsTest, IdleProvisionedBandCountsInRank) {
  // Objectives at {100, -10} plus the always-present priority 0.
  const auto c = run(*linear(kRank, 0.4, 0.9), 0, {100, 0, -10});
  expectNear(c, {0.9, 0.65, 0.4});
}

TEST(PriorityHoldbackVectorsTest, SaturationIsIgnored) {
  auto policy = linear(kRank, 0.4, 0.9);
  const auto expected = run(*policy, 0.0, {100, 0, -10});
  for (const double s : {0.3, 0.9, 1.0, 5.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(run(*policy, s, {100, 0, -10}), expected) << s;
  }
}

// ---- sigmoid-smoothed and static (issue worked examples) --------------------------------------

TEST(SigmoidSmoothedTest, RankDomainWorkedExample) {
  auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                          .minCeiling = 0.6,
                          .maxCeiling = 1.0,
                          .sigmoidSteepness = 8.0,
                          .sigmoidMidpoint = 0.5,
                          .sigmoidDomain = SigmoidDomain::kRank});
  expectNear(run(*policy, 0, {100, 50, 0, -1}), {1.0, 0.9209058656, 0.6790941344, 0.6}, 1e-10);
}

TEST(SigmoidSmoothedTest, ValueDomainWorkedExample) {
  auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                          .minCeiling = 0.6,
                          .maxCeiling = 1.0,
                          .sigmoidSteepness = 8.0,
                          .sigmoidMidpoint = 0.5,
                          .sigmoidDomain = SigmoidDomain::kValue});
  expectNear(run(*policy, 0, {100, 50, 0, -1}), {1.0, 0.8041076402, 0.6006032069, 0.6}, 1e-10);
}

TEST(SigmoidSmoothedTest, EndsAreExactlyMinAndMax) {
  for (const double k : {0.5, 8.0, 100.0}) {
    for (const double x0 : {0.0, 0.5, 1.0}) {
      auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                              .minCeiling = 0.3,
                              .maxCeiling = 0.9,
                              .sigmoidSteepness = k,
                              .sigmoidMidpoint = x0});
      const auto c = run(*policy, 0, {9, 5, 3, 1});
      EXPECT_NEAR(c.front(), 0.9, 1e-12) << k << " " << x0;
      EXPECT_NEAR(c.back(), 0.3, 1e-12) << k << " " << x0;
    }
  }
}

TEST(SigmoidSmoothedTest, ValueDomainEqualPrioritiesGetMax) {
  auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                          .minCeiling = 0.6,
                          .sigmoidDomain = SigmoidDomain::kValue});
  expectNear(run(*policy, 0, {7, 7, 7}), {1.0, 1.0, 1.0});
}

TEST(SigmoidSmoothedTest, SteepCurveGroupsPrioritiesNearTheEnds) {
  auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                          .minCeiling = 0.5,
                          .sigmoidSteepness = 40.0,
                          .sigmoidDomain = SigmoidDomain::kValue});
  const auto c = run(*policy, 0, {100, 90, 10, 0});
  EXPECT_GT(c[1], 0.99);  // 90 is grouped with the top
  EXPECT_LT(c[2], 0.51);  // 10 is grouped with the bottom
}

TEST(StaticStrategyTest, WorkedExampleUsesNearestListedPriorityBelow) {
  auto policy = holdback(
      {.strategy = HoldbackStrategy::kStatic, .ceilings = {{100, 1.0}, {20, 0.75}, {-1, 0.6}}});
  expectNear(run(*policy, 0, {100, 50, 20, 0, -5}), {1.0, 0.75, 0.75, 0.6, 0.6});
}

TEST(StaticStrategyTest, ListedOrderDoesNotMatter) {
  auto policy = holdback(
      {.strategy = HoldbackStrategy::kStatic, .ceilings = {{-1, 0.6}, {100, 1.0}, {20, 0.75}}});
  expectNear(run(*policy, 0, {100, 50, 20, 0, -5}), {1.0, 0.75, 0.75, 0.6, 0.6});
}

TEST(StaticStrategyTest, PriorityAboveAllListedTakesNearestBelow) {
  auto policy =
      holdback({.strategy = HoldbackStrategy::kStatic, .ceilings = {{10, 0.9}, {0, 0.5}}});
  expectNear(run(*policy, 0, {1000, 0}), {0.9, 0.5});
}

TEST(StaticStrategyTest, DefaultCeilingForUnlistedPriorities) {
  auto policy = holdback({.strategy = HoldbackStrategy::kStatic,
                          .ceilings = {{100, 1.0}, {0, 0.7}},
                          .defaultCeiling = 0.4});
  expectNear(run(*policy, 0, {100, 50, 0, -5}), {1.0, 0.7, 0.7, 0.4});
}

TEST(StaticStrategyTest, SinglePriorityGetsMaxCeilingNotTheMapValue) {
  auto policy = holdback(
      {.strategy = HoldbackStrategy::kStatic, .maxCeiling = 0.95, .ceilings = {{-1, 0.2}}});
  expectNear(run(*policy, 0, {-1}), {0.95});
}

TEST(StaticStrategyTest, ExtremePrioritiesResolve) {
  auto policy = holdback({.strategy = HoldbackStrategy::kStatic,
                          .ceilings = {{std::numeric_limits<Priority>::max(), 1.0},
                                       {std::numeric_limits<Priority>::min(), 0.1}}});
  expectNear(run(*policy, 0,
                 {std::numeric_limits<Priority>::max(), 0, std::numeric_limits<Priority>::min()}),
             {1.0, 0.1, 0.1});
}

// ---- §2.3 soft-reflective-ceiling-policy ------------------------------------------------------

std::unique_ptr<SoftReflectiveCeilingPolicy> softReflective() {
  return std::move(SoftReflectiveCeilingPolicy::create()).value();
}

TEST(SoftReflectiveTest, PeriodTable) {
  const std::vector<std::pair<double, std::uint64_t>> table = {
      {0.50, 1},  {0.55, 1},      {0.60, 1},  {0.6000001, 2}, {0.62, 2},   {2.0 / 3.0, 2},
      {0.70, 2},  {5.0 / 7.0, 2}, {0.75, 3},  {7.0 / 9.0, 3}, {0.80, 4},   {0.85, 6},
      {0.875, 7}, {0.90, 9},      {0.95, 19}, {0.99, 99},     {0.999, 999}};
  for (const auto& [s, period] : table) {
    EXPECT_EQ(SoftReflectiveCeilingPolicy::period(s), period) << "s = " << s;
  }
}

TEST(SoftReflectiveTest, EmptyAndSingleBand) {
  auto policy = softReflective();
  std::vector<double> none;
  policy->computeLimit(0.9, {}, none);
  EXPECT_TRUE(none.empty());
  for (const double s : {0.0, 0.5, 0.99, 1.0}) expectNear(run(*policy, s, {100}), {1.0});
}

TEST(SoftReflectiveTest, TopBandAlwaysOne) {
  auto policy = softReflective();
  for (const double s : {0.0, 0.3, 0.5, 0.7, 0.99, 1.0, 1.5}) {
    EXPECT_EQ(run(*policy, s, {100, 0, -50})[0], 1.0) << s;
  }
}

TEST(SoftReflectiveTest, BelowAndAtFullSaturationTickStays) {
  auto policy = softReflective();
  expectNear(run(*policy, 0.3, {100, 0, -50}), {1, 1, 1});
  EXPECT_EQ(policy->ticks(), 0u);
  expectNear(run(*policy, 1.0, {100, 0, -50}), {1, 0, 0});
  EXPECT_EQ(policy->ticks(), 0u);
}

TEST(SoftReflectiveTest, FourBandsAtPointSeven) {
  auto policy = softReflective();
  const auto c = run(*policy, 0.7, {100, 50, 0, -50});
  EXPECT_EQ(c[0], 1.0);
  EXPECT_EQ(c[1], 1.0);  // 0.7 < 0.7667
  for (const double x : {c[2], c[3]}) EXPECT_TRUE(x == 0.0 || x == 1.0);
}

std::vector<double> lowestBandSeries(double s, int calls) {
  auto policy = softReflective();
  std::vector<double> out;
  out.reserve(calls);
  for (int i = 0; i < calls; ++i) out.push_back(run(*policy, s, {100, -50})[1]);
  return out;
}

TEST(SoftReflectiveTest, DutyCycleSequences) {
  EXPECT_EQ(lowestBandSeries(0.7, 6), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(lowestBandSeries(0.75, 6), (std::vector<double>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(lowestBandSeries(0.8, 8), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(lowestBandSeries(0.6, 4), (std::vector<double>{1, 1, 1, 1}));
}

TEST(SoftReflectiveTest, GatedBandsOpenTogether) {
  auto three = softReflective();
  const std::vector<std::vector<double>> expect3 = {{1, 0, 0}, {1, 1, 1}, {1, 0, 0},
                                                    {1, 1, 1}, {1, 0, 0}, {1, 1, 1}};
  for (const auto& e : expect3) EXPECT_EQ(run(*three, 0.7, {100, 0, -50}), e);
  auto four = softReflective();
  const std::vector<std::vector<double>> expect4 = {
      {1, 1, 0, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}, {1, 1, 1, 1}};
  for (const auto& e : expect4) EXPECT_EQ(run(*four, 0.7, {100, 50, 0, -50}), e);
}

TEST(SoftReflectiveTest, NoStarvationUnderRisingSaturation) {
  auto policy = softReflective();
  int open1 = 0;
  int open2 = 0;
  for (int i = 0; i < 103; ++i) {
    const auto c = run(*policy, i < 3 ? 0.6 : 0.7, {100, 0, -50});
    if (c[2] == 1.0) {
      EXPECT_EQ(c[1], 1.0) << "call " << i;
    }
    if (i >= 3) {
      open1 += c[1] == 1.0;
      open2 += c[2] == 1.0;
    }
  }
  EXPECT_EQ(open1, open2);
  EXPECT_GT(open2, 0);
}

TEST(SoftReflectiveTest, GrowingDomain) {
  auto policy = softReflective();
  run(*policy, 0.7, {100, -50});
  const auto c = run(*policy, 0.7, {100, 50, 0, -50});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0], 1.0);
}

TEST(SoftReflectiveTest, NanSaturationReadsAsFullySaturated) {
  auto policy = softReflective();
  expectNear(run(*policy, std::numeric_limits<double>::quiet_NaN(), {100, 0, -50}), {1, 0, 0});
  expectNear(run(*policy, std::numeric_limits<double>::infinity(), {100, 0, -50}), {1, 0, 0});
  EXPECT_EQ(policy->ticks(), 0u);
}

}  // namespace
}  // namespace holdback
