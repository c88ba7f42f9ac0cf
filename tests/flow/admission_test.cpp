// Admission: the §3.6 capacity table and the §3.7 expiry table (pure rules), capacity in the
// controller, option validation and invalid requests.
#include "holdback/flow/flow_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FakeDetector;
using testing::FakeEndpoints;
using testing::FlowControllerTest;
using testing::holdbackPolicy;
using testing::Recorder;
using testing::request;
using testing::staticPolicy;
using Kind = DispatchResult::Kind;

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
  EXPECT_NE(text.find("defaultRequestTtl cannot be negative, but got -1s"), std::string::npos);
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

}  // namespace
}  // namespace holdback
