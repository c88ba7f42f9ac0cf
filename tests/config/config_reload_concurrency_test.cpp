// Hot reload under load: producers keep enqueueing while bundles are swapped into the running
// controller; every request ends with exactly one outcome. Runs under ThreadSanitizer
// (scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "holdback/config/endpoint_picker_config.hpp"

namespace holdback::config {
namespace {

constexpr const char* kConfigA = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
  - name: holdback
    type: priority-holdback-policy
    parameters: {minCeiling: 0.4, maxCeiling: 1.0}
flowControl:
  usageLimitPolicyPluginRef: holdback
  maxRequests: "400"
  defaultRequestTTL: 50ms
  priorityBands:
    - {priority: 100, fairnessPolicyRef: round-robin-fairness-policy, orderingPolicyRef: edf-ordering-policy}
    - {priority: 0, maxRequests: "300"}
)";

constexpr const char* kConfigB = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
  - name: conc
    type: concurrency-detector
    parameters: {maxConcurrency: 10}
flowControl:
  saturationDetector: {pluginRef: conc}
  defaultRequestTTL: 2s
  noEndpointRequestTTL: 0s
  defaultNegativePriorityBand: {maxRequests: "20"}
  priorityBands:
    - {priority: 50}
    - {priority: 0, orderingPolicyRef: edf-ordering-policy}
    - {priority: -10, maxRequests: "30", fairnessPolicyRef: round-robin-fairness-policy}
)";

TEST(ConfigReloadConcurrencyTest, ReloadUnderLoadLosesNothing) {
  const auto a = loadEndpointPickerConfigText(kConfigA);
  const auto b = loadEndpointPickerConfigText(kConfigB);
  ASSERT_TRUE(a) << a.diagnostics().toString();
  ASSERT_TRUE(b) << b.diagnostics().toString();

  std::mutex outcomes_mu;
  std::unordered_map<RequestId, int> outcomes;
  FlowControllerOptions options = a.value()->controller;
  // A pool of two endpoints whose metrics are always fresh; the dispatcher moves their load.
  auto pool = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(2),
                                                     VectorEndpointSource::Freshness::kStampNow);
  options.endpoints = pool;
  options.onOutcome = [&](Completion&& c) {
    std::lock_guard lock(outcomes_mu);
    outcomes[c.id] += 1;
  };
  auto created = FlowController::create(std::move(options));
  ASSERT_TRUE(created) << created.diagnostics().toString();
  FlowController& controller = *created.value();

  constexpr int kProducers = 2;
  constexpr int kPerProducer = 1500;
  constexpr int kReloads = 40;
  std::atomic<int> reloads{0};
  std::atomic<int> producers_left{kProducers};
  std::vector<std::vector<RequestId>> ids(kProducers);
  std::vector<std::thread> threads;
  threads.reserve(kProducers);
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      const Priority priorities[] = {100, 50, 0, -10, -3, 7};
      // At least kPerProducer each, and on until every reload has happened.
      for (int i = 0; i < 100 * kPerProducer && (i < kPerProducer || reloads.load() < kReloads);
           ++i) {
        FlowRequest r;
        r.flowId = "flow-" + std::to_string((p * 7 + i) % 5);
        r.priority = priorities[i % 6];
        r.sizeBytes = 100;
        Ticket t = controller.enqueue(std::move(r));
        ids[p].push_back(t.id());
        if (i % 17 == 0) t.cancel();
      }
      producers_left.fetch_sub(1);
    });
  }
  threads.emplace_back([&] {  // dispatcher + expiry
    std::uint64_t cycle = 0;
    while (producers_left.load() > 0) {
      const double q = static_cast<double>(cycle++ % 8);
      pool->update([q](std::vector<Endpoint>& endpoints) {
        for (Endpoint& e : endpoints) {
          e.waitingQueueSize = q;
          e.kvCacheUsage = q / 10.0;
        }
      });
      const TimePoint now = Clock::now();
      controller.dispatchCycle(now);
      controller.dispatchCycle(now);
      controller.expire(now);
    }
  });
  std::atomic<bool> applied_error{false};
  threads.emplace_back([&] {  // the reloader
    for (int r = 0; r < kReloads; ++r) {
      const Diagnostics d = applyBundle(controller, r % 2 == 0 ? *b.value() : *a.value());
      if (d.hasErrors()) applied_error = true;
      reloads.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(applied_error.load());
  EXPECT_EQ(reloads.load(), kReloads);

  // An invalid reload leaves the stack untouched.
  const auto before = controller.bandPriorities();
  FlowControllerOptions broken = b.value()->controller;
  broken.policy = nullptr;
  EXPECT_TRUE(controller.reconfigure(broken).hasErrors());
  EXPECT_EQ(controller.bandPriorities(), before);

  controller.shutdown();
  std::lock_guard lock(outcomes_mu);
  std::size_t total = 0;
  for (const auto& list : ids) {
    for (RequestId id : list) {
      ASSERT_EQ(outcomes.count(id), 1u) << "request " << id << " has no outcome";
      EXPECT_EQ(outcomes[id], 1) << "request " << id;
      ++total;
    }
  }
  EXPECT_EQ(outcomes.size(), total);
  const FlowControllerStats stats = controller.stats();
  std::uint64_t counted = 0;
  for (std::uint64_t n : stats.outcomes) counted += n;
  EXPECT_EQ(counted, total);
  EXPECT_EQ(stats.queuedRequests, 0u);
}

}  // namespace
}  // namespace holdback::config
