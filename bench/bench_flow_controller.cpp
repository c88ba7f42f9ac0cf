// FlowController costs (the work definitions), with a floor and heap-allocation counts in
// the same binary (tests/alloc_counter.cpp replaces global operator new and counts per thread).
//
//   BM_DispatchCycle/<P>/<F>/<top|lowest>   P bands x F flows per band (every flow registered),
//        D = 1024 queued requests spread over the F flows of the top band or of the lowest band;
//        one op = one dispatchCycle plus the re-enqueue of the popped request, so the depth
//        stays constant. Counters: allocs_per_dispatch (inside dispatchCycle only),
//        allocs_per_enqueue, bytes_per_queued_request (heap bytes requested while enqueueing the
//        D requests, divided by D).
//   BM_DispatchCycleRoundRobin/<P>/<F>/top  the same with round-robin fairness.
//   BM_DispatchCycleVtc/8/<F>/top            the same with vtc-fairness-policy (request d of flow f
//        declares 64 + f % 97 tokens, so the counters differ per flow). Compare with
//        BM_DispatchCycleRoundRobin/8/<F>/top of the same run.
//   BM_DispatchCycle[WeightedFair]/8/<F>/all   the D requests spread over every band (request d
//        in band d % P); WeightedFair: weighted-fair band scheduling active in every cycle
//        (activationThreshold 0, derived weights), so each cycle orders the non-empty bands by
//        pass and dispatches from all of them in turn. Compare with BM_DispatchCycle/8/<F>/all
//        (strict priority, the same queues) and BM_DispatchCycle/8/<F>/top of the same run.
//   BM_DispatchCycleProgramAware/<P>/<F>/top   the same with program-aware-fairness (every
//        flow has reported tokens served, so attained service differs per flow).
//   BM_DispatchCycleSloDeadline/<P>/<F>/top    the same with slo-deadline-ordering-policy
//        (global-strict fairness; request i carries a TTFT objective of i % 97 ms). Compare both
//        with BM_DispatchCycle/<P>/<F>/top (global-strict / FCFS) of the same run.
//   BM_DispatchCycle[ProgramAware]Live/<P>/<F>/top   the clock advances 1 us per op (the heads'
//        waits differ), and with program-aware fairness the op also reports the dispatched
//        request's tokens (recordServed: 100 in, 1 + flow % 50 out), so both terms of the score
//        vary and the pick walks its index. Counter picks_stopped_at_limit: the fraction of
//        picks that stopped at kMaxPickVisits.
//   BM_DispatchGated/<P>                    the top band is gated (saturation 1.0, its
//   ceiling 1.0),
//        1024 requests wait in the lowest band: the cycle evaluates the pool and the policy and
//        stops. One op = one cycle.
//   BM_EnqueueDispatchRoundTrip             one band, one flow, empty queue: enqueue one request,
//        dispatch it. items_per_second = round trips per second.
//   BM_EnqueueContended/threads:N           N threads each enqueue one request and run one
//        dispatchCycle on a shared controller (real time).
//   BM_Cancel                               enqueue one request and cancel it through its ticket.
//   BM_FloorDequePushPop                    one std::deque push_back + pop_front (the floor).
//   BM_FloorContendedDeque/threads:N        the floor of BM_EnqueueContended: N threads share one
//        std::mutex-guarded std::deque; an op is two critical sections (push_back, then pop_front),
//        as enqueue + dispatchCycle take the controller's one mutex twice (real time).
//   BM_FloorContendedCounter/threads:N      N threads fetch_add one shared atomic counter (the
//        cheapest possible write to shared state: one cache line moving between cores).
//   BM_Stats/<F>/<L>, BM_StatsRender/<F>/<L>   a scrape: stats() alone (it runs under the
//        controller's lock: the time mu is held), and stats() + renderPrometheus; F flows with one
//        request in each of 8 bands, fairnessIdLabelLimit L (0: no per-flow gauges).
//   BM_MemoryQueued                         (one iteration) heap bytes per band, per flow and per
//        queued request, and the RSS growth of a controller holding 1 M queued requests across
//        10 k flows.
//
// A constant detector (saturation 0.1 unless gated) and the stepwise policy (minCeiling 0.5); TTL
// disabled; all calls with a fixed `now`.
#include <benchmark/benchmark.h>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <any>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../tests/alloc_counter.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

class ConstantDetector final : public SaturationDetector {
 public:
  explicit ConstantDetector(double s) : SaturationDetector("constant"), s_(s) {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return s_; }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "constant"; }

 private:
  double s_;
};

constexpr int kDepth = 1024;

enum class Policies { kStrictFcfs, kRoundRobin, kProgramAware, kSloDeadline, kWeightedFair, kVtc };
const TimePoint kNow{};

struct Fixture {
  std::unique_ptr<FlowController> fc;
  std::vector<std::string> flowIds;
  // The last dispatched request: (band priority, flow index).
  Priority lastBand = 0;
  int lastFlow = -1;

  Policies policies = Policies::kStrictFcfs;
  std::shared_ptr<ProgramAwareFairnessPolicy> programAware;
  int sequence = 0;
  TimePoint now = kNow;

  // `shared`: the controller is driven from several threads at once (BM_EnqueueContended), so
  // the outcome callback leaves lastBand / lastFlow alone (they are one thread's bookkeeping;
  // written from two threads they would be a data race and a cache line both cores write).
  Fixture(int bands, int flows, double saturation, Policies which,
          std::size_t fairnessIdLabelLimit = kDefaultFairnessIdLabelLimit, bool shared = false)
      : policies(which) {
    FlowControllerOptions o;
    o.fairnessIdLabelLimit = fairnessIdLabelLimit;
    o.policy = std::move(PriorityHoldbackPolicy::create(
                             {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.5}))
                   .value();
    o.detector = std::make_shared<ConstantDetector>(saturation);
    o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
    o.onOutcome = [this, shared](Completion&& c) {
      if (!shared && c.outcome.dispatched()) {
        lastBand = c.bandPriority;
        lastFlow = *std::any_cast<int>(&c.payload);
      }
    };
    o.defaultRequestTtl = Duration::zero();
    o.defaultBand.maxRequests = 1'000'000;
    std::shared_ptr<const FairnessPolicy> fairness;
    std::shared_ptr<const OrderingPolicy> ordering;
    if (which == Policies::kRoundRobin) fairness = roundRobinFairness();
    if (which == Policies::kProgramAware) {
      programAware = std::move(ProgramAwareFairnessPolicy::create()).value();
      fairness = programAware;
    }
    if (which == Policies::kSloDeadline) ordering = sloDeadlineOrdering();
    if (which == Policies::kVtc) fairness = vtcFairness();
    if (which == Policies::kWeightedFair) {
      o.bandScheduling = {.schedule = BandSchedule::kWeightedFair, .activationThreshold = 0.0};
    }
    for (int b = 0; b < bands; ++b) {
      o.bands.push_back(
          {.priority = b, .maxRequests = 1'000'000, .fairness = fairness, .ordering = ordering});
    }
    fc = std::move(FlowController::create(std::move(o))).value();
    for (int f = 0; f < flows; ++f) flowIds.push_back("flow-" + std::to_string(f));
    if (programAware) {
      for (int f = 0; f < flows; ++f) {
        programAware->recordServed(flowIds[static_cast<std::size_t>(f)],
                                   static_cast<std::uint64_t>(100 + f % 37),
                                   static_cast<std::uint64_t>(f % 101), kNow);
      }
    }
  }

  Ticket enqueue(Priority p, int f) {
    FlowRequest r;
    r.flowId = flowIds[static_cast<std::size_t>(f)];
    r.priority = p;
    r.sizeBytes = 100;
    r.payload = f;
    if (policies == Policies::kVtc) r.kvTokens = 64 + f % 97;  // footprints differ per flow
    if (policies == Policies::kSloDeadline)
      r.ttftObjective = std::chrono::milliseconds(++sequence % 97);
    return fc->enqueue(std::move(r), now);
  }

  // Registers every flow in every band (enqueue + cancel keeps the flow), then queues D requests
  // over the flows of `target`. Returns the heap bytes requested by those D enqueues.
  // A negative `target` spreads them over every band (request d in band d % bands).
  std::size_t fill(int bands, int flows, Priority target) {
    for (int b = 0; b < bands; ++b) {
      for (int f = 0; f < flows; ++f) enqueue(b, f).cancel();
    }
    testing::AllocationCounter counter;
    for (int d = 0; d < kDepth; ++d) (void)enqueue(target < 0 ? d % bands : target, d % flows);
    return counter.bytes();
  }
};

void dispatchCycle(benchmark::State& state, int bands, int flows, bool lowest, Policies which,
                   bool live = false, bool spread = false) {
  Fixture fx(bands, flows, 0.1, which);
  const std::size_t bytes = fx.fill(bands, flows, spread ? -1 : lowest ? 0 : bands - 1);
  std::size_t dispatchAllocs = 0;
  std::size_t enqueueAllocs = 0;
  const auto picks =
      fx.programAware ? fx.programAware->pickCounts() : ProgramAwareFairnessPolicy::PickCounts{};
  for (auto _ : state) {
    if (live) fx.now += std::chrono::microseconds(1);
    {
      testing::AllocationCounter counter;
      benchmark::DoNotOptimize(fx.fc->dispatchCycle(fx.now));
      dispatchAllocs += counter.count();
    }
    testing::AllocationCounter counter;
    if (live && fx.programAware) {
      fx.programAware->recordServed(fx.flowIds[static_cast<std::size_t>(fx.lastFlow)], 100,
                                    static_cast<std::uint64_t>(1 + fx.lastFlow % 50), fx.now);
    }
    (void)fx.enqueue(fx.lastBand, fx.lastFlow);
    enqueueAllocs += counter.count();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["allocs_per_dispatch"] = static_cast<double>(dispatchAllocs) / n;
  state.counters["allocs_per_enqueue"] = static_cast<double>(enqueueAllocs) / n;
  state.counters["bytes_per_queued_request"] = static_cast<double>(bytes) / kDepth;
  if (fx.programAware) {
    const auto after = fx.programAware->pickCounts();
    state.counters["picks_stopped_at_limit"] =
        static_cast<double>(after.stoppedAtLimit - picks.stoppedAtLimit) /
        static_cast<double>(std::max<std::uint64_t>(1, after.picks - picks.picks));
  }
  if (fx.fc->stats().queuedRequests != static_cast<std::size_t>(kDepth)) {
    state.SkipWithError("queue depth drifted");
  }
}

void BM_DispatchGated(benchmark::State& state) {
  const int bands = static_cast<int>(state.range(0));
  Fixture fx(bands, 1, 1.0, Policies::kStrictFcfs);
  (void)fx.fill(bands, 1, 0);
  std::size_t allocs = 0;
  for (auto _ : state) {
    testing::AllocationCounter counter;
    benchmark::DoNotOptimize(fx.fc->dispatchCycle(kNow));
    allocs += counter.count();
  }
  state.counters["allocs_per_cycle"] =
      static_cast<double>(allocs) / static_cast<double>(state.iterations());
}

void BM_EnqueueDispatchRoundTrip(benchmark::State& state) {
  Fixture fx(1, 1, 0.1, Policies::kStrictFcfs);
  std::size_t allocs = 0;
  for (auto _ : state) {
    testing::AllocationCounter counter;
    (void)fx.enqueue(0, 0);
    benchmark::DoNotOptimize(fx.fc->dispatchCycle(kNow));
    allocs += counter.count();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs_per_round_trip"] =
      static_cast<double>(allocs) / static_cast<double>(state.iterations());
}

std::unique_ptr<Fixture> g_shared;

void BM_EnqueueContended(benchmark::State& state) {
  if (state.thread_index() == 0)
    g_shared = std::make_unique<Fixture>(1, 8, 0.1, Policies::kStrictFcfs,
                                         kDefaultFairnessIdLabelLimit, /*shared=*/true);
  const int flow = state.thread_index() % 8;
  for (auto _ : state) {
    (void)g_shared->enqueue(0, flow);
    benchmark::DoNotOptimize(g_shared->fc->dispatchCycle(kNow));
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) g_shared.reset();
}

void BM_Cancel(benchmark::State& state) {
  Fixture fx(1, 1, 0.1, Policies::kStrictFcfs);
  (void)fx.fill(1, 1, 0);
  for (auto _ : state) {
    Ticket t = fx.enqueue(0, 0);
    benchmark::DoNotOptimize(t.cancel());
  }
  state.SetItemsProcessed(state.iterations());
}

// The resident set size of this process, from /proc/self/statm (0 where it is unavailable).
std::size_t residentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0;
  unsigned long resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return read == 2 ? resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Memory, one iteration: heap bytes requested per band (creating a controller with 65
// declared bands vs 1, / 64), per flow (10 k flows registered by an enqueue + cancel each, the
// request memory recycled), per queued request (1 M requests queued over those 10 k flows, / 1 M),
// and the growth of the process's RSS while the 1 M requests are queued.
void BM_MemoryQueued(benchmark::State& state) {
  constexpr int kFlows = 10'000;
  constexpr int kRequests = 1'000'000;
  const auto makeController = [](int bands) {
    FlowControllerOptions o;
    o.policy = std::move(PriorityHoldbackPolicy::create(
                             {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.5}))
                   .value();
    o.detector = std::make_shared<ConstantDetector>(0.1);
    o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
    o.onOutcome = [](Completion&&) {};
    o.defaultRequestTtl = Duration::zero();
    o.maxRequests = 2 * kRequests;
    for (int b = 0; b < bands; ++b) {
      o.bands.push_back({.priority = b, .maxRequests = 2 * kRequests});
    }
    return std::move(FlowController::create(std::move(o))).value();
  };
  std::vector<std::string> ids;
  for (int f = 0; f < kFlows; ++f) ids.push_back("tenant-" + std::to_string(f));
  for (auto _ : state) {
    std::size_t bytes_one_band = 0;
    std::size_t bytes_many_bands = 0;
    {
      testing::AllocationCounter counter;
      auto one = makeController(1);
      bytes_one_band = counter.bytes();
    }
    {
      testing::AllocationCounter counter;
      auto many = makeController(65);
      bytes_many_bands = counter.bytes();
    }
    const std::size_t rss_before = residentBytes();
    auto fc = makeController(1);
    const auto enqueue = [&](int f) {
      FlowRequest r;
      r.flowId = ids[static_cast<std::size_t>(f)];  // copied before the counted call
      r.priority = 0;
      r.sizeBytes = 100;
      return r;
    };
    std::size_t flow_bytes = 0;
    for (int f = 0; f < kFlows; ++f) {
      FlowRequest r = enqueue(f);
      testing::AllocationCounter counter;
      fc->enqueue(std::move(r), kNow).cancel();
      flow_bytes += counter.bytes();
    }
    std::size_t request_bytes = 0;
    for (int i = 0; i < kRequests; ++i) {
      FlowRequest r = enqueue(i % kFlows);
      testing::AllocationCounter counter;
      (void)fc->enqueue(std::move(r), kNow);
      request_bytes += counter.bytes();
    }
    const std::size_t rss_after = residentBytes();
    if (fc->stats().queuedRequests != static_cast<std::size_t>(kRequests)) {
      state.SkipWithError("not every request was queued");
    }
    state.counters["bytes_per_band"] =
        static_cast<double>(bytes_many_bands - bytes_one_band) / 64.0;
    state.counters["bytes_per_flow"] = static_cast<double>(flow_bytes) / kFlows;
    state.counters["bytes_per_queued_request"] = static_cast<double>(request_bytes) / kRequests;
    state.counters["rss_growth_MiB"] =
        static_cast<double>(rss_after - rss_before) / (1024.0 * 1024.0);
    state.counters["rss_growth_per_request"] =
        static_cast<double>(rss_after - rss_before) / kRequests;
    state.PauseTiming();
    fc.reset();
#if defined(__GLIBC__)
    malloc_trim(
        0);  // so that a repetition's RSS growth is not hidden by the last one's free memory
#endif
    state.ResumeTiming();
  }
}

void BM_FloorDequePushPop(benchmark::State& state) {
  std::deque<int> q(kDepth, 1);
  int i = 0;
  for (auto _ : state) {
    q.push_back(++i);
    benchmark::DoNotOptimize(q.front());
    q.pop_front();
  }
}

// Shared by the contended floors' threads (set up and torn down by thread 0, as g_shared).
struct ContendedFloor {
  std::mutex mu;
  std::deque<int> q = std::deque<int>(kDepth, 1);
};
std::unique_ptr<ContendedFloor> g_floor;
std::atomic<std::uint64_t> g_counter{0};

void BM_FloorContendedDeque(benchmark::State& state) {
  if (state.thread_index() == 0) g_floor = std::make_unique<ContendedFloor>();
  int i = 0;
  for (auto _ : state) {
    {
      std::lock_guard lock(g_floor->mu);
      g_floor->q.push_back(++i);
    }
    std::lock_guard lock(g_floor->mu);
    benchmark::DoNotOptimize(g_floor->q.front());
    g_floor->q.pop_front();
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) g_floor.reset();
}

void BM_FloorContendedCounter(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(g_counter.fetch_add(1, std::memory_order_relaxed));
  state.SetItemsProcessed(state.iterations());
}

int registerAll() {
  for (const int p : {1, 8, 64}) {
    for (const int f : {1, 16, 1024}) {
      for (const bool lowest : {false, true}) {
        const std::string name = "BM_DispatchCycle/" + std::to_string(p) + "/" + std::to_string(f) +
                                 (lowest ? "/lowest" : "/top");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          dispatchCycle(s, p, f, lowest, Policies::kStrictFcfs);
        });
      }
      const std::string rr =
          "BM_DispatchCycleRoundRobin/" + std::to_string(p) + "/" + std::to_string(f) + "/top";
      benchmark::RegisterBenchmark(rr.c_str(), [=](benchmark::State& s) {
        dispatchCycle(s, p, f, false, Policies::kRoundRobin);
      });
    }
  }
  // Program-aware fairness and SLO-deadline ordering at P x F = 8 x 1024 (and a smaller point for
  // the trend).
  for (const int f : {16, 1024}) {
    const std::string suffix = "/8/" + std::to_string(f) + "/top";
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleProgramAware" + suffix).c_str(),
        [=](benchmark::State& s) { dispatchCycle(s, 8, f, false, Policies::kProgramAware); });
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleSloDeadline" + suffix).c_str(),
        [=](benchmark::State& s) { dispatchCycle(s, 8, f, false, Policies::kSloDeadline); });
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleLive" + suffix).c_str(),
        [=](benchmark::State& s) { dispatchCycle(s, 8, f, false, Policies::kStrictFcfs, true); });
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleProgramAwareLive" + suffix).c_str(),
        [=](benchmark::State& s) { dispatchCycle(s, 8, f, false, Policies::kProgramAware, true); });
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleVtc" + suffix).c_str(),
        [=](benchmark::State& s) { dispatchCycle(s, 8, f, false, Policies::kVtc); });
    const std::string all = "/8/" + std::to_string(f) + "/all";
    benchmark::RegisterBenchmark(("BM_DispatchCycle" + all).c_str(), [=](benchmark::State& s) {
      dispatchCycle(s, 8, f, false, Policies::kStrictFcfs, false, true);
    });
    benchmark::RegisterBenchmark(
        ("BM_DispatchCycleWeightedFair" + all).c_str(), [=](benchmark::State& s) {
          dispatchCycle(s, 8, f, false, Policies::kWeightedFair, false, true);
        });
  }
  return 0;
}
const int kRegistered = registerAll();

// A scrape: stats() (everything under the controller's lock) and the text rendering, with
// `flows` flows holding one request in each of 8 bands, at fairness_id label limit `limit`.
void BM_Stats(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  Fixture fx(8, flows, 0.1, Policies::kStrictFcfs, static_cast<std::size_t>(state.range(1)));
  for (int b = 0; b < 8; ++b) {
    for (int f = 0; f < flows; ++f) (void)fx.enqueue(b, f);
  }
  for (auto _ : state) benchmark::DoNotOptimize(fx.fc->stats());
}

void BM_StatsRender(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  Fixture fx(8, flows, 0.1, Policies::kStrictFcfs, static_cast<std::size_t>(state.range(1)));
  for (int b = 0; b < 8; ++b) {
    for (int f = 0; f < flows; ++f) (void)fx.enqueue(b, f);
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = renderPrometheus(fx.fc->stats());
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["text_bytes"] = static_cast<double>(bytes);
}

BENCHMARK(BM_DispatchGated)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK(BM_Stats)->ArgsProduct({{16, 1024}, {0, 1000}});
BENCHMARK(BM_StatsRender)->ArgsProduct({{16, 1024}, {0, 1000}});
BENCHMARK(BM_EnqueueDispatchRoundTrip);
BENCHMARK(BM_EnqueueContended)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK(BM_Cancel);
BENCHMARK(BM_FloorDequePushPop);
BENCHMARK(BM_FloorContendedDeque)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK(BM_FloorContendedCounter)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK(BM_MemoryQueued)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace holdback
