// Cost of one computeLimit call per policy and strategy, swept over the number of priorities.
#include <benchmark/benchmark.h>

#include <memory>
#include <numeric>
#include <vector>

#include "holdback/policies.hpp"

namespace holdback {
namespace {

std::vector<Priority> descending(std::size_t n) {
  std::vector<Priority> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<Priority>(1000 - 10 * static_cast<int>(i));
  return p;
}

void runPolicy(benchmark::State& state, UsageLimitPolicy& policy, double saturation) {
  const auto priorities = descending(static_cast<std::size_t>(state.range(0)));
  std::vector<double> ceilings(priorities.size(), 1.0);
  for (auto _ : state) {
    std::fill(ceilings.begin(), ceilings.end(), 1.0);
    policy.computeLimit(saturation, priorities, ceilings);
    benchmark::DoNotOptimize(ceilings.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

std::unique_ptr<UsageLimitPolicy> holdback(PriorityHoldbackOptions options) {
  return std::move(PriorityHoldbackPolicy::create(std::move(options))).value();
}

void BM_StaticUsageLimit(benchmark::State& state) {
  auto policy = std::move(StaticUsageLimitPolicy::create()).value();
  runPolicy(state, *policy, 0.7);
}
void BM_StepwiseSpread(benchmark::State& state) {
  auto policy = holdback({.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.4});
  runPolicy(state, *policy, 0.7);
}
void BM_LinearProportional(benchmark::State& state) {
  auto policy = holdback({.strategy = HoldbackStrategy::kLinearProportional, .minCeiling = 0.4});
  runPolicy(state, *policy, 0.7);
}
void BM_SigmoidValue(benchmark::State& state) {
  auto policy = holdback({.strategy = HoldbackStrategy::kSigmoidSmoothed,
                          .minCeiling = 0.6,
                          .sigmoidDomain = SigmoidDomain::kValue});
  runPolicy(state, *policy, 0.7);
}
void BM_StaticMap(benchmark::State& state) {
  std::vector<StaticCeiling> map;
  for (Priority p = 1000; p > -1000; p -= 40) map.push_back({p, 0.3 + 0.7 * (p + 1000) / 2000.0});
  auto policy = holdback({.strategy = HoldbackStrategy::kStatic, .ceilings = map});
  runPolicy(state, *policy, 0.7);
}
void BM_SoftReflective(benchmark::State& state) {
  auto policy = std::move(SoftReflectiveCeilingPolicy::create()).value();
  runPolicy(state, *policy, 0.7);
}

BENCHMARK(BM_StaticUsageLimit)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_StepwiseSpread)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_LinearProportional)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_SigmoidValue)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_StaticMap)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_SoftReflective)->RangeMultiplier(8)->Range(1, 512);

}  // namespace
}  // namespace holdback
