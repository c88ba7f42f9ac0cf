// Cost of one FlowController::dispatchCycle, swept over bands x flows per band. The cycle keeps an
// index of non-empty flows per band, so the cost should grow with the number of bands only (and
// at most logarithmically with flows), unlike a scan of every flow queue.
//
//   BM_DispatchCycle/B/F             every flow of every band is non-empty; the top band
//                                    dispatches (global-strict fairness).
//   BM_DispatchCycleLowestBand/B/F   every band has F registered flows, but only the lowest band
//                                    has queued work: the cycle walks all B bands first.
//   BM_DispatchCycleRoundRobin/B/F   as BM_DispatchCycle with round-robin fairness.
//
// Dispatched requests are re-enqueued in batches of 1024 with the timer paused, so the figure is
// the cycle alone (detector + computeLimit + walk + dequeue + outcome callback).
#include <benchmark/benchmark.h>

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "holdback/flow_controller.hpp"
#include "holdback/policies.hpp"

namespace holdback {
namespace {

class ConstantDetector final : public SaturationDetector {
 public:
  ConstantDetector() : SaturationDetector("constant") {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return 0.1; }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "constant"; }
};

class OneEndpoint final : public EndpointSource {
 public:
  OneEndpoint() : pool_(1) { pool_[0].name = "ep"; }
  std::span<const Endpoint> endpoints(TimePoint) noexcept override { return pool_; }

 private:
  std::vector<Endpoint> pool_;
};

constexpr int kBatch = 1024;

void run(benchmark::State& state, bool onlyLowest, bool roundRobin) {
  const int bands = static_cast<int>(state.range(0));
  const int flows = static_cast<int>(state.range(1));
  std::vector<std::pair<Priority, int>> dispatched;
  dispatched.reserve(kBatch);

  FlowControllerOptions o;
  o.policy = std::move(PriorityHoldbackPolicy::create(
                           {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.4}))
                 .value();
  o.detector = std::make_shared<ConstantDetector>();
  o.endpoints = std::make_shared<OneEndpoint>();
  o.onOutcome = [&](Completion&& c) {
    dispatched.emplace_back(c.bandPriority, *std::any_cast<int>(&c.payload));
  };
  o.defaultRequestTtl = Duration::zero();
  o.defaultBand.maxRequests = 1'000'000;
  for (int b = 0; b < bands; ++b) {
    o.bands.push_back({.priority = b,
                       .maxRequests = 1'000'000,
                       .fairness = roundRobin ? roundRobinFairness() : nullptr});
  }
  auto fc = std::move(FlowController::create(std::move(o))).value();

  std::vector<std::string> ids(static_cast<std::size_t>(flows));
  for (int f = 0; f < flows; ++f) ids[static_cast<std::size_t>(f)] = "flow-" + std::to_string(f);
  const TimePoint now{};
  auto enqueue = [&](Priority p, int f) {
    FlowRequest r;
    r.flowId = ids[static_cast<std::size_t>(f)];
    r.priority = p;
    r.sizeBytes = 100;
    r.payload = f;
    (void)fc->enqueue(std::move(r), now);
  };
  const Priority target = onlyLowest ? 0 : bands - 1;
  const int depth = std::max(1, 2 * kBatch / flows);
  for (int b = 0; b < bands; ++b) {
    for (int f = 0; f < flows; ++f) {
      if (b == target) {
        for (int d = 0; d < depth; ++d) enqueue(b, f);
      } else {
        enqueue(b, f);  // registers the flow
      }
    }
  }
  if (onlyLowest) {  // empty every band but the lowest (flows stay registered)
    while (fc->dispatchCycle(now).priority != 0) {
    }
    for (const auto& [p, f] : dispatched)
      if (p == 0) enqueue(p, f);
  }
  dispatched.clear();

  int n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(fc->dispatchCycle(now));
    if (++n == kBatch) {
      state.PauseTiming();
      for (const auto& [p, f] : dispatched) enqueue(p, f);
      dispatched.clear();
      n = 0;
      state.ResumeTiming();
    }
  }
  state.counters["flows_total"] = static_cast<double>(bands) * flows;
}

void BM_DispatchCycle(benchmark::State& state) {
  run(state, false, false);
}
void BM_DispatchCycleLowestBand(benchmark::State& state) {
  run(state, true, false);
}
void BM_DispatchCycleRoundRobin(benchmark::State& state) {
  run(state, false, true);
}

void sweep(benchmark::internal::Benchmark* b) {
  for (const int bands : {1, 8, 64})
    for (const int flows : {1, 64, 1024}) b->Args({bands, flows});
}

BENCHMARK(BM_DispatchCycle)->Apply(sweep);
BENCHMARK(BM_DispatchCycleLowestBand)->Apply(sweep);
BENCHMARK(BM_DispatchCycleRoundRobin)->Apply(sweep);

}  // namespace
}  // namespace holdback
