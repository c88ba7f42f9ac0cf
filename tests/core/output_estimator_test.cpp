// The output-token estimator (core/output_estimator.hpp): convergence, bad input, keys, options.
#include "holdback/core/output_estimator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "alloc_counter.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

std::unique_ptr<OutputEstimator> makeOutputEstimator(OutputEstimatorOptions options = {}) {
  auto created = OutputEstimator::create(options);
  EXPECT_TRUE(created.ok());
  return std::move(created).value();
}

TEST(OutputEstimatorTest, AnUnknownKeyGetsTheFallback) {
  const auto e = makeOutputEstimator({.fallbackTokens = 16.0});
  EXPECT_EQ(e->estimate(100), 16.0);
  EXPECT_EQ(e->samples(100), 0u);
}

TEST(OutputEstimatorTest, ConvergesToTheNinetiethPercentile) {
  // Uniform 100..500 tokens: p90 = 460, mean 300.
  const auto e = makeOutputEstimator();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> length(100, 500);
  for (int i = 0; i < 20000; ++i) e->record(5, length(rng));
  EXPECT_NEAR(e->estimate(5), 460.0, 25.0);
  EXPECT_EQ(e->samples(5), 20000u);
}

TEST(OutputEstimatorTest, FollowsADrift) {
  const auto e = makeOutputEstimator();
  for (int i = 0; i < 2000; ++i) e->record(1, 50.0);
  EXPECT_NEAR(e->estimate(1), 50.0, 3.0);
  for (int i = 0; i < 2000; ++i) e->record(1, 800.0);
  EXPECT_NEAR(e->estimate(1), 800.0, 40.0);
  for (int i = 0; i < 2000; ++i) e->record(1, 50.0);
  EXPECT_NEAR(e->estimate(1), 50.0, 3.0);
}

TEST(OutputEstimatorTest, KeysLearnApart) {
  const auto e = makeOutputEstimator();
  for (int i = 0; i < 500; ++i) {
    e->record(100, 20.0);
    e->record(-1, 1000.0);
  }
  EXPECT_NEAR(e->estimate(100), 20.0, 2.0);
  EXPECT_NEAR(e->estimate(-1), 1000.0, 50.0);
}

TEST(OutputEstimatorTest, AColdKeyNeverDeclaresLessThanTheFallback) {
  const auto e = makeOutputEstimator({.fallbackTokens = 16.0, .minSamples = 8});
  for (int i = 0; i < 7; ++i) e->record(3, 2.0);
  EXPECT_EQ(e->estimate(3), 16.0);  // 7 < minSamples
  e->record(3, 2.0);
  EXPECT_LT(e->estimate(3), 16.0);  // learned: short answers declare less
  EXPECT_GE(e->estimate(3), 1.0);
}

TEST(OutputEstimatorTest, BadCountsAreIgnored) {
  const auto e = makeOutputEstimator();
  for (int i = 0; i < 100; ++i) e->record(9, 200.0);
  const double before = e->estimate(9);
  e->record(9, test_support::kNaN);
  e->record(9, -5.0);
  e->record(9, test_support::kInf);
  e->record(9, -test_support::kInf);
  EXPECT_EQ(e->estimate(9), before);
  EXPECT_EQ(e->samples(9), 100u);
  EXPECT_EQ(e->ignored(), 4u);
  // A bad first count does not create the key.
  e->record(10, test_support::kNaN);
  EXPECT_EQ(e->samples(10), 0u);
}

TEST(OutputEstimatorTest, HugeCountsAreCappedAtMaxTokens) {
  const auto e = makeOutputEstimator({.maxTokens = 4096.0});
  for (int i = 0; i < 100; ++i) e->record(2, 1e300);
  EXPECT_EQ(e->estimate(2), 4096.0);
  EXPECT_EQ(e->ignored(), 0u);
}

TEST(OutputEstimatorTest, KeysBeyondTheTableAreNotLearned) {
  const auto e = makeOutputEstimator();
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(OutputEstimator::kMaxKeys); ++k) {
    e->record(k, 100.0);
  }
  e->record(1'000'000, 100.0);
  EXPECT_EQ(e->samples(1'000'000), 0u);
  EXPECT_EQ(e->estimate(1'000'000), 16.0);
  EXPECT_EQ(e->ignored(), 1u);
  EXPECT_EQ(e->samples(0), 1u);
}

TEST(OutputEstimatorTest, RecordAndEstimateDoNotAllocate) {
  const auto e = makeOutputEstimator();
  e->record(1, 10.0);  // the key exists
  testing::AllocationCounter allocations;
  double sum = 0.0;
  for (int i = 0; i < 1000; ++i) {
    e->record(i % 8, 100.0 + i);
    sum += e->estimate(i % 8);
  }
  EXPECT_GT(sum, 0.0);
  EXPECT_EQ(allocations.count(), 0u);
}

TEST(OutputEstimatorTest, InvalidOptionsNameEachField) {
  const auto created = OutputEstimator::create({.quantile = 1.0,
                                                .learningRate = 0.0,
                                                .fallbackTokens = 0.5,
                                                .maxTokens = test_support::kNaN});
  ASSERT_FALSE(created.ok());
  const std::string text = created.diagnostics().toString();
  for (const char* field : {"/quantile", "/learningRate", "/fallbackTokens", "/maxTokens"}) {
    EXPECT_NE(text.find(field), std::string::npos) << field << " in " << text;
  }
}

}  // namespace
}  // namespace holdback
