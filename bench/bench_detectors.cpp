// Cost of saturation() and filter() per detector, swept over the pool size, and of the
// InFlightTracker's dispatch/release and fill() under contention.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "holdback/detectors.hpp"
#include "holdback/in_flight_tracker.hpp"

namespace holdback {
namespace {

const TimePoint kNow = TimePoint{} + std::chrono::hours(1);

std::vector<Endpoint> pool(std::size_t n) {
  std::vector<Endpoint> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& e = out[i];
    e.name = "endpoint-" + std::to_string(i);
    e.waitingQueueSize = static_cast<double>(i % 9);
    e.kvCacheUsage = 0.1 * static_cast<double>(i % 10);
    e.updateTime = kNow - std::chrono::milliseconds(static_cast<int>(i % 300));
    e.inFlightRequests = static_cast<std::int64_t>(i % 130);
    e.inFlightTokens = static_cast<std::int64_t>(i % 130) * 2000;
    e.weight = 1.0 + static_cast<double>(i % 4);
  }
  return out;
}

void runSaturation(benchmark::State& state, const SaturationDetector& detector) {
  const auto endpoints = pool(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(detector.saturation(endpoints, kNow));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void runFilter(benchmark::State& state, const SaturationDetector& detector) {
  const auto endpoints = pool(static_cast<std::size_t>(state.range(0)));
  std::vector<std::size_t> out(endpoints.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(detector.filter(endpoints, kNow, out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_UtilizationSaturationMean(benchmark::State& state) {
  runSaturation(state, *std::move(UtilizationDetector::create()).value());
}
void BM_UtilizationSaturationWeighted(benchmark::State& state) {
  runSaturation(
      state,
      *std::move(UtilizationDetector::create({.aggregation = Aggregation::kWeighted})).value());
}
void BM_UtilizationFilter(benchmark::State& state) {
  runFilter(state, *std::move(UtilizationDetector::create({.headroom = 0.2})).value());
}
void BM_ConcurrencySaturationHybrid(benchmark::State& state) {
  runSaturation(
      state, *std::move(ConcurrencyDetector::create({.mode = ConcurrencyMode::kHybrid})).value());
}
void BM_ConcurrencyFilter(benchmark::State& state) {
  runFilter(state, *std::move(ConcurrencyDetector::create({.headroom = 0.1})).value());
}

BENCHMARK(BM_UtilizationSaturationMean)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_UtilizationSaturationWeighted)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_UtilizationFilter)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_ConcurrencySaturationHybrid)->RangeMultiplier(8)->Range(1, 512);
BENCHMARK(BM_ConcurrencyFilter)->RangeMultiplier(8)->Range(1, 512);

InFlightTracker& sharedTracker() {
  static InFlightTracker tracker;
  return tracker;
}

// dispatch + release of one request on one of 8 endpoints, from several threads.
void BM_InFlightDispatchRelease(benchmark::State& state) {
  InFlightTracker& tracker = sharedTracker();
  const std::string name = "endpoint-" + std::to_string(state.thread_index() % 8);
  for (auto _ : state) {
    InFlightHandle h = tracker.dispatch(name, 100);
    h.release();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_InFlightDispatchRelease)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_InFlightFill(benchmark::State& state) {
  InFlightTracker tracker;
  auto endpoints = pool(static_cast<std::size_t>(state.range(0)));
  for (const Endpoint& e : endpoints) tracker.dispatch(e.name).release();
  for (auto _ : state) {
    tracker.fill(endpoints);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_InFlightFill)->RangeMultiplier(8)->Range(1, 512);

}  // namespace
}  // namespace holdback
