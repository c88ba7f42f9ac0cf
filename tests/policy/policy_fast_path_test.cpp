// The fast paths of computeLimit against the scalar reference they replaced, bit for
// bit, on fuzzed input: the vectorized monotone check that skips the sweep, the static-usage-limit
// fill that skips the virtual call and the sweep, the 32-bit-indexed and three-pass strategy loops
// and the static map's merge walk.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/policy/policies.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

using test_support::kInf;
using test_support::kNaN;

// The sweep as it was before the fast paths: clamp into [0, 1], NaN -> 0, raise right to left.
void referenceSweep(std::vector<double>& c) {
  double floor = 0.0;
  for (std::size_t i = c.size(); i-- > 0;) {
    double v = c[i];
    if (!(v >= 0.0)) v = 0.0;
    if (v > 1.0) v = 1.0;
    if (v < floor) v = floor;
    c[i] = v;
    floor = v;
  }
}

// The strategies as they were computed before the fast paths, one element at a time.
std::vector<double> referenceHoldback(const PriorityHoldbackOptions& o,
                                      const std::vector<Priority>& priorities) {
  const std::size_t n = priorities.size();
  std::vector<double> c(n, 1.0);
  const double c_max = o.maxCeiling;
  const double c_min = o.minCeiling.value_or(0.0);
  if (n == 1) {
    c[0] = c_max;
    referenceSweep(c);
    return c;
  }
  const auto logistic = [&](double x) {
    return 1.0 / (1.0 + std::exp(-o.sigmoidSteepness * (x - o.sigmoidMidpoint)));
  };
  const double lo = logistic(0.0);
  const double span = logistic(1.0) - lo;
  const double spread = c_max - c_min;
  const double last = static_cast<double>(n - 1);
  const bool value = o.strategy == HoldbackStrategy::kLinearProportional ||
                     (o.strategy == HoldbackStrategy::kSigmoidSmoothed &&
                      o.sigmoidDomain == SigmoidDomain::kValue);
  double p_min = 0.0;
  double p_max = 0.0;
  if (value) {
    p_min = p_max = static_cast<double>(priorities[0]);
    for (const Priority p : priorities) {
      p_min = std::min(p_min, static_cast<double>(p));
      p_max = std::max(p_max, static_cast<double>(p));
    }
    if (p_min == p_max) {
      for (double& v : c) v = c_max;
      referenceSweep(c);
      return c;
    }
  }
  const double range = p_max - p_min;
  for (std::size_t i = 0; i < n; ++i) {
    switch (o.strategy) {
      case HoldbackStrategy::kStepwiseSpread:
        c[i] = c_max - static_cast<double>(i) * spread / last;
        break;
      case HoldbackStrategy::kLinearProportional:
        c[i] = c_min + (static_cast<double>(priorities[i]) - p_min) / range * spread;
        break;
      case HoldbackStrategy::kSigmoidSmoothed: {
        const double x = value ? (static_cast<double>(priorities[i]) - p_min) / range
                               : 1.0 - static_cast<double>(i) / last;
        const double s = span > 0.0 ? (logistic(x) - lo) / span : x;
        c[i] = c_min + s * spread;
        break;
      }
      case HoldbackStrategy::kStatic: {
        // Linear scan: the exact entry, else defaultCeiling, else the nearest listed below,
        // else the lowest listed.
        const StaticCeiling* below = nullptr;
        const StaticCeiling* lowest = nullptr;
        bool found = false;
        for (const StaticCeiling& e : o.ceilings) {
          if (e.priority == priorities[i]) {
            c[i] = e.ceiling;
            found = true;
          }
          if (e.priority < priorities[i] && (below == nullptr || e.priority > below->priority)) {
            below = &e;
          }
          if (lowest == nullptr || e.priority < lowest->priority) lowest = &e;
        }
        if (!found) {
          c[i] = o.defaultCeiling ? *o.defaultCeiling
                                  : (below != nullptr ? below->ceiling : lowest->ceiling);
        }
        break;
      }
    }
  }
  referenceSweep(c);
  return c;
}

void expectBitIdentical(const std::vector<double>& actual, const std::vector<double>& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint64_t>(actual[i]), std::bit_cast<std::uint64_t>(expected[i]))
        << what << " index " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

std::vector<Priority> randomPriorities(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> size(1, 80);
  std::uniform_int_distribution<int> shape(0, 3);
  const int n = size(rng);
  std::vector<Priority> p(static_cast<std::size_t>(n));
  const int kind = shape(rng);
  std::uniform_int_distribution<Priority> small(-20, 20);
  std::uniform_int_distribution<Priority> any(std::numeric_limits<Priority>::min(),
                                              std::numeric_limits<Priority>::max());
  for (auto& v : p) v = kind == 3 ? any(rng) : small(rng);
  if (kind <= 1) std::sort(p.begin(), p.end(), std::greater<>());  // the expected order
  if (kind == 1) p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

TEST(PolicyFastPathTest, MonotonizeMatchesTheSweepBitForBit) {
  std::mt19937_64 rng(19);
  const double specials[] = {0.0, -0.0, 1.0, 0.5, kNaN, kInf, -kInf, -0.25, 1.5, 1e-300};
  std::uniform_int_distribution<int> size(0, 40);
  std::uniform_int_distribution<int> pick(0, 14);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int round = 0; round < 20000; ++round) {
    std::vector<double> c(static_cast<std::size_t>(size(rng)));
    const bool sorted = round % 2 == 0;  // half already monotone, to reach the skip
    for (double& v : c) {
      const int k = pick(rng);
      v = k < 10 ? specials[k] : unit(rng);
    }
    if (sorted) std::sort(c.begin(), c.end(), [](double a, double b) { return a > b; });
    std::vector<double> expected = c;
    referenceSweep(expected);
    monotonize(c);
    expectBitIdentical(c, expected, "round " + std::to_string(round));
  }
}

TEST(PolicyFastPathTest, StaticUsageLimitFillMatchesFillPlusSweep) {
  std::mt19937_64 rng(7);
  for (const double threshold : {1.0, 0.5, 1e-9, 0.7999999999999999}) {
    auto policy = std::move(StaticUsageLimitPolicy::create({.threshold = threshold})).value();
    for (int round = 0; round < 200; ++round) {
      const auto priorities = randomPriorities(rng);
      std::vector<double> expected(priorities.size(), threshold);
      referenceSweep(expected);
      std::vector<double> actual(priorities.size(), 1.0);
      for (const double s : {0.0, 0.7, 2.0, kNaN, -kInf}) {
        policy->computeLimit(s, priorities, actual);
        expectBitIdentical(actual, expected, "threshold " + std::to_string(threshold));
      }
    }
  }
}

TEST(PolicyFastPathTest, StrategiesMatchTheScalarReferenceBitForBit) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> strategy(0, 3);
  for (int round = 0; round < 3000; ++round) {
    PriorityHoldbackOptions o;
    o.strategy = static_cast<HoldbackStrategy>(strategy(rng));
    o.maxCeiling = round % 3 == 0 ? 1.0 : 0.05 + 0.95 * unit(rng);
    o.minCeiling = round % 5 == 0 ? 0.0 : unit(rng) * o.maxCeiling * 0.999;
    o.sigmoidSteepness = round % 7 == 0 ? 1e-300 : 0.01 + 99.99 * unit(rng);
    o.sigmoidMidpoint = unit(rng);
    o.sigmoidDomain = round % 2 == 0 ? SigmoidDomain::kRank : SigmoidDomain::kValue;
    const auto priorities = randomPriorities(rng);
    if (o.strategy == HoldbackStrategy::kStatic) {
      // A valid map: unique priorities, ceilings non-increasing from the highest priority.
      auto listed = randomPriorities(rng);
      std::sort(listed.begin(), listed.end(), std::greater<>());
      listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
      double ceiling = 1.0;
      for (const Priority p : listed) {
        ceiling *= unit(rng);
        o.ceilings.push_back({p, ceiling});
      }
      std::shuffle(o.ceilings.begin(), o.ceilings.end(), rng);
      if (round % 2 == 0) o.defaultCeiling = unit(rng);
    }
    auto made = PriorityHoldbackPolicy::create(o);
    ASSERT_TRUE(made.ok()) << made.diagnostics().toString();
    auto policy = std::move(made).value();
    // The first call computes (and remembers) the list; the second returns the memo (value and
    // static strategies) or the table row (rank strategies); then a different list (the memo is
    // replaced), then the first again, at other saturations (which the strategies ignore).
    auto changed = priorities;
    changed.back() =
        changed.back() == std::numeric_limits<Priority>::min() ? 0 : changed.back() - 1;
    const std::vector<double> expected = referenceHoldback(o, priorities);
    const std::vector<double> expected_changed = referenceHoldback(o, changed);
    const std::string what =
        "round " + std::to_string(round) + " strategy " + std::string(toString(o.strategy));
    std::vector<double> actual(priorities.size(), 1.0);
    for (const double s : {0.7, 0.7, 0.0, kNaN, 2.0}) {
      actual.assign(priorities.size(), 1.0);
      policy->computeLimit(s, priorities, actual);
      expectBitIdentical(actual, expected, what);
      EXPECT_TRUE(isMonotoneUnit(actual)) << what;
      if (s == 0.0) {
        actual.assign(priorities.size(), 1.0);
        policy->computeLimit(s, changed, actual);
        expectBitIdentical(actual, expected_changed, what + " (changed list)");
      }
    }
  }
}

// The memo holds one list of at most 64 priorities: shorter and longer lists, lists that differ
// only in their last (odd-position or even-position) priority, and a prefix of the remembered
// list are all recomputed, never mistaken for it.
TEST(PolicyFastPathTest, MemoIsReturnedOnlyForTheSameList) {
  for (const HoldbackStrategy strategy :
       {HoldbackStrategy::kLinearProportional, HoldbackStrategy::kStatic}) {
    PriorityHoldbackOptions o{.strategy = strategy, .minCeiling = 0.25};
    if (strategy == HoldbackStrategy::kStatic) {
      o.ceilings = {{100, 1.0}, {0, 0.5}, {-100, 0.1}};
      o.defaultCeiling = 0.3;
    }
    auto policy = std::move(PriorityHoldbackPolicy::create(o)).value();
    for (const std::size_t n : {2U, 3U, 7U, 8U, 9U, 63U, 64U, 65U}) {
      std::vector<Priority> base(n);
      for (std::size_t i = 0; i < n; ++i) base[i] = 100 - static_cast<Priority>(3 * i);
      std::vector<std::vector<Priority>> lists{base};
      auto last = base;
      last.back() = -100;
      lists.push_back(last);
      auto second_last = base;
      second_last[n - 2] = base.back();
      lists.push_back(second_last);
      lists.emplace_back(base.begin(), base.end() - 1);
      auto longer = base;
      longer.push_back(-100);
      lists.push_back(longer);
      for (int repeat = 0; repeat < 2; ++repeat) {
        for (const auto& list : lists) {
          std::vector<double> actual(list.size(), 1.0);
          policy->computeLimit(0.5, list, actual);
          expectBitIdentical(actual, referenceHoldback(o, list),
                             "n " + std::to_string(n) + " list of " + std::to_string(list.size()));
          policy->computeLimit(0.5, list, actual);  // the memo of that list, where n <= 64
          expectBitIdentical(actual, referenceHoldback(o, list), "again");
        }
      }
    }
  }
}

TEST(PolicyFastPathTest, ComputeLimitDoesNotAllocate) {
  auto stat = std::move(StaticUsageLimitPolicy::create({.threshold = 0.5})).value();
  auto step = std::move(PriorityHoldbackPolicy::create(
                            {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.5}))
                  .value();
  std::vector<Priority> priorities(64);
  for (std::size_t i = 0; i < priorities.size(); ++i) priorities[i] = 100 - static_cast<int>(i);
  std::vector<double> ceilings(64, 1.0);
  auto linear =
      std::move(PriorityHoldbackPolicy::create(
                    {.strategy = HoldbackStrategy::kLinearProportional, .minCeiling = 0.5}))
          .value();
  const testing::AllocationCounter allocations;
  stat->computeLimit(0.5, priorities, ceilings);
  step->computeLimit(0.5, priorities, ceilings);
  linear->computeLimit(0.5, priorities, ceilings);  // computes and remembers
  linear->computeLimit(0.5, priorities, ceilings);  // the memo
  EXPECT_EQ(allocations.count(), 0u);
}

}  // namespace
}  // namespace holdback
