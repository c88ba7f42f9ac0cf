// FlowController: reference §3.3 worked examples and vectors, §3.6 capacity, §3.7 expiry,
// cancellation, shutdown, provisioning, fairness/ordering and the no-allocation property of
// dispatchCycle. Every test drives time explicitly (no sleeps).
#include "holdback/flow/flow_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_test_support.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FakeDetector;
using testing::FakeEndpoints;
using testing::Recorder;
using testing::request;
using Kind = DispatchResult::Kind;

std::shared_ptr<UsageLimitPolicy> staticPolicy(double threshold = 1.0) {
  return std::move(StaticUsageLimitPolicy::create({.threshold = threshold})).value();
}

std::shared_ptr<UsageLimitPolicy> holdbackPolicy(double min, double max) {
  return std::move(PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kStepwiseSpread,
                                                   .minCeiling = min,
                                                   .maxCeiling = max}))
      .value();
}

class FlowControllerTest : public ::testing::Test {
 protected:
  FlowControllerOptions options(std::shared_ptr<UsageLimitPolicy> policy = staticPolicy()) {
    FlowControllerOptions o;
    o.policy = std::move(policy);
    o.detector = detector;
    o.endpoints = pool;
    o.onOutcome = rec.callback();
    o.clock = [this] { return now; };
    return o;
  }
  std::unique_ptr<FlowController> make(FlowControllerOptions o) {
    auto result = FlowController::create(std::move(o));
    EXPECT_TRUE(result.ok()) << result.diagnostics().toString();
    return std::move(result).value();
  }

  std::shared_ptr<FakeDetector> detector = std::make_shared<FakeDetector>(0.0);
  std::shared_ptr<FakeEndpoints> pool = std::make_shared<FakeEndpoints>(2);
  Recorder rec;
  TimePoint t0 = TimePoint{} + 1h;
  TimePoint now = t0;
};

// ---------------------------------------------------------------------------------------------
// Outcomes and HTTP mapping (§3.8)

TEST(FlowOutcomeTest, StringsFollowTheTaxonomy) {
  EXPECT_EQ(toString(QueueOutcome::kDispatched), "Dispatched");
  EXPECT_EQ(toString(QueueOutcome::kRejectedNoEndpoints), "RejectedNoEndpoints");
  EXPECT_EQ(toString(QueueOutcome::kEvictedTtl), "EvictedTTL");
  EXPECT_EQ(toString(QueueOutcome::kEvictedCancelled), "EvictedCancelled");
  EXPECT_EQ(toString(static_cast<QueueOutcome>(42)), "UnknownOutcome");
}

TEST(FlowOutcomeTest, HttpMappingMatchesTheReference) {
  using Q = QueueOutcome;
  using C = OutcomeCause;
  struct Row {
    Outcome outcome;
    bool poolEmpty;
    int status;
    std::string_view reason;
  };
  const Row rows[] = {
      {{Q::kDispatched, C::kNone}, false, 200, ""},
      {{Q::kRejectedCapacity, C::kQueueAtCapacity}, false, 429, "rejected-saturated"},
      {{Q::kRejectedNoEndpoints, C::kNoEndpoints}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedNoEndpoints, C::kNoEndpoints}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedTtl, C::kTtlExpired}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedTtl, C::kTtlExpired}, false, 429, "rejected-ttl-expired"},
      {{Q::kEvictedCancelled, C::kCancelled}, false, 503, "rejected-context-cancelled"},
      {{Q::kRejectedOther, C::kNotRunning}, false, 503, "rejected-shutting-down"},
      {{Q::kEvictedOther, C::kNotRunning}, false, 503, "rejected-shutting-down"},
      {{Q::kRejectedOther, C::kTtlExpired}, false, 429, "rejected-ttl-expired"},
      {{Q::kRejectedOther, C::kCancelled}, false, 503, "rejected-context-cancelled"},
      {{Q::kRejectedOther, C::kInvalidRequest}, false, 500, ""},
      {{static_cast<Q>(99), C::kNone}, false, 500, ""},
  };
  for (const Row& row : rows) {
    const HttpDisposition h = toHttp(row.outcome, row.poolEmpty);
    EXPECT_EQ(h.status, row.status) << toString(row.outcome.kind);
    EXPECT_EQ(h.dropReason, row.reason) << toString(row.outcome.kind);
  }
  EXPECT_TRUE(toHttp({Q::kDispatched, C::kNone}).proceed());
}

// ---------------------------------------------------------------------------------------------
// §3.6 hasCapacity table. "-" in the reference is a zero (unlimited) limit here.

TEST(CapacityTest, ReferenceTable) {
  struct Row {
    std::uint64_t item = 0;
    CapacityUsage global;
    std::optional<CapacityUsage> band;
    bool allow = false;
  };
  auto g = [](std::uint64_t maxB, std::uint64_t usedB, std::uint64_t maxR, std::uint64_t usedR) {
    return CapacityUsage{maxB, usedB, maxR, usedR};
  };
  const Row rows[] = {
      {1, g(100, 100, 0, 0), g(0, 0, 0, 0), false},
      {0, g(0, 0, 10, 10), g(0, 0, 100, 0), false},
      {1, g(200, 100, 0, 0), g(50, 50, 0, 0), false},
      {0, g(0, 0, 0, 0), g(0, 0, 5, 5), false},
      {1, g(200, 100, 0, 0), std::nullopt, false},
      {10, g(200, 100, 0, 0), g(100, 50, 0, 0), true},
      {0, g(0, 0, 10, 5), g(0, 0, 8, 3), true},
      {0, g(0, 999, 0, 999), g(0, 999, 0, 999), true},
      {10, g(200, 50, 100, 5), g(100, 20, 5, 5), false},
      {10, g(200, 50, 100, 5), g(20, 20, 100, 3), false},
      {10, g(200, 50, 100, 10), g(100, 20, 50, 5), true},
      {10, g(110, 100, 0, 0), g(60, 50, 0, 0), true},
      {11, g(110, 100, 0, 0), g(200, 50, 0, 0), false},
      {0, g(0, 0, 10, 9), g(0, 0, 10, 5), true},
      {0, g(0, 0, 10, 10), g(0, 0, 100, 5), false},
      {10, g(500, 100, 0, 0), g(60, 50, 0, 0), true},
      {11, g(500, 100, 0, 0), g(60, 50, 0, 0), false},
      {0, g(0, 0, 100, 10), g(0, 0, 6, 5), true},
      {0, g(0, 0, 100, 10), g(0, 0, 5, 5), false},
  };
  int i = 0;
  for (const Row& row : rows) {
    EXPECT_EQ(hasCapacity(row.item, row.global, row.band ? &*row.band : nullptr), row.allow)
        << "row " << i;
    ++i;
  }
}

TEST(CapacityTest, NoOverflowAtExtremes) {
  const auto max = std::numeric_limits<std::uint64_t>::max();
  const CapacityUsage band{max, max - 1, 0, 0};
  EXPECT_TRUE(hasCapacity(1, CapacityUsage{}, &band));
  EXPECT_FALSE(hasCapacity(2, CapacityUsage{}, &band));
  EXPECT_FALSE(hasCapacity(max, CapacityUsage{10, 0, 0, 0}, &band));
  const CapacityUsage over{10, 20, 0, 0};  // already over (e.g. limits lowered)
  EXPECT_FALSE(hasCapacity(0, over, &band));
}

// ---------------------------------------------------------------------------------------------
// §3.7 isExpired table (satTTL 100 ms, noEndpointTTL 2 s).

TEST(ExpiryTest, ReferenceTable) {
  const TimePoint enq = TimePoint{} + 10h;
  struct Row {
    const char* name;
    bool empty;
    std::optional<Duration> change;  // regime change relative to enqueue
    Duration elapsed;
    Duration satTtl;
    Duration noEpTtl;
    QueueOutcome outcome;
    bool expired;
  };
  const Row rows[] = {
      {"hold within budget", false, {}, 99ms, 100ms, 2s, QueueOutcome::kEvictedTtl, false},
      {"shed at budget", false, {}, 100ms, 100ms, 2s, QueueOutcome::kEvictedTtl, true},
      {"empty past sat budget",
       true,
       {},
       1999ms,
       100ms,
       2s,
       QueueOutcome::kEvictedNoEndpoints,
       false},
      {"shed at no-endpoint budget",
       true,
       {},
       2000ms,
       100ms,
       2s,
       QueueOutcome::kEvictedNoEndpoints,
       true},
      {"empty, budget 0", true, {}, 1h, 100ms, 0s, QueueOutcome::kEvictedNoEndpoints, false},
      {"non-empty, item TTL 0", false, {}, 1h, 0s, 2s, QueueOutcome::kEvictedTtl, false},
      {"pool came up", false, 1s, 1s + 99ms, 100ms, 2s, QueueOutcome::kEvictedTtl, false},
      {"pool came up, fresh budget spent", false, 1s, 1s + 100ms, 100ms, 2s,
       QueueOutcome::kEvictedTtl, true},
      {"change before enqueue", false, -100ms, 100ms, 100ms, 2s, QueueOutcome::kEvictedTtl, true},
  };
  for (const Row& row : rows) {
    const PoolRegime regime{row.empty, row.change ? enq + *row.change : TimePoint{}};
    const ExpiryVerdict v = isExpired(enq, row.satTtl, row.noEpTtl, regime, enq + row.elapsed);
    EXPECT_EQ(v.outcome, row.outcome) << row.name;
    EXPECT_EQ(v.expired, row.expired) << row.name;
  }
}

TEST(ExpiryTest, ExtremeTimesDoNotOverflow) {
  const TimePoint lo = TimePoint::min() + 1h;
  const TimePoint hi = TimePoint::max() - 1h;
  EXPECT_TRUE(isExpired(lo, 1s, 1s, PoolRegime{}, hi).expired);
  EXPECT_FALSE(isExpired(hi, 1s, 1s, PoolRegime{}, lo).expired);
  // The true elapsed time exceeds Duration::max(): saturated, it still compares correctly.
  EXPECT_TRUE(isExpired(lo, Duration::max(), 1s, PoolRegime{}, hi).expired);
  EXPECT_FALSE(isExpired(lo, Duration::max(), 1s, PoolRegime{}, lo + 1h).expired);
}

// ---------------------------------------------------------------------------------------------
// §3.3 worked examples: holdback rank, min 0.4, max 0.9, bands [100, 0, -10] -> [0.9, 0.65, 0.4].

struct WorkedExample {
  double s;
  bool items100, items0, itemsMinus10;
  Kind kind;
  Priority priority;
};

class WorkedExampleTest : public FlowControllerTest,
                          public ::testing::WithParamInterface<WorkedExample> {};

TEST_P(WorkedExampleTest, DispatchOrStop) {
  const WorkedExample& ex = GetParam();
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 100}, {.priority = 0}, {.priority = -10}};
  auto fc = make(std::move(o));
  if (ex.items100) fc->enqueue(request("a", 100), t0);
  if (ex.items0) fc->enqueue(request("b", 0), t0);
  if (ex.itemsMinus10) fc->enqueue(request("c", -10), t0);
  detector->set(ex.s);
  const DispatchResult r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, ex.kind);
  EXPECT_EQ(r.priority, ex.priority);
  const auto stats = fc->stats();
  ASSERT_EQ(stats.bands.size(), 3u);
  EXPECT_DOUBLE_EQ(*stats.bands[0].lastCeiling, 0.9);
  EXPECT_DOUBLE_EQ(*stats.bands[1].lastCeiling, 0.65);
  EXPECT_DOUBLE_EQ(*stats.bands[2].lastCeiling, 0.4);
  EXPECT_EQ(rec.dispatchedFlows().size(), ex.kind == Kind::kDispatched ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Reference, WorkedExampleTest,
    ::testing::Values(WorkedExample{0.30, true, false, false, Kind::kDispatched, 100},
                      WorkedExample{0.30, false, true, false, Kind::kDispatched, 0},
                      WorkedExample{0.50, false, false, true, Kind::kGated, -10},
                      WorkedExample{0.70, false, true, true, Kind::kGated, 0},
                      WorkedExample{0.90, true, true, true, Kind::kGated, 100}),
    [](const ::testing::TestParamInfo<WorkedExample>& info) {
      return "Row" + std::to_string(info.index);
    });

TEST_F(FlowControllerTest, StrictPriorityVector) {
  auto o = options();
  o.bands = {{.priority = 20}, {.priority = 10}};
  auto fc = make(std::move(o));
  for (int i = 0; i < 3; ++i) fc->enqueue(request("low", 10, 10 + i), t0 + std::chrono::seconds(i));
  for (int i = 0; i < 3; ++i)
    fc->enqueue(request("high", 20, 20 + i), t0 + 10s + std::chrono::seconds(i));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(fc->dispatchCycle(t0 + 20s).kind, Kind::kDispatched);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{20, 21, 22, 10, 11, 12}));
  EXPECT_EQ(fc->dispatchCycle(t0 + 20s).kind, Kind::kNothingQueued);
}

TEST_F(FlowControllerTest, HeadOfLineVector) {
  auto o = options();
  o.bands = {{.priority = 10}, {.priority = 5}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 10), t0);
  fc->enqueue(request("b", 5), t0);
  detector->set(1.0);
  const auto r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, Kind::kGated);
  EXPECT_EQ(r.priority, 10);
  EXPECT_EQ(rec.size(), 0u);
  EXPECT_EQ(fc->stats().bands[0].gatedCycles, 1u);
}

TEST_F(FlowControllerTest, EmptyGatedBandStopsLowerWork) {
  // Static map: band 100 gated at 0.5, band 0 open up to 0.8 would pass on its own, but the
  // sweep raises it... so use a host policy that writes a non-monotone-looking split instead:
  // monotonize guarantees gated bands form a suffix, so test with the holdback policy and an
  // empty top band that is gated at s = 0.95.
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 100}, {.priority = 0}};
  auto fc = make(std::move(o));
  fc->enqueue(request("b", 0), t0);
  detector->set(0.95);
  const auto r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, Kind::kGated);
  EXPECT_EQ(r.priority, 100);
}

TEST_F(FlowControllerTest, NaNSaturationGatesEverything) {
  auto fc = make(options());
  fc->enqueue(request("a", 0), t0);
  detector->set(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kGated);
  detector->set(std::numeric_limits<double>::infinity());
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kGated);
  detector->set(-3.0);  // normalized to 0
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
}

TEST_F(FlowControllerTest, EmptyPoolReadsSaturatedAndNothingDispatches) {
  auto fc = make(options());
  fc->enqueue(request("a", 0), t0);
  pool->setSize(0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kGated);
  EXPECT_TRUE(fc->poolRegime().empty);
  EXPECT_EQ(fc->poolRegime().since, t0);
}

TEST_F(FlowControllerTest, StageAwareSaturationGatesOnPrefill) {
  class StageDetector final : public SaturationDetector {
   public:
    StageDetector() : SaturationDetector("stage") {}
    double saturation(std::span<const Endpoint> eps, TimePoint) const noexcept override {
      return eps.size() == 1 && eps[0].name == "p" ? 1.5 : 0.3;
    }
    FilterResult filter(std::span<const Endpoint>, TimePoint,
                        std::span<std::size_t>) const noexcept override {
      return {};
    }
    std::string_view type() const noexcept override { return "stage"; }
  };
  auto o = options();
  o.detector = std::make_shared<StageDetector>();
  auto fc = make(std::move(o));
  Endpoint p, d;
  p.name = "p";
  p.role = EndpointRole::kPrefill;
  d.name = "d";
  pool->set({p, d});
  fc->enqueue(request("a", 0), t0);
  const auto r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, Kind::kGated);
  EXPECT_EQ(r.saturation, 1.5);
  const auto stats = fc->stats();
  EXPECT_EQ(stats.lastPrefillSaturation, 1.5);
  EXPECT_EQ(stats.lastDecodeSaturation, 0.3);
}

TEST_F(FlowControllerTest, ComputeLimitCalledOncePerCycleWithPrefilledBuffer) {
  class Spy final : public UsageLimitPolicy {
   public:
    Spy() : UsageLimitPolicy("spy") {}
    std::string_view type() const noexcept override { return "spy"; }
    int calls = 0;
    std::vector<double> seen;
    std::vector<Priority> priorities;

   protected:
    void compute(double, std::span<const Priority> p, std::span<double> c) noexcept override {
      ++calls;
      seen.assign(c.begin(), c.end());
      priorities.assign(p.begin(), p.end());
      c[0] = 0.5;  // leaves the rest at the pre-filled 1.0
    }
  };
  auto spy = std::make_shared<Spy>();
  auto o = options(spy);
  o.bands = {{.priority = -5}, {.priority = 7}};
  auto fc = make(std::move(o));
  fc->dispatchCycle(t0);
  fc->dispatchCycle(t0);
  EXPECT_EQ(spy->calls, 2);
  EXPECT_EQ(spy->seen, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(spy->priorities, (std::vector<Priority>{7, 0, -5}));
}

// §3.3 error vectors, as a host fairness policy that fails (returns no flow) or picks nothing
// eligible: the cycle is work-conserving and moves on to the next band.
class FailingFairness final : public FairnessPolicy {
 public:
  explicit FailingFairness(bool pickEmpty) : pick_empty_(pickEmpty) {}
  std::string_view type() const noexcept override { return "failing"; }
  const FlowQueueView* pick(const BandView& band, FairnessState*) const noexcept override {
    ++calls;
    if (!pick_empty_) return nullptr;
    struct Empty final : FlowQueueView {
      std::string_view flowId() const noexcept override { return "empty"; }
      std::size_t size() const noexcept override { return 0; }
      std::uint64_t bytes() const noexcept override { return 0; }
      const QueuedRequestView* head() const noexcept override { return nullptr; }
    };
    static Empty empty;
    (void)band;
    return &empty;
  }
  mutable int calls = 0;

 private:
  bool pick_empty_;
};

TEST_F(FlowControllerTest, FairnessFailureOnTheOnlyBandDispatchesNothing) {
  auto failing = std::make_shared<FailingFairness>(false);
  auto o = options();
  o.bands = {{.priority = 0, .fairness = failing}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kNothingQueued);
  EXPECT_EQ(failing->calls, 1);  // nothing is retried in the same cycle
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
}

TEST_F(FlowControllerTest, FairnessFailureOnAHigherBandContinuesToTheNext) {
  auto o = options();
  o.bands = {{.priority = 20, .fairness = std::make_shared<FailingFairness>(false)},
             {.priority = 10}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 20), t0);
  fc->enqueue(request("b", 10), t0);
  const auto r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, Kind::kDispatched);
  EXPECT_EQ(r.priority, 10);
}

TEST_F(FlowControllerTest, FairnessPickingAnEmptyQueueDispatchesNothing) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = std::make_shared<FailingFairness>(true)}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kNothingQueued);
}

TEST_F(FlowControllerTest, ExtremePrioritiesAreOrdinaryBands) {
  const Priority lo = std::numeric_limits<Priority>::min();
  const Priority hi = std::numeric_limits<Priority>::max();
  auto fc = make(options(holdbackPolicy(0.4, 0.9)));
  fc->enqueue(request("a", lo, 1), t0);
  fc->enqueue(request("a", hi, 2), t0);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{hi, 0, lo}));
  detector->set(0.5);  // ceilings [0.9, 0.65, 0.4]
  EXPECT_EQ(fc->dispatchCycle(t0).priority, hi);
  const auto gated = fc->dispatchCycle(t0);
  EXPECT_EQ(gated.kind, Kind::kGated);
  EXPECT_EQ(gated.priority, lo);
  detector->set(0.1);
  const auto last = fc->dispatchCycle(t0);
  EXPECT_EQ(last.kind, Kind::kDispatched);
  EXPECT_EQ(last.priority, lo);
}

// ---------------------------------------------------------------------------------------------
// priorityDomain

TEST_F(FlowControllerTest, ProvisionedDomainHoldsReserveForIdleBands) {
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 100}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  detector->set(0.7);  // ceilings [0.9, 0.4]: band 0 gated although band 100 is idle
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kGated);
}

TEST_F(FlowControllerTest, ActiveDomainIsWorkConserving) {
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 100}};
  o.priorityDomain = PriorityDomain::kActive;
  o.activityWindow = 1s;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  detector->set(0.7);  // only band 0 active: N = 1 -> maxCeiling 0.9
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  // A band-100 arrival keeps band 100 in the domain for the activity window after it left.
  fc->enqueue(request("h", 100), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  fc->enqueue(request("a", 0), t0 + 500ms);
  EXPECT_EQ(fc->dispatchCycle(t0 + 500ms).kind, Kind::kGated);
  EXPECT_EQ(fc->dispatchCycle(t0 + 1s).kind, Kind::kDispatched);  // window over
}

// ---------------------------------------------------------------------------------------------
// Capacity integration (§3.6)

TEST_F(FlowControllerTest, GlobalMaxRequests) {
  auto o = options();
  o.bands = {{.priority = 10}};
  o.maxRequests = 3;
  auto fc = make(std::move(o));
  for (int i = 0; i < 3; ++i) fc->enqueue(request("f", 10), t0);
  EXPECT_EQ(rec.size(), 0u);
  fc->enqueue(request("f", 10), t0);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome,
            (Outcome{QueueOutcome::kRejectedCapacity, OutcomeCause::kQueueAtCapacity}));
}

TEST_F(FlowControllerTest, BandMaxBytesAndEmptyPoolRejection) {
  auto o = options();
  o.bands = {{.priority = 10, .maxBytes = 1000}};
  auto fc = make(std::move(o));
  for (int i = 0; i < 3; ++i) fc->enqueue(request("f", 10, i, 300), t0);
  fc->enqueue(request("f", 10, 3, 300), t0);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kRejectedCapacity);
  fc->enqueue(request("f", 10, 4, 100), t0);  // exactly at the limit is allowed
  EXPECT_EQ(rec.size(), 1u);
  pool->setSize(0);
  fc->dispatchCycle(t0);  // observes the empty regime
  fc->enqueue(request("f", 10, 5, 1), t0);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[1].outcome,
            (Outcome{QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}));
}

TEST_F(FlowControllerTest, ZeroBandLimitMeansDefault) {
  auto o = options();
  o.bands = {{.priority = 0, .maxRequests = 0, .maxBytes = 0}};
  auto fc = make(std::move(o));
  const auto stats = fc->stats();
  EXPECT_EQ(stats.bands[0].maxRequests, 5000u);
  EXPECT_EQ(stats.bands[0].maxBytes, 1'000'000'000u);
}

// ---------------------------------------------------------------------------------------------
// TTL expiry (§3.7)

TEST_F(FlowControllerTest, ExpireIsInclusiveAndRegimeAware) {
  auto o = options();
  o.defaultRequestTtl = 100ms;
  o.noEndpointRequestTtl = 2s;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  EXPECT_EQ(fc->expire(t0 + 99ms), 0u);
  EXPECT_EQ(fc->expire(t0 + 100ms), 1u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome, (Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired}));
  EXPECT_EQ(rec.all()[0].finalizedAt, t0 + 100ms);

  // Empty pool: the no-endpoint budget applies, charged from the regime change.
  fc->enqueue(request("b", 0, 2), t0 + 1s);
  pool->setSize(0);
  EXPECT_EQ(fc->expire(t0 + 1s + 500ms), 0u);  // regime empty since 1.5 s
  EXPECT_EQ(fc->expire(t0 + 3s + 499ms), 0u);
  EXPECT_EQ(fc->expire(t0 + 3s + 500ms), 1u);
  EXPECT_EQ(rec.all()[1].outcome,
            (Outcome{QueueOutcome::kEvictedNoEndpoints, OutcomeCause::kNoEndpoints}));
}

TEST_F(FlowControllerTest, TtlResolution) {
  {
    auto o = options();
    o.defaultRequestTtl = 5s;  // noEndpoint follows
    auto fc = make(std::move(o));
    fc->enqueue(request("a", 0), t0);
    pool->setSize(0);
    EXPECT_EQ(fc->expire(t0 + 4s), 0u);
    EXPECT_EQ(fc->expire(t0 + 9s), 1u);
    pool->setSize(1);
  }
  {
    auto o = options();
    o.defaultRequestTtl = 0s;  // never expire
    auto fc = make(std::move(o));
    fc->enqueue(request("a", 0), t0);
    EXPECT_EQ(fc->expire(t0 + 100h), 0u);
  }
  {
    auto fc = make(options());  // unset: 60 s
    fc->enqueue(request("a", 0), t0);
    EXPECT_EQ(fc->expire(t0 + 59s), 0u);
    EXPECT_EQ(fc->expire(t0 + 60s), 1u);
  }
}

TEST_F(FlowControllerTest, PerRequestTtlAndDeadline) {
  auto fc = make(options());
  auto r1 = request("a", 0, 1);
  r1.ttl = 10ms;
  fc->enqueue(std::move(r1), t0);
  auto r2 = request("a", 0, 2);
  r2.deadline = t0 + 20ms;
  fc->enqueue(std::move(r2), t0);
  pool->setSize(0);  // the caller deadline is hard, whatever the regime
  EXPECT_EQ(fc->expire(t0 + 20ms), 1u);
  EXPECT_EQ(rec.all()[0].payload, 2);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedTtl);
  auto r3 = request("a", 0, 3);
  r3.deadline = t0;  // already passed
  fc->enqueue(std::move(r3), t0 + 1ms);
  EXPECT_EQ(rec.all()[1].outcome,
            (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kTtlExpired}));
}

TEST_F(FlowControllerTest, FarDeadlineWithNegativeClockIsKept) {
  auto fc = make(options());
  auto r = request("a", 0, 1);
  r.deadline = TimePoint::max();
  const TimePoint early = TimePoint{} - 100h;  // any epoch works
  fc->enqueue(std::move(r), early);
  EXPECT_EQ(rec.size(), 0u);
  EXPECT_EQ(fc->expire(early + 59s), 0u);  // the 60 s default TTL still applies
  EXPECT_EQ(fc->expire(early + 60s), 1u);
}

TEST_F(FlowControllerTest, DeadHeadIsEvictedAndDoesNotCostTheDispatch) {
  auto o = options();
  o.defaultRequestTtl = 100ms;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  fc->enqueue(request("a", 0, 2), t0 + 50ms);
  const auto r = fc->dispatchCycle(t0 + 120ms);
  EXPECT_EQ(r.kind, Kind::kDispatched);
  EXPECT_EQ(r.evicted, 1u);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedTtl);
  EXPECT_EQ(rec.all()[1].payload, 2);
  EXPECT_TRUE(rec.all()[1].outcome.dispatched());
}

// ---------------------------------------------------------------------------------------------
// Cancellation

TEST_F(FlowControllerTest, CancelRemovesImmediatelyAndFreesCapacity) {
  auto o = options();
  o.bands = {{.priority = 0, .maxRequests = 1}};
  auto fc = make(std::move(o));
  Ticket t = fc->enqueue(request("a", 0, 1), t0);
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
  EXPECT_TRUE(t.cancel());
  EXPECT_FALSE(t.cancel());  // exactly once
  EXPECT_EQ(fc->stats().queuedRequests, 0u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome,
            (Outcome{QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled}));
  fc->enqueue(request("a", 0, 2), t0);  // capacity was freed at once
  EXPECT_EQ(rec.size(), 1u);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  EXPECT_EQ(rec.dispatchedPayloads(), std::vector<int>{2});
}

TEST_F(FlowControllerTest, CancelledRequestIsNeverDispatched) {
  auto fc = make(options());
  Ticket a = fc->enqueue(request("a", 0, 1), t0);
  Ticket b = fc->enqueue(request("a", 0, 2), t0);
  Ticket moved = std::move(a);
  EXPECT_TRUE(moved.cancel());
  EXPECT_EQ(fc->dispatchCycle(t0).id, b.id());
  EXPECT_FALSE(b.cancel());  // already dispatched
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kNothingQueued);
  EXPECT_EQ(rec.size(), 2u);
}

TEST_F(FlowControllerTest, MovedFromTicketIsEmpty) {
  auto fc = make(options());
  Ticket a = fc->enqueue(request("a", 0), t0);
  const RequestId id = a.id();
  Ticket b = std::move(a);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): the moved-from state
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(a.cancel());
  EXPECT_EQ(b.id(), id);
  Ticket c;
  c = std::move(b);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): the moved-from state
  EXPECT_FALSE(b.valid());
  EXPECT_TRUE(c.cancel());
}

TEST_F(FlowControllerTest, TicketOutlivingControllerIsHarmless) {
  Ticket t;
  {
    auto fc = make(options());
    t = fc->enqueue(request("a", 0), t0);
  }
  EXPECT_FALSE(t.cancel());
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedOther);
}

TEST_F(FlowControllerTest, CallbackMayReenterTheController) {
  FlowController* self = nullptr;
  auto o = options();
  int reentered = 0;
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched() && reentered++ == 0) {
      self->enqueue(request("again", 0, 99), c.finalizedAt);
      (void)self->stats();
    }
  };
  auto fc = make(std::move(o));
  self = fc.get();
  fc->enqueue(request("a", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  EXPECT_EQ(fc->stats().queuedRequests, 1u);
}

TEST_F(FlowControllerTest, CallbackMayCancelOthersAndShutDown) {
  FlowController* self = nullptr;
  RequestId other = 0;
  std::vector<Outcome> seen;
  auto o = options();
  o.onOutcome = [&](Completion&& c) {
    seen.push_back(c.outcome);
    if (c.outcome.dispatched()) {
      EXPECT_TRUE(self->cancel(other));  // delivered re-entrantly, before we return
      self->shutdown(c.finalizedAt);     // no lock is held: does not deadlock
    }
  };
  auto fc = make(std::move(o));
  self = fc.get();
  fc->enqueue(request("a", 0), t0);
  other = fc->enqueue(request("b", 0), t0).id();
  fc->enqueue(request("c", 0), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0].dispatched());
  EXPECT_EQ(seen[1].kind, QueueOutcome::kEvictedCancelled);
  EXPECT_EQ(seen[2].kind, QueueOutcome::kEvictedOther);
  EXPECT_EQ(toString(fc->dispatchCycle(t0).kind), "stopped");
}

// ---------------------------------------------------------------------------------------------
// Shutdown

TEST_F(FlowControllerTest, ShutdownFinalizesEverythingAndRejectsNewWork) {
  auto o = options();
  o.bands = {{.priority = 5}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 5, 1), t0);
  fc->enqueue(request("b", 0, 2), t0);
  fc->shutdown(t0 + 1s);
  ASSERT_EQ(rec.size(), 2u);
  for (const auto& r : rec.all()) {
    EXPECT_EQ(r.outcome, (Outcome{QueueOutcome::kEvictedOther, OutcomeCause::kNotRunning}));
    EXPECT_EQ(r.finalizedAt, t0 + 1s);
  }
  fc->enqueue(request("c", 5, 3), t0 + 2s);
  ASSERT_EQ(rec.size(), 3u);
  EXPECT_EQ(rec.all()[2].outcome,
            (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kNotRunning}));
  EXPECT_EQ(fc->dispatchCycle(t0 + 2s).kind, Kind::kStopped);
  fc->shutdown(t0 + 3s);  // idempotent
  EXPECT_EQ(rec.size(), 3u);
  EXPECT_TRUE(fc->stats().stopped);
}

// ---------------------------------------------------------------------------------------------
// Bands and provisioning (§3.10)

TEST_F(FlowControllerTest, PriorityZeroAlwaysExists) {
  auto o = options();
  o.bands = {{.priority = 3}};
  auto fc = make(std::move(o));
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{3, 0}));
}

TEST_F(FlowControllerTest, ProvisionOnFirstUseFromTemplates) {
  auto o = options();
  o.defaultBand.maxRequests = 7;
  o.defaultNegativeBand = BandTemplate{.maxRequests = 2};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 9), t0);
  fc->enqueue(request("a", -4), t0);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{9, 0, -4}));
  const auto stats = fc->stats();
  EXPECT_EQ(stats.bands[0].maxRequests, 7u);
  EXPECT_EQ(stats.bands[2].maxRequests, 2u);
}

TEST_F(FlowControllerTest, UnprovisionedPriorityFallsBackToBandZero) {
  auto o = options();
  o.provisionOnFirstUse = false;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 9, 1), t0);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{0}));
  fc->dispatchCycle(t0);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].requested, 9);
  EXPECT_EQ(rec.all()[0].band, 0);
}

TEST_F(FlowControllerTest, MaxBandsCapsProvisioning) {
  auto o = options();
  o.maxBands = 2;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 1), t0);
  fc->enqueue(request("a", 2), t0);  // cap reached: band 0
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{1, 0}));
}

TEST_F(FlowControllerTest, DesiredPrioritiesProvisionAndRemoveIdleBands) {
  auto o = options();
  o.bands = {{.priority = 50}};
  auto fc = make(std::move(o));
  const std::vector<Priority> want{10, 20};
  fc->setDesiredPriorities(want);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 20, 10, 0}));
  fc->enqueue(request("a", 20), t0);
  const std::vector<Priority> none;
  fc->setDesiredPriorities(none);  // 10 is idle and removed; 20 has work; 50, 0 are initial
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 20, 0}));
  fc->dispatchCycle(t0);
  fc->setDesiredPriorities(none);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{50, 0}));
  // Counters of a removed band survive in the stats.
  const auto stats = fc->stats();
  ASSERT_EQ(stats.bands.size(), 4u);
  EXPECT_FALSE(stats.bands[1].provisioned);
  EXPECT_EQ(stats.bands[1].priority, 20);
  EXPECT_EQ(stats.bands[1].outcomes[0], 1u);
}

TEST_F(FlowControllerTest, ExpireCollectsIdleFlowsAndBands) {
  auto o = options();
  o.flowIdleTimeout = 1min;
  o.bandIdleTimeout = 2min;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 7), t0);
  fc->dispatchCycle(t0);
  EXPECT_EQ(fc->stats().bands[0].flows, 1u);
  fc->expire(t0 + 59s);
  EXPECT_EQ(fc->stats().bands[0].flows, 1u);
  fc->expire(t0 + 60s);
  EXPECT_EQ(fc->stats().bands[0].flows, 0u);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{7, 0}));
  fc->expire(t0 + 120s);
  EXPECT_EQ(fc->bandPriorities(), (std::vector<Priority>{0}));
}

// ---------------------------------------------------------------------------------------------
// Fairness and ordering (§5)

TEST_F(FlowControllerTest, RoundRobinVector) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = roundRobinFairness()}};
  auto fc = make(std::move(o));
  for (int i = 0; i < 2; ++i) {
    fc->enqueue(request("flow3", 0), t0);
    fc->enqueue(request("flow1", 0), t0);
    fc->enqueue(request("flow2", 0), t0);
  }
  for (int i = 0; i < 6; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(rec.dispatchedFlows(),
            (std::vector<std::string>{"flow1", "flow2", "flow3", "flow1", "flow2", "flow3"}));
}

TEST_F(FlowControllerTest, RoundRobinSkipsEmptyAndFollowsMembership) {
  auto o = options();
  o.bands = {{.priority = 0, .fairness = roundRobinFairness()}};
  auto fc = make(std::move(o));
  fc->enqueue(request("flow1", 0), t0);
  fc->enqueue(request("flow2", 0), t0);
  fc->dispatchCycle(t0);  // flow1
  fc->enqueue(request("flow3", 0), t0);
  fc->enqueue(request("flow1", 0), t0);
  fc->dispatchCycle(t0);  // flow2
  fc->dispatchCycle(t0);  // flow3
  fc->dispatchCycle(t0);  // flow1 (wrap)
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"flow1", "flow2", "flow3", "flow1"}));
}

TEST_F(FlowControllerTest, GlobalStrictIsOneLogicalFcfsQueue) {
  auto fc = make(options());
  fc->enqueue(request("x", 0, 1), t0 + 3ms);
  fc->enqueue(request("y", 0, 2), t0 + 1ms);
  fc->enqueue(request("x", 0, 3), t0 + 2ms);
  fc->enqueue(request("z", 0, 4), t0 + 1ms);  // same time as payload 2: sequence breaks the tie
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0 + 5ms);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{2, 4, 3, 1}));
}

TEST_F(FlowControllerTest, FcfsIsExactForIdenticalTimestamps) {
  auto fc = make(options());
  for (int i = 0; i < 50; ++i) fc->enqueue(request(i % 2 ? "a" : "b", 0, i), t0);
  for (int i = 0; i < 50; ++i) fc->dispatchCycle(t0);
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(rec.dispatchedPayloads(), expected);
}

TEST_F(FlowControllerTest, EdfOrdersByDeadline) {
  auto o = options();
  o.bands = {{.priority = 0, .ordering = edfOrdering()}};
  o.defaultRequestTtl = 0s;  // no TTL unless the request has one
  auto fc = make(std::move(o));
  auto none = request("f", 0, 1);
  auto late = request("f", 0, 2);
  late.ttl = 500ms;
  auto soon = request("f", 0, 3);
  soon.deadline = t0 + 100ms;
  auto tie = request("f", 0, 4);
  tie.ttl = 400ms;  // same deadline as `late` (t0+500ms), but enqueued later
  fc->enqueue(std::move(none), t0);
  fc->enqueue(std::move(late), t0);
  fc->enqueue(std::move(soon), t0);
  fc->enqueue(std::move(tie), t0 + 100ms);
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0 + 100ms - 1ns);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{3, 2, 4, 1}));
}

TEST(EdfOrderingTest, NoTtlSortsLastAndNeverOverflows) {
  QueuedRequestView a, b;
  a.enqueueTime = TimePoint::max() - 1ns;
  a.effectiveTtl = 1h;
  b.enqueueTime = TimePoint{};
  EXPECT_EQ(EdfOrderingPolicy::deadlineOf(a), TimePoint::max());
  EXPECT_EQ(EdfOrderingPolicy::deadlineOf(b), TimePoint::max());
  EdfOrderingPolicy edf;
  EXPECT_TRUE(edf.less(b, a));  // equal deadlines: earlier enqueue first
}

// ---------------------------------------------------------------------------------------------
// Misc: validation, empty flow id, stats, Prometheus

TEST(FlowControllerCreateTest, ReportsEveryProblem) {
  FlowControllerOptions o;
  o.bands = {{.priority = 1}, {.priority = 1}};
  o.defaultRequestTtl = -1s;
  o.noEndpointRequestTtl = -2ms;
  o.expiryInterval = 0s;
  o.flowIdleTimeout = 10min;
  o.bandIdleTimeout = 5min;
  auto result = FlowController::create(std::move(o));
  ASSERT_FALSE(result.ok());
  const std::string text = result.diagnostics().toString();
  EXPECT_EQ(result.diagnostics().errorCount(), 9u) << text;
  EXPECT_NE(text.find("/policy"), std::string::npos);
  EXPECT_NE(text.find("/bands/1/priority: duplicate priority level 1"), std::string::npos);
  EXPECT_NE(text.find("defaultRequestTtl cannot be negative, but got -1000ms"), std::string::npos);
  EXPECT_NE(text.find("/expiryInterval: expiryInterval must be positive"), std::string::npos);
  EXPECT_NE(text.find("/bandIdleTimeout: must be >= flowIdleTimeout"), std::string::npos);
}

TEST_F(FlowControllerTest, EmptyFlowIdIsRejectedOther) {
  auto fc = make(options());
  fc->enqueue(request("", 0), t0);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome,
            (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kInvalidRequest}));
}

TEST_F(FlowControllerTest, StatsAndPrometheus) {
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 10, .maxRequests = 4}};
  o.maxRequests = 10;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 10, 0, 100), t0);
  fc->enqueue(request("a", 0, 0, 50), t0);
  detector->set(0.5);
  fc->dispatchCycle(t0);  // band 10 (0.9) dispatches
  fc->dispatchCycle(t0);  // band 0 (0.4) gated
  const auto stats = fc->stats();
  EXPECT_EQ(stats.queuedRequests, 1u);
  EXPECT_EQ(stats.queuedBytes, 50u);
  EXPECT_EQ(stats.cycles, 2u);
  EXPECT_EQ(stats.outcomes[0], 1u);
  EXPECT_EQ(stats.bands[1].gatedCycles, 1u);
  const std::string text = renderPrometheus(stats, "pool-a");
  EXPECT_NE(text.find("# TYPE holdback_flow_control_queue_size gauge\n"), std::string::npos);
  EXPECT_NE(
      text.find("holdback_flow_control_queue_size{priority=\"0\",inference_pool=\"pool-a\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("holdback_flow_control_queue_bytes{priority=\"0\",inference_pool=\"pool-a\"} 50\n"),
      std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_requests_total{outcome=\"Dispatched\",priority=\"10\","
                      "inference_pool=\"pool-a\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_pool_saturation{stage=\"effective\",inference_pool="
                      "\"pool-a\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_global_capacity_utilization_requests{inference_pool="
                      "\"pool-a\"} 0.1\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_capacity_utilization_requests{priority=\"10\","
                      "inference_pool=\"pool-a\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_gated_cycles_total{priority=\"0\",inference_pool="
                      "\"pool-a\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(text.find("global_capacity_utilization_bytes"), std::string::npos);  // no byte cap
  EXPECT_NE(text.find("# TYPE holdback_flow_control_request_queue_duration_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_request_queue_duration_seconds_bucket{outcome="
                      "\"Dispatched\",priority=\"10\",le=\"0.001\",inference_pool=\"pool-a\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("holdback_flow_control_request_queue_duration_seconds_count{outcome="
                      "\"Dispatched\",priority=\"0\",inference_pool=\"pool-a\"} 0\n"),
            std::string::npos);
  EXPECT_NE(renderPrometheus(stats, "a\"b").find("inference_pool=\"a\\\"b\""), std::string::npos);
}

TEST_F(FlowControllerTest, QueueDurationHistogramCountsDispatchedWaits) {
  auto o = options();
  o.defaultRequestTtl = 0s;  // no TTL: the 2 h wait below is dispatched, not evicted
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("a", 0), t0);
  fc->dispatchCycle(t0);         // 0 s: first bucket (<= 1 ms)
  fc->dispatchCycle(t0 + 30ms);  // (25 ms, 50 ms]
  fc->dispatchCycle(t0 + 2h);    // above 60 s: +Inf only
  const BandStats b = fc->stats().bands[0];
  EXPECT_EQ(b.queueDurationBuckets[0], 1u);
  EXPECT_EQ(b.queueDurationBuckets[4], 1u);
  EXPECT_EQ(b.queueDurationBuckets[kQueueDurationBucketsSeconds.size()], 1u);
  EXPECT_DOUBLE_EQ(b.queueDurationSumSeconds, 0.03 + 7200.0);
}

// ---------------------------------------------------------------------------------------------
// dispatchCycle does not allocate in steady state

TEST_F(FlowControllerTest, DispatchCycleDoesNotAllocate) {
  for (const PriorityDomain domain : {PriorityDomain::kProvisioned, PriorityDomain::kActive}) {
    std::vector<Completion> done;
    done.reserve(4096);
    auto o = options(holdbackPolicy(0.4, 0.9));
    o.bands = {{.priority = 100},
               {.priority = 50, .fairness = roundRobinFairness()},
               {.priority = -10, .ordering = edfOrdering()}};
    o.onOutcome = [&](Completion&& c) { done.push_back(std::move(c)); };
    o.priorityDomain = domain;
    auto fc = make(std::move(o));
    // 200 requests already dead at the head of band 100: evicted by the cycles (32 at most per
    // cycle), which still dispatch.
    for (int i = 0; i < 200; ++i) {
      auto r = request("short-lived-flow-with-a-long-identifier", 100, -1);
      r.ttl = 1ms;
      fc->enqueue(std::move(r), t0 - 1s);
    }
    const Priority prios[] = {100, 50, 0, -10};
    for (int i = 0; i < 2000; ++i) {
      fc->enqueue(request("flow-with-a-long-identifier-" + std::to_string(i % 37), prios[i % 4], i),
                  t0);
    }
    detector->set(0.95);
    fc->dispatchCycle(t0);  // warm-up (gated): scratch buffers of the evaluator
    detector->set(0.1);
    std::size_t allocations = 0;
    {
      holdback::testing::AllocationCounter counter;
      for (int i = 0; i < 1000; ++i) fc->dispatchCycle(t0);
      detector->set(0.95);  // gated cycles
      for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
      detector->set(0.5);  // bands 100 and 50 drained: 0 open (0.65), -10 gated (0.4)
      for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
      allocations = counter.count();
    }
    EXPECT_EQ(allocations, 0u);
    std::size_t dispatched = 0;
    std::size_t evicted = 0;
    for (const Completion& c : done) {
      if (c.outcome.dispatched()) ++dispatched;
      if (c.outcome.kind == QueueOutcome::kEvictedTtl) ++evicted;
    }
    // 1,100 dispatching cycles, minus the 6 cycles that hit the cap of 32 dead heads (200 / 32)
    // and ended without a dispatch.
    EXPECT_EQ(dispatched, 1100u - 200u / 32u);
    EXPECT_EQ(evicted, 200u);
  }
}

}  // namespace
}  // namespace holdback
