// Cost of one computeLimit call per strategy (the work definition, so that figures compare
// with the Go reference measured on the same machine), against floors measured in the same run:
//
//   priorities p_i = 1000 - 7 i^2, i = 0..N-1; cMin 0.5, cMax 1.0, sigmoid k = 10; saturation 0.7.
//   BM_ComputeLimit/<strategy>/<N>  strategies static (static-usage-limit 1.0), stepwise, linear,
//                                   sigmoid (rank domain), static-map (one entry per priority),
//                                   soft-reflective; N in {2, 8, 64, 1024}
//   BM_ComputeLimitChanging/<strategy>/<N>  linear and static-map with the priority list
//                                   changing on every call (their memo never hits)
//   BM_Monotonize/<N>               monotonize() of an adversarial increasing input (every
//                                   element is raised), refilled from a copy each iteration
//   BM_FloorFill/<N>                fill N doubles                     (floor of static,
//   monotonize) BM_FloorMulAdd/<N>              N multiply-adds into the buffer    (floor of
//   stepwise, linear,
//                                                                       static-map, soft)
//   BM_FloorExp/<N>                 N exp() calls into the buffer      (floor of sigmoid)
//   BM_ComputeLimitDemand/reservation/<N>  reservation-holdback-policy with a demand view
//   BM_ComputeLimitDemand/reservation-hold/<N>  the same with a clock: the hold of the reserve runs
//   BM_ComputeLimitDemand/reservation-room/<N>  capacityModel endpoints with a room per band (the
//                                  reserve counted in protected footprints); its floor is
//                                  BM_ComputeLimitDemand/reservation (target: within 3x)
//                                   (refill sizing, the default; N in {8, 64}; compare with
//                                   BM_FloorMulAdd/<N> + BM_FloorRefillQuantile/<N>)
//   BM_ComputeLimitDemand/reservation-occupancy/<N>  the same with the occupancy sizing (compare
//                                   with BM_FloorMulAdd/<N> + BM_FloorPoissonQuantile/<N>)
//   BM_FloorRefillQuantile/<N>      N refillReserve() calls (the refill sizing's quantile)
//   BM_FloorPoissonQuantile/<N>     N poissonReserve() calls at the benchmark's occupancies
//   BM_ConfigParseValidate          parse + validate + build the sigmoid EndpointPickerConfig of
//                                   examples/configs (cold path)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

constexpr int kSizes[] = {2, 8, 64, 1024};

std::vector<Priority> workPriorities(std::size_t n) {
  std::vector<Priority> p(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = static_cast<Priority>(1000 - 7 * static_cast<std::int64_t>(i * i));
  }
  return p;
}

std::unique_ptr<UsageLimitPolicy> makePolicy(const std::string& strategy,
                                             const std::vector<Priority>& priorities) {
  if (strategy == "static") return std::move(StaticUsageLimitPolicy::create()).value();
  if (strategy == "soft-reflective") {
    return std::move(SoftReflectiveCeilingPolicy::create()).value();
  }
  PriorityHoldbackOptions o{.minCeiling = 0.5, .maxCeiling = 1.0, .sigmoidSteepness = 10.0};
  if (strategy == "stepwise") o.strategy = HoldbackStrategy::kStepwiseSpread;
  if (strategy == "linear") o.strategy = HoldbackStrategy::kLinearProportional;
  if (strategy == "sigmoid") o.strategy = HoldbackStrategy::kSigmoidSmoothed;
  if (strategy == "static-map") {
    o.strategy = HoldbackStrategy::kStatic;
    for (std::size_t i = 0; i < priorities.size(); ++i) {
      o.ceilings.push_back({priorities[i], 1.0 - 0.5 * static_cast<double>(i) /
                                                     static_cast<double>(priorities.size())});
    }
  }
  return std::move(PriorityHoldbackPolicy::create(std::move(o))).value();
}

void computeLimit(benchmark::State& state, const std::string& strategy) {
  const auto priorities = workPriorities(static_cast<std::size_t>(state.range(0)));
  auto policy = makePolicy(strategy, priorities);
  std::vector<double> ceilings(priorities.size(), 1.0);
  for (auto _ : state) {
    policy->computeLimit(0.7, priorities, ceilings);
    benchmark::DoNotOptimize(ceilings.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// The same with a priority list that changes on every call (two lists alternate; the second is
// the first with its last priority lowered by 1): the value-domain and static strategies cannot
// return their memo of the previous list and compute, sweep and store the new one each time.
void computeLimitChanging(benchmark::State& state, const std::string& strategy) {
  const auto priorities = workPriorities(static_cast<std::size_t>(state.range(0)));
  auto other = priorities;
  other.back() -= 1;
  auto policy = makePolicy(strategy, priorities);
  std::vector<double> ceilings(priorities.size(), 1.0);
  bool flip = false;
  for (auto _ : state) {
    policy->computeLimit(0.7, flip ? other : priorities, ceilings);
    flip = !flip;
    benchmark::DoNotOptimize(ceilings.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// reservation-holdback-policy with a demand view: every band has occupancy 1 + i/4,
// arrivals 2/s, holding time 0.5 s, request unit 1/64; epsilon 0.01, minCeiling 0.5.
// `hold`: the view carries a clock advancing 1 ms per call, so the hold of the reserve runs (one
// exponential per band whose held reserve is above the computed one).
// `room`: capacityModel endpoints with a room per band (fits 40 - i, fitsAfter 38 - i): the
// reserve counted in protected requests' footprints; the pooled run of the same view is its floor.
void computeLimitDemand(benchmark::State& state, ReservationSizing sizing, bool hold = false,
                        bool room = false) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto priorities = workPriorities(n);
  auto policy =
      std::move(ReservationPolicy::create({.minCeiling = 0.5,
                                           .minReserve = 1.0,
                                           .sizing = sizing,
                                           .capacityModel = room ? ReservationCapacity::kEndpoints
                                                                 : ReservationCapacity::kPooled}))
          .value();
  std::vector<BandRoom> rooms(n);
  for (std::size_t i = 0; i < n; ++i) {
    rooms[i] = BandRoom{40.0 - static_cast<double>(i), 38.0 - static_cast<double>(i)};
  }
  std::vector<BandDemand> bands(n);
  for (std::size_t i = 0; i < n; ++i) {
    bands[i].occupancy = 1.0 + static_cast<double>(i) / 4.0;
    bands[i].inFlight = bands[i].occupancy;
    bands[i].arrivalRate = 2.0;
    bands[i].holdingTime = 0.5;
  }
  DemandView view;
  view.bands = bands;
  view.requestUnit = 1.0 / 64.0;
  if (room) view.room = rooms;
  std::vector<double> ceilings(n, 1.0);
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  for (auto _ : state) {
    if (hold) {
      now += std::chrono::milliseconds(1);
      view.now = now;
    }
    policy->computeLimit(0.7, priorities, ceilings, view);
    benchmark::DoNotOptimize(ceilings.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// The quantiles alone, at the figures BM_ComputeLimitDemand's bands produce: rho_i = 2 i / 128
// (arrivals 2/s per band above, a full pool of 64 turning over every 0.5 s) and occupancy sums
// sum_{j<i} (1 + j / 4).
void BM_FloorRefillQuantile(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<double> out(n);
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = ReservationPolicy::refillReserve(2.0 * static_cast<double>(i) / 128.0, 0.01);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_FloorPoissonQuantile(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const double z = ReservationPolicy::inverseNormal(0.99);
  std::vector<double> out(n);
  for (auto _ : state) {
    double a = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = ReservationPolicy::poissonReserve(a, 0.01, z);
      a += 1.0 + static_cast<double>(i) / 4.0;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Monotonize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<double> increasing(n);
  for (std::size_t i = 0; i < n; ++i)
    increasing[i] = static_cast<double>(i) / static_cast<double>(n);
  std::vector<double> ceilings(n);
  for (auto _ : state) {
    std::copy(increasing.begin(), increasing.end(), ceilings.begin());
    monotonize(ceilings);
    benchmark::DoNotOptimize(ceilings.data());
    benchmark::ClobberMemory();
  }
}

void BM_FloorFill(benchmark::State& state) {
  std::vector<double> out(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::fill(out.begin(), out.end(), 0.7);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

// Writes op(i, step) for i = 0..N-1 into a buffer, step = 1 / N (opaque to the optimizer).
template <class Op>
void floorLoop(benchmark::State& state, Op op) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<double> out(n);
  double step = 1.0 / static_cast<double>(n);
  benchmark::DoNotOptimize(step);
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) out[i] = op(static_cast<double>(i), step);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void BM_FloorMulAdd(benchmark::State& state) {
  floorLoop(state, [](double i, double step) { return 1.0 - i * step; });
}

void BM_FloorExp(benchmark::State& state) {
  floorLoop(state, [](double i, double step) { return std::exp(-10.0 * i * step); });
}

constexpr const char* kSigmoidConfig = R"({
  "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
  "kind": "EndpointPickerConfig",
  "metadata": {"name": "default-config"},
  "featureGates": ["flowControl"],
  "plugins": [{"type": "priority-holdback-policy", "name": "dynamic-holdback",
               "parameters": {"strategy": "sigmoid-smoothed", "minCeiling": 0.6,
                              "maxCeiling": 1.0, "sigmoidSteepness": 8.0,
                              "sigmoidMidpoint": 0.5, "sigmoidDomain": "value"}}],
  "flowControl": {"usageLimitPolicyPluginRef": "dynamic-holdback"}
})";

void BM_ConfigParseValidate(benchmark::State& state) {
  const auto registry = config::builtinPolicyRegistry();
  for (auto _ : state) {
    auto json = config::parseJson(kSigmoidConfig);
    auto policy = config::loadUsageLimitPolicy(json.value(), registry);
    if (!policy.ok()) state.SkipWithError("config did not load");
    benchmark::DoNotOptimize(policy);
  }
}

int registerAll() {
  for (const char* strategy :
       {"static", "stepwise", "linear", "sigmoid", "static-map", "soft-reflective"}) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("BM_ComputeLimit/") + strategy).c_str(),
        [s = std::string(strategy)](benchmark::State& st) { computeLimit(st, s); });
    for (const int n : kSizes) b->Arg(n);
  }
  for (const char* strategy : {"linear", "static-map"}) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("BM_ComputeLimitChanging/") + strategy).c_str(),
        [s = std::string(strategy)](benchmark::State& st) { computeLimitChanging(st, s); });
    for (const int n : kSizes) b->Arg(n);
  }
  for (auto* b : {benchmark::RegisterBenchmark("BM_Monotonize", BM_Monotonize),
                  benchmark::RegisterBenchmark("BM_FloorFill", BM_FloorFill),
                  benchmark::RegisterBenchmark("BM_FloorMulAdd", BM_FloorMulAdd),
                  benchmark::RegisterBenchmark("BM_FloorExp", BM_FloorExp)}) {
    for (const int n : kSizes) b->Arg(n);
  }
  for (auto* b :
       {benchmark::RegisterBenchmark(
            "BM_ComputeLimitDemand/reservation",
            [](benchmark::State& st) { computeLimitDemand(st, ReservationSizing::kRefill); }),
        benchmark::RegisterBenchmark(
            "BM_ComputeLimitDemand/reservation-hold",
            [](benchmark::State& st) { computeLimitDemand(st, ReservationSizing::kRefill, true); }),
        benchmark::RegisterBenchmark("BM_ComputeLimitDemand/reservation-room",
                                     [](benchmark::State& st) {
                                       computeLimitDemand(st, ReservationSizing::kRefill, false,
                                                          true);
                                     }),
        benchmark::RegisterBenchmark(
            "BM_ComputeLimitDemand/reservation-occupancy",
            [](benchmark::State& st) { computeLimitDemand(st, ReservationSizing::kOccupancy); }),
        benchmark::RegisterBenchmark("BM_FloorRefillQuantile", BM_FloorRefillQuantile),
        benchmark::RegisterBenchmark("BM_FloorPoissonQuantile", BM_FloorPoissonQuantile)}) {
    b->Arg(8)->Arg(64);
  }
  benchmark::RegisterBenchmark("BM_ConfigParseValidate", BM_ConfigParseValidate);
  return 0;
}
const int kRegistered = registerAll();

}  // namespace
}  // namespace holdback
