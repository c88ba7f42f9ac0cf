// Regressions the Go endpoint picker hit after the revision holdback ported, each as the symptom
// an operator saw:
//   - a state reaper deleted the in-flight accounting of live requests that had not yet sent a
//     response chunk (a long prefill, a slow first token, a silent stream), so the gateway saw an
//     idle engine and kept dispatching (engine occupancy from 28 to ~1700);
//   - a detector that always read 0, so flow control never gated an overloaded pool;
//   - stale metrics that read as saturation and halted every dispatch with nothing saying why.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/stale_endpoints.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;
using Kind = DispatchResult::Kind;

// ---- live requests keep their lease and ledger entries ---------------------------------------

// Three requests dispatched and never heard from again for most of the lease timeout (a long
// prefill: no token; a slow first token: one lease update after minutes; a silent stream: no
// update at all). Expiry passes and dispatch cycles every second must leave every lease alone;
// only the host's release ends them (as "released", not "reaped").
TEST_F(FlowControllerTest, SilentLiveRequestsKeepTheirLeases) {
  auto o = options();
  o.defaultRequestTtl = 0s;
  o.leaseTimeout = 10min;
  o.eviction.enabled = true;
  o.eviction.evict = [](const Revocation&) {};
  auto fc = make(std::move(o));
  std::vector<Ticket> tickets;
  for (const char* flow : {"long-prefill", "slow-first-token", "silent-stream"}) {
    tickets.push_back(fc->enqueue(request(flow, 0), t0));
    ASSERT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  }
  ASSERT_EQ(fc->stats().eviction.leases, 3u);
  for (TimePoint t = t0 + 1s; t < t0 + 10min; t += 1s) {
    fc->expire(t);
    fc->dispatchCycle(t);
    if (t == t0 + 4min) {
      EXPECT_TRUE(fc->ticket(tickets[1].id()).updateLease(600, 1));  // first token
    }
    ASSERT_EQ(fc->stats().eviction.leases, 3u) << "at +" << (t - t0) / 1s << " s";
  }
  for (Ticket& t : tickets) EXPECT_TRUE(t.release(t0 + 10min - 1ms));
  const FlowControllerStats s = fc->stats();
  EXPECT_EQ(s.eviction.leases, 0u);
  EXPECT_EQ(s.eviction.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReleased)], 3u);
  EXPECT_EQ(s.eviction.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReaped)], 0u);
}

// The same requests in the dispatch ledger: nothing ages out of it. Ten simulated minutes of
// scrapes (every 50 ms) showing the three as running leave them in flight, and the pool reads
// full to the concurrency detector all along (upstream's symptom: the count fell to 0 and the
// gateway sent more).
TEST(UpstreamRegressionTest, LedgerKeepsSilentRequestsInFlight) {
  DispatchLedger ledger;
  const EndpointId id = ledger.registerEndpoint("ep0");
  const TimePoint t0 = TimePoint{} + 1h;
  ASSERT_TRUE(ledger.installScrape(id, {.updateTime = t0}));
  std::vector<DispatchHandle> handles;
  for (int i = 0; i < 3; ++i) handles.push_back(ledger.dispatch(id, 500));
  auto detector = std::move(ConcurrencyDetector::create({.maxConcurrency = 3})).value();
  std::vector<Endpoint> pool(1);
  pool[0].name = "ep0";
  for (TimePoint t = t0 + 50ms; t <= t0 + 10min; t += 50ms) {
    ASSERT_TRUE(ledger.installScrape(id, {.updateTime = t, .runningRequests = 3}));
    if ((t - t0) % 10s != 0s) continue;
    ledger.fill(pool);
    ASSERT_EQ(pool[0].inFlightRequests, 3) << "at +" << (t - t0) / 1s << " s";
    ASSERT_EQ(pool[0].inFlightTokens, 1500);
    ASSERT_GE(detector->saturation(pool, t), 1.0);
  }
  for (DispatchHandle& h : handles) h.release();
  ledger.fill(pool);
  EXPECT_EQ(pool[0].inFlightRequests, 0);
  EXPECT_LT(detector->saturation(pool, t0 + 10min), 1.0);
}

// A controller over a fixed pool, discarding outcomes.
std::unique_ptr<FlowController> controllerOverPool(std::shared_ptr<const SaturationDetector> d,
                                                   const std::vector<Endpoint>& pool,
                                                   std::shared_ptr<UsageLimitPolicy> policy) {
  FlowControllerOptions o;
  o.policy = std::move(policy);
  o.detector = std::move(d);
  o.endpoints = std::make_shared<VectorEndpointSource>(pool);
  o.onOutcome = [](Completion&&) {};
  return std::move(FlowController::create(std::move(o))).value();
}

// ---- no built-in detector reads 0 for an overloaded pool --------------------------------------

Endpoint overloadedEndpoint(const std::string& name, TimePoint at) {
  Endpoint e;
  e.name = name;
  e.updateTime = at;
  e.waitingQueueSize = 50;
  e.runningRequests = 256;
  e.kvCacheUsage = 1.0;
  e.inFlightRequests = 300;
  e.inFlightTokens = 2'000'000;
  e.maxRunningRequests = 256;
  return e;
}

// Every built-in detector type with its defaults (as a config file declares it), and each
// concurrency mode: an overloaded, freshly scraped pool reads >= 1 and the controller gates.
TEST(UpstreamRegressionTest, NoBuiltInDetectorReadsZeroForAnOverloadedPool) {
  const TimePoint now = TimePoint{} + 1h;
  const std::vector<Endpoint> pool{overloadedEndpoint("a", now), overloadedEndpoint("b", now)};
  for (const char* params : {R"({"name": "d", "type": "utilization-detector"})",
                             R"({"name": "d", "type": "concurrency-detector"})",
                             R"({"name": "d", "type": "concurrency-detector",)"
                             R"( "parameters": {"concurrencyMode": "tokens"}})",
                             R"({"name": "d", "type": "concurrency-detector",)"
                             R"( "parameters": {"concurrencyMode": "hybrid"}})"}) {
    const auto loaded = config::loadEndpointPickerConfigText(
        std::string(R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
                       "featureGates": ["flowControl"], "plugins": [)") +
        params + R"(], "flowControl": {"saturationDetector": {"pluginRef": "d"}}})");
    ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
    const SaturationDetector& d = *loaded.value()->detector;
    EXPECT_EQ(d.name(), "d");
    EXPECT_GE(d.saturation(pool, now), 1.0) << params;

    auto fc = controllerOverPool(loaded.value()->detector, pool, loaded.value()->policy);
    fc->enqueue(request("f", 0), now);
    EXPECT_EQ(fc->dispatchCycle(now).kind, Kind::kGated) << params;
  }
}

// ---- stale metrics: the stall is attributed, and the fail-open option works ---------------------

TEST(UpstreamRegressionTest, StaleMetricsGateVisiblyOrFailOpenByChoice) {
  const TimePoint now = TimePoint{} + 1h;
  std::vector<Endpoint> pool = VectorEndpointSource::named(3);
  for (Endpoint& e : pool) e.updateTime = now - 1h;  // every scrape failing for an hour
  auto closed = std::move(UtilizationDetector::create({})).value();
  // Fail closed (default, as upstream): the pool reads saturated and dispatch stops ...
  std::shared_ptr<const SaturationDetector> fail_closed = std::move(closed);
  {
    auto fc = controllerOverPool(fail_closed, pool, testing::staticPolicy());
    fc->enqueue(request("f", 0), now);
    EXPECT_EQ(fc->dispatchCycle(now).kind, Kind::kGated);
  }
  // ... and it is not silent: the stale-endpoints gauge names the cause, with one log line.
  std::vector<std::string> lines;
  StaleEndpointMonitor monitor([&](std::string_view line) { lines.emplace_back(line); });
  monitor.update(static_cast<const UtilizationDetector&>(*fail_closed), pool, now);
  EXPECT_EQ(monitor.count(), 3u);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(renderStaleEndpoints(monitor.count(), fail_closed->name(), "pool")
                .find("flow_control_stale_endpoints"),
            std::string::npos);
  // stalenessPolicy: ignore: the all-stale pool reads 0 and dispatch goes on.
  std::shared_ptr<const SaturationDetector> fail_open =
      std::move(UtilizationDetector::create({.stalenessPolicy = StalenessPolicy::kIgnore})).value();
  auto fc = controllerOverPool(fail_open, pool, testing::staticPolicy());
  fc->enqueue(request("f", 0), now);
  EXPECT_EQ(fc->dispatchCycle(now).kind, Kind::kDispatched);
}

}  // namespace
}  // namespace holdback
