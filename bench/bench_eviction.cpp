// The cost in-flight eviction adds to a gated dispatch cycle (flow/eviction.hpp), against the
// same gated cycle with eviction off (the floor, measured in the same run).
//
//   BM_GatedEviction/<L>/<mode>   L leases in flight, one high-priority request queued behind a
//        gated top band (saturation 1.0, every ceiling 0.9); one op = one dispatchCycle.
//        mode off:        eviction disabled (the floor)
//        closed:          eviction on, one revocation outstanding (the pacing gate is closed)
//        no-victims:      eviction on, gate open, the L leases are priority 0 (below the demand,
//                         but the sheddable filter refuses them): the walk over the candidates
//        Counter allocs_per_cycle (tests/alloc_counter.cpp).
#include <benchmark/benchmark.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../tests/alloc_counter.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

class ConstantDetector final : public SaturationDetector {
 public:
  ConstantDetector() : SaturationDetector("constant") {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return 0.0; }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "constant"; }
};

enum class Mode { kOff, kClosed, kNoVictims };

void gatedEviction(benchmark::State& state, int leases, Mode mode) {
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = 0.9})).value();
  o.detector = std::make_shared<ConstantDetector>();
  o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
  o.onOutcome = [](Completion&&) {};
  o.bands = {{.priority = 100}, {.priority = 0}, {.priority = -1}};
  o.defaultRequestTtl = Duration{0};
  o.eviction.enabled = mode != Mode::kOff;
  o.eviction.confirmationTimeout = std::chrono::hours(1);
  o.eviction.evict = [](const Revocation&) {};
  auto fc = std::move(FlowController::create(std::move(o))).value();
  const TimePoint now{};
  PoolPressure idle;
  idle.saturation.effective = 0.0;
  const Priority loadPriority = mode == Mode::kClosed ? -1 : 0;
  for (int i = 0; i < leases; ++i) {
    FlowRequest r;
    r.flowId = "load";
    r.priority = loadPriority;
    fc->enqueue(std::move(r), now);
    (void)fc->dispatch(now, idle);
  }
  FlowRequest hp;
  hp.flowId = "hp";
  hp.priority = 100;
  fc->enqueue(std::move(hp), now);
  PoolPressure full;
  full.saturation.effective = 1.0;
  (void)fc->dispatch(now, full);  // closed: the first decision leaves a revocation outstanding
  std::size_t allocs = 0;
  for (auto _ : state) {
    testing::AllocationCounter counter;
    benchmark::DoNotOptimize(fc->dispatch(now, full));
    allocs += counter.count();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs_per_cycle"] =
      static_cast<double>(allocs) / static_cast<double>(state.iterations());
}

int registerAll() {
  for (const int leases : {16, 1024}) {
    for (const auto& [mode, name] :
         {std::pair{Mode::kOff, "off"}, std::pair{Mode::kClosed, "closed"},
          std::pair{Mode::kNoVictims, "no-victims"}}) {
      const std::string full = "BM_GatedEviction/" + std::to_string(leases) + "/" + name;
      benchmark::RegisterBenchmark(full.c_str(), [leases, mode = mode](benchmark::State& s) {
        gatedEviction(s, leases, mode);
      });
    }
  }
  return 0;
}
const int kRegistered = registerAll();

}  // namespace
}  // namespace holdback
