// A value-parameterized GoogleTest suite that every UsageLimitPolicy must pass: the built-in
// ones and a host's own. Include this header in one test file and instantiate it:
//
//   INSTANTIATE_TEST_SUITE_P(MyPolicies, UsageLimitPolicyConformanceTest,
//       ::testing::Values(holdback::testing::PolicyFactory{"mine", [] { return makeMine(); }}),
//       holdback::testing::PolicyFactoryName{});
//
// Checked on many random inputs from a fixed seed, including the nasty ones (NaN and infinite
// saturation, INT_MIN/INT_MAX, unsorted and duplicated priorities, buffers of the wrong length):
// every ceiling written is finite, within [0, 1] and non-increasing; nothing beyond
// min(priorities, buffer) is written; computeLimit is safe to call from several threads.
#pragma once

#include "holdback/abi.hpp"
#include "holdback/testing/conformance_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

// The suite's parameter and its name (testing/conformance_support.hpp).
using PolicyFactory = Factory<UsageLimitPolicy>;

using PolicyFactoryName = FactoryName;

// Random inputs, including the edge cases, from a fixed seed.
class PolicyInputGenerator : public SeededGenerator {
 public:
  using SeededGenerator::SeededGenerator;

  double saturation() {
    static constexpr double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(),
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          -1.0,
                                          0.0,
                                          0.5,
                                          1.0,
                                          1e300,
                                          -0.0,
                                          std::numeric_limits<double>::denorm_min()};
    if (pick(4) == 0) return kSpecial[pick(std::size(kSpecial))];
    return uniform(0.0, 2.0);
  }

  std::vector<Priority> priorities() {
    const std::size_t n = pick(6) == 0 ? pick(3) : pick(40);
    std::vector<Priority> out;
    for (std::size_t i = 0; i < n; ++i) {
      switch (pick(6)) {
        case 0:
          out.push_back(std::numeric_limits<Priority>::min());
          break;
        case 1:
          out.push_back(std::numeric_limits<Priority>::max());
          break;
        case 2:
          out.push_back(out.empty() ? 0 : out.back());  // duplicate
          break;
        default:
          out.push_back(between<Priority>(-1000, 1000));
      }
    }
    if (pick(2) == 0) std::sort(out.begin(), out.end(), std::greater<>());  // sometimes sorted
    return out;
  }
};

class UsageLimitPolicyConformanceTest : public ::testing::TestWithParam<PolicyFactory> {
 protected:
  std::unique_ptr<UsageLimitPolicy> make() const {
    auto policy = GetParam().make();
    EXPECT_NE(policy, nullptr);
    return policy;
  }

  static void expectValid(const std::vector<double>& ceilings, std::size_t n,
                          const std::string& context) {
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isfinite(ceilings[i])) << context << " index " << i;
      EXPECT_GE(ceilings[i], 0.0) << context << " index " << i;
      EXPECT_LE(ceilings[i], 1.0) << context << " index " << i;
      if (i > 0) {
        EXPECT_GE(ceilings[i - 1], ceilings[i]) << context << " index " << i;
      }
    }
  }
};

TEST_P(UsageLimitPolicyConformanceTest, CeilingsAreFiniteBoundedAndNonIncreasing) {
  auto policy = make();
  PolicyInputGenerator gen(20261130);
  for (int round = 0; round < 3000; ++round) {
    const double s = gen.saturation();
    const std::vector<Priority> priorities = gen.priorities();
    std::vector<double> ceilings(priorities.size(), 1.0);
    policy->computeLimit(s, priorities, ceilings);
    expectValid(ceilings, ceilings.size(),
                "round " + std::to_string(round) + " s=" + std::to_string(s));
    if (::testing::Test::HasFailure()) return;
  }
}

// Demand figures (policy/demand.hpp) of any kind, absurd ones included, and views shorter or longer
// than the priority list: every policy, demand-aware or not, still returns valid ceilings.
TEST_P(UsageLimitPolicyConformanceTest, AnyDemandKeepsCeilingsValid) {
  auto policy = make();
  PolicyInputGenerator gen(424242);
  std::mt19937 rng(99);
  const double specials[] = {0.0,
                             -1.0,
                             1e300,
                             -1e300,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::denorm_min(),
                             0.5,
                             3.0,
                             64.0};
  auto figure = [&] {
    std::uniform_int_distribution<int> pick(0, 14);
    const int k = pick(rng);
    if (k < 11) return specials[k];
    return std::uniform_real_distribution<double>(0.0, 100.0)(rng);
  };
  for (int round = 0; round < 2000; ++round) {
    const std::vector<Priority> priorities = gen.priorities();
    // Mostly as long as the priority list (the view is used), sometimes one shorter or longer
    // (the view must be ignored).
    std::uniform_int_distribution<int> length(-1, 3);
    const int d = length(rng);
    const std::size_t m = d < 0 ? (priorities.empty() ? 0 : priorities.size() - 1)
                                : priorities.size() + (d == 3 ? 1 : 0);
    std::vector<BandDemand> bands(m);
    for (auto& b : bands) {
      b = BandDemand{.occupancy = figure(),
                     .arrivalRate = figure(),
                     .holdingTime = figure(),
                     .inFlight = figure(),
                     .queued = figure()};
    }
    std::vector<double> ceilings(priorities.size(), 1.0);
    // Fields assigned one by one: a consumer's -Wextra (-Wmissing-field-initializers) flags a
    // designated initializer that leaves members out.
    DemandView demand;
    demand.bands = bands;
    demand.requestUnit = figure();
    policy->computeLimit(gen.saturation(), priorities, ceilings, demand);
    expectValid(ceilings, ceilings.size(), "demand round " + std::to_string(round));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST_P(UsageLimitPolicyConformanceTest, WritesNothingBeyondTheShorterSpan) {
  auto policy = make();
  PolicyInputGenerator gen(7);
  constexpr double kSentinel = -42.0;
  for (int round = 0; round < 500; ++round) {
    const std::vector<Priority> priorities = gen.priorities();
    // Buffer longer than the priority list.
    std::vector<double> longer(priorities.size() + 3, kSentinel);
    std::fill(longer.begin(), longer.begin() + static_cast<std::ptrdiff_t>(priorities.size()), 1.0);
    policy->computeLimit(gen.saturation(), priorities, longer);
    expectValid(longer, priorities.size(), "longer buffer");
    for (std::size_t i = priorities.size(); i < longer.size(); ++i) EXPECT_EQ(longer[i], kSentinel);
    // Buffer shorter than the priority list.
    if (!priorities.empty()) {
      std::vector<double> shorter(priorities.size() - 1, 1.0);
      policy->computeLimit(gen.saturation(), priorities, shorter);
      expectValid(shorter, shorter.size(), "shorter buffer");
    }
  }
}

TEST_P(UsageLimitPolicyConformanceTest, EmptyListWritesNothing) {
  auto policy = make();
  std::vector<double> buffer{0.25, 0.5};
  policy->computeLimit(0.7, {}, buffer);
  EXPECT_EQ(buffer, (std::vector<double>{0.25, 0.5}));
}

TEST_P(UsageLimitPolicyConformanceTest, ReportsTypeAndName) {
  auto policy = make();
  EXPECT_FALSE(policy->type().empty());
  EXPECT_FALSE(policy->name().empty());
}

TEST_P(UsageLimitPolicyConformanceTest, ConcurrentCallsStayValid) {
  auto policy = make();
  constexpr int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  runConcurrently(kThreads, [&](int t) {
    PolicyInputGenerator gen(static_cast<std::uint32_t>(100 + t));
    for (int round = 0; round < 500; ++round) {
      const auto priorities = gen.priorities();
      std::vector<double> ceilings(priorities.size(), 1.0);
      policy->computeLimit(gen.saturation(), priorities, ceilings);
      for (std::size_t i = 0; i < ceilings.size(); ++i) {
        const bool ok = std::isfinite(ceilings[i]) && ceilings[i] >= 0.0 && ceilings[i] <= 1.0 &&
                        (i == 0 || ceilings[i - 1] >= ceilings[i]);
        failures[static_cast<std::size_t>(t)] += ok ? 0 : 1;
      }
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], 0) << t;
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
