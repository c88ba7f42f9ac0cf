// Cost of saturation() and filter() per detector, swept over the pool size, against a floor
// measured in the same run; and of the InFlightTracker's dispatch/release and fill() under
// contention.
//
// The work definition (compares with the Go reference on this machine): endpoints with
// waiting queue uniform in [0, 9] and KV uniform in [0, 1), all fresh, thresholds 5 / 0.8,
// seed 42; M in {1, 64, 1024, 4096}. Each iteration reads the clock once (steady_clock::now()),
// as a host would, and passes it in.
//
//   BM_UtilizationSaturation/<M>   mean aggregation
//   BM_UtilizationFilter/<M>
//   BM_ConcurrencySaturation/<M>   requests mode (in-flight 0..129)
//   BM_FloorSumScores/<M>          one clock read + sum of max(queue / 5, kv / 0.8) over the same
//                                  Endpoint structs: the floor of a saturation pass
//   BM_PickEndpoint/<M>            EndpointPicker::pick over the utilization detector (endpoints
//                                  with capacities, 16 slots and 32768 KV tokens each)
//   BM_PickEndpointFitFirst/<M>    the same with fitFirst (the fit test; target at 1024
//                                  endpoints: <= 2 us)
//   BM_PickEndpointFitFirstNoneFits/<M>  the same on a pool where no endpoint has a free slot
//                                  (the fit test reads the whole pool's room and filter)
//   BM_FloorMinInFlight/<M>        the floor of a pick: the index of the fewest inFlightRequests
//                                  over the same Endpoint structs (one load per endpoint)
//
// DispatchLedger:
//   BM_LedgerDispatchComplete            one dispatch + one completion (handle release) on one
//                                        endpoint id, one thread (target <= 50 ns)
//   BM_LedgerDispatchCompleteShared/threads:N   the same from N threads on ONE endpoint (the
//                                        worst case: one contended cache line), real time
//   BM_LedgerDispatchCompleteSpread/threads:N   N threads, each on its own endpoint, real time
//   BM_LedgerFill/<M>                    fill() by ids of M endpoints, each with a scrape and
//                                        work in flight, correction and budget on
//   BM_LedgerFillByName/<M>              the same by Endpoint::name (hash lookup per endpoint)
//   BM_FloorCopyEndpoints/<M>            the floor: a plain loop copy-assigning M Endpoint structs
//                                        (target: BM_LedgerFill/1024 <= 2x this, same run)
#include <benchmark/benchmark.h>

#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/endpoint_picker.hpp"
#include "holdback/detector/in_flight_tracker.hpp"

namespace holdback {
namespace {

const TimePoint kNow = TimePoint{} + std::chrono::hours(1);

// The work definition, with fresh timestamps relative to the real clock.
std::vector<Endpoint> workPool(std::size_t n) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> queue(0, 9);
  std::uniform_real_distribution<double> kv(0.0, 1.0);
  std::vector<Endpoint> out(n);
  const TimePoint now = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& e = out[i];
    e.name = "endpoint-" + std::to_string(i);
    e.waitingQueueSize = queue(rng);
    e.kvCacheUsage = kv(rng);
    e.updateTime = now;  // fresh: the staleness threshold below is 2 h
    e.inFlightRequests = static_cast<std::int64_t>(i % 130);
    e.inFlightTokens = static_cast<std::int64_t>(i % 130) * 2000;
  }
  return out;
}

std::unique_ptr<UtilizationDetector> workDetector() {
  // Staleness threshold of 2 h: the updateTime set in workPool stays fresh during the run.
  return std::move(
             UtilizationDetector::create({.queueDepthThreshold = 5,
                                          .kvCacheUtilThreshold = 0.8,
                                          .metricsStalenessThreshold = std::chrono::hours(2)}))
      .value();
}

void BM_UtilizationSaturation(benchmark::State& state) {
  const auto endpoints = workPool(static_cast<std::size_t>(state.range(0)));
  const auto detector = workDetector();
  for (auto _ : state) benchmark::DoNotOptimize(detector->saturation(endpoints, Clock::now()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_UtilizationFilter(benchmark::State& state) {
  const auto endpoints = workPool(static_cast<std::size_t>(state.range(0)));
  const auto detector = workDetector();
  std::vector<std::size_t> out(endpoints.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(detector->filter(endpoints, Clock::now(), out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_ConcurrencySaturation(benchmark::State& state) {
  const auto endpoints = workPool(static_cast<std::size_t>(state.range(0)));
  const auto detector = std::move(ConcurrencyDetector::create()).value();
  for (auto _ : state) benchmark::DoNotOptimize(detector->saturation(endpoints, Clock::now()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_FloorSumScores(benchmark::State& state) {
  const auto endpoints = workPool(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Clock::now());
    double sum = 0.0;
    for (const Endpoint& e : endpoints) {
      const double q = e.waitingQueueSize / 5.0;
      const double kv = e.kvCacheUsage / 0.8;
      sum += q > kv ? q : kv;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void detectorSizes(benchmark::internal::Benchmark* b) {
  for (const int m : {1, 64, 1024, 4096}) b->Arg(m);
}
// EndpointPicker over the utilization detector's view of a pool whose endpoints carry their
// capacity (16 slots, 32768 KV tokens): the plain rule, and with fitFirst for a request of 512
// input tokens. The plain pick and BM_FloorMinInFlight are the fit test's floors.
std::vector<Endpoint> pickPool(std::size_t n, bool full) {
  auto endpoints = workPool(n);
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    endpoints[i].maxRunningRequests = 16;
    endpoints[i].kvCacheUsage = 0.4 + 0.3 * static_cast<double>(i % 7) / 7.0;
    endpoints[i].runningRequests = full ? 16.0 : static_cast<double>(i % 16);
    endpoints[i].waitingQueueSize = 0.0;
    endpoints[i].kvCapacityTokens = 32768;
    endpoints[i].inFlightRequests = static_cast<std::int64_t>(i % 16);
  }
  return endpoints;
}
void pickOnce(benchmark::State& state, bool fitFirst, bool full = false) {
  const auto endpoints = pickPool(static_cast<std::size_t>(state.range(0)), full);
  const auto detector = workDetector();
  EndpointPicker picker(endpoints.size(), {.fitFirst = fitFirst});
  const TimePoint now = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(picker.pick(endpoints, *detector, now, {}, 512));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_PickEndpoint(benchmark::State& state) {
  pickOnce(state, false);
}
void BM_PickEndpointFitFirst(benchmark::State& state) {
  pickOnce(state, true);
}
void BM_PickEndpointFitFirstNoneFits(benchmark::State& state) {
  pickOnce(state, true, true);
}
void BM_FloorMinInFlight(benchmark::State& state) {
  const auto endpoints = pickPool(static_cast<std::size_t>(state.range(0)), false);
  for (auto _ : state) {
    std::size_t best = 0;
    std::int64_t least = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const std::int64_t f = endpoints[i].inFlightRequests;
      if (f < least) {
        least = f;
        best = i;
      }
    }
    benchmark::DoNotOptimize(best);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PickEndpoint)->Arg(8)->Arg(1024);
BENCHMARK(BM_PickEndpointFitFirst)->Arg(8)->Arg(1024);
BENCHMARK(BM_PickEndpointFitFirstNoneFits)->Arg(8)->Arg(1024);
BENCHMARK(BM_FloorMinInFlight)->Arg(8)->Arg(1024);

BENCHMARK(BM_UtilizationSaturation)->Apply(detectorSizes);
BENCHMARK(BM_UtilizationFilter)->Apply(detectorSizes);
BENCHMARK(BM_ConcurrencySaturation)->Apply(detectorSizes);
BENCHMARK(BM_FloorSumScores)->Apply(detectorSizes);

// The older sweeps (aggregations and modes beyond the set), on a fixed pool.
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

void BM_UtilizationSaturationWeighted(benchmark::State& state) {
  runSaturation(
      state,
      *std::move(UtilizationDetector::create({.aggregation = Aggregation::kWeighted})).value());
}
void BM_ConcurrencySaturationHybrid(benchmark::State& state) {
  runSaturation(
      state, *std::move(ConcurrencyDetector::create({.mode = ConcurrencyMode::kHybrid})).value());
}
void BM_ConcurrencyFilter(benchmark::State& state) {
  runFilter(state, *std::move(ConcurrencyDetector::create({.headroom = 0.1})).value());
}

BENCHMARK(BM_UtilizationSaturationWeighted)->RangeMultiplier(8)->Range(1, 512);
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

// ---- DispatchLedger --------------------------------------------------------------------------

void BM_LedgerDispatchComplete(benchmark::State& state) {
  DispatchLedger ledger;
  const EndpointId id = ledger.registerEndpoint("endpoint-0");
  for (auto _ : state) {
    DispatchHandle h = ledger.dispatch(id, 100);
    benchmark::DoNotOptimize(h);
    h.release();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LedgerDispatchComplete);

DispatchLedger& sharedLedger() {
  static DispatchLedger ledger;
  return ledger;
}

EndpointId sharedId(int i) {
  return sharedLedger().registerEndpoint("endpoint-" + std::to_string(i));
}

void BM_LedgerDispatchCompleteShared(benchmark::State& state) {
  const EndpointId id = sharedId(0);
  DispatchLedger& ledger = sharedLedger();
  for (auto _ : state) {
    DispatchHandle h = ledger.dispatch(id, 100);
    benchmark::DoNotOptimize(h);
    h.release();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LedgerDispatchCompleteShared)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_LedgerDispatchCompleteSpread(benchmark::State& state) {
  const EndpointId id = sharedId(100 + state.thread_index());
  DispatchLedger& ledger = sharedLedger();
  for (auto _ : state) {
    DispatchHandle h = ledger.dispatch(id, 100);
    benchmark::DoNotOptimize(h);
    h.release();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LedgerDispatchCompleteSpread)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

struct LedgerPool {
  DispatchLedger ledger{{.dispatchBudget = true}};
  std::vector<Endpoint> endpoints;
  std::vector<EndpointId> ids;
  std::vector<DispatchHandle> handles;
  explicit LedgerPool(std::size_t n) : endpoints(pool(n)) {
    for (const Endpoint& e : endpoints) {
      const EndpointId id = ledger.registerEndpoint(e.name, EndpointCapacity{16, 100000});
      ids.push_back(id);
      ledger.installScrape(id, {.updateTime = kNow,
                                .waitingQueueSize = e.waitingQueueSize,
                                .runningRequests = 8,
                                .kvCacheUsage = e.kvCacheUsage});
      for (int k = 0; k < 3; ++k) handles.push_back(ledger.dispatch(id, 500));
    }
  }
};

void BM_LedgerFill(benchmark::State& state) {
  LedgerPool p(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    p.ledger.fill(p.endpoints, p.ids);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_LedgerFillByName(benchmark::State& state) {
  LedgerPool p(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    p.ledger.fill(p.endpoints);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_FloorCopyEndpoints(benchmark::State& state) {
  const std::vector<Endpoint> source = pool(static_cast<std::size_t>(state.range(0)));
  std::vector<Endpoint> target = source;
  for (auto _ : state) {
    for (std::size_t i = 0; i < source.size(); ++i) target[i] = source[i];
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_LedgerFill)->Arg(8)->Arg(512)->Arg(1024);
BENCHMARK(BM_LedgerFillByName)->Arg(8)->Arg(512)->Arg(1024);
BENCHMARK(BM_FloorCopyEndpoints)->Arg(8)->Arg(512)->Arg(1024);

}  // namespace
}  // namespace holdback
