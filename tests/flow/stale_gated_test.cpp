// The stale-pool diagnostic: cycles gated while every endpoint's telemetry is stale are counted
// (FlowControllerStats::staleGatedCycles, flow_control_stale_gated_cycles_total), apart from
// cycles gated by a pool that is really full.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using Freshness = VectorEndpointSource::Freshness;

struct StalePoolRun {
  FlowControllerStats stats;
  std::size_t dispatched = 0;
};

// Three cycles over two endpoints with one request queued per cycle at priority 0.
StalePoolRun runStalePool(std::vector<Endpoint> pool, Freshness freshness) {
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create({}).value());
  o.detector = std::move(UtilizationDetector::create({}).value());
  o.endpoints = std::make_shared<VectorEndpointSource>(std::move(pool), freshness);
  o.onOutcome = [](Completion&&) {};
  auto fc = std::move(FlowController::create(std::move(o)).value());
  const TimePoint t = TimePoint{} + std::chrono::hours(2);
  StalePoolRun run;
  for (int i = 0; i < 3; ++i) {
    fc->enqueue(testing::request("f", 0), t);
    if (fc->dispatchCycle(t).kind == DispatchResult::Kind::kDispatched) ++run.dispatched;
  }
  run.stats = fc->stats();
  return run;
}

TEST(StaleGatedCyclesTest, UnstampedTelemetryGatesEveryCycleAndIsCounted) {
  // No updateTime: the utilization detector sees two stale endpoints, the pool reads 1.0.
  const StalePoolRun run = runStalePool(VectorEndpointSource::named(2), Freshness::kAsPublished);
  EXPECT_EQ(run.dispatched, 0u);
  EXPECT_DOUBLE_EQ(run.stats.lastSaturation, 1.0);
  EXPECT_EQ(run.stats.cycles, 3u);
  EXPECT_EQ(run.stats.staleGatedCycles, 3u);
  EXPECT_NE(renderPrometheus(run.stats, "p")
                .find("holdback_flow_control_stale_gated_cycles_total{inference_pool=\"p\"} 3\n"),
            std::string::npos);
}

TEST(StaleGatedCyclesTest, StampedTelemetryDispatchesAndCountsNothing) {
  const StalePoolRun run = runStalePool(VectorEndpointSource::named(2), Freshness::kStampNow);
  EXPECT_EQ(run.dispatched, 3u);
  EXPECT_EQ(run.stats.staleGatedCycles, 0u);
}

TEST(StaleGatedCyclesTest, AFullFreshPoolIsGatedButNotCountedAsStale) {
  std::vector<Endpoint> pool = VectorEndpointSource::named(2);
  for (Endpoint& e : pool) e.kvCacheUsage = 1.0;  // over the KV threshold: saturated
  const StalePoolRun run = runStalePool(std::move(pool), Freshness::kStampNow);
  EXPECT_EQ(run.dispatched, 0u);
  EXPECT_GE(run.stats.lastSaturation, 1.0);
  EXPECT_EQ(run.stats.staleGatedCycles, 0u);
}

TEST(StaleGatedCyclesTest, OneFreshEndpointIsNotAnAllStalePool) {
  // One stale and one saturated fresh endpoint: gated, but not every endpoint is stale.
  std::vector<Endpoint> pool = VectorEndpointSource::named(2);
  pool[1].kvCacheUsage = 1.0;
  pool[1].updateTime = TimePoint{} + std::chrono::hours(2);
  const StalePoolRun run = runStalePool(std::move(pool), Freshness::kAsPublished);
  EXPECT_EQ(run.dispatched, 0u);
  EXPECT_EQ(run.stats.staleGatedCycles, 0u);
}

}  // namespace
}  // namespace holdback
