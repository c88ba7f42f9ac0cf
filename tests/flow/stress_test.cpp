// FlowController under concurrency (run under ThreadSanitizer by scripts/test.sh): producers
// enqueue and cancel at random while the runner thread dispatches and expires, saturation and the
// pool regime flip at random, and then shutdown. Every request must end with exactly one outcome
// and every counter must add up.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

// One endpoint; the chaos thread empties and refills it while the runner reads it.
std::shared_ptr<VectorEndpointSource> oneEndpoint() {
  return std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
}

TEST(FlowControllerStressTest, EveryRequestEndsExactlyOnce) {
  auto detector = std::make_shared<testing::FakeDetector>(0.2);
  auto endpoints = oneEndpoint();
  std::mutex mu;
  std::unordered_map<RequestId, int> seen;
  std::array<std::uint64_t, kNumQueueOutcomes> by_kind{};
  std::atomic<std::uint64_t> delivered{0};

  FlowControllerOptions o;
  o.policy =
      std::move(PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kStepwiseSpread,
                                                .minCeiling = 0.3,
                                                .maxCeiling = 0.9}))
          .value();
  o.detector = detector;
  o.endpoints = endpoints;
  o.onOutcome = [&](Completion&& c) {
    std::lock_guard lock(mu);
    seen[c.id] += 1;
    by_kind[static_cast<std::size_t>(c.outcome.kind)] += 1;
    delivered.fetch_add(1);
  };
  o.bands = {{.priority = 10, .maxRequests = 200, .fairness = roundRobinFairness()},
             {.priority = 0, .maxRequests = 200},
             {.priority = -5, .maxRequests = 100, .ordering = edfOrdering()}};
  o.maxRequests = 400;
  o.defaultRequestTtl = 30ms;
  o.noEndpointRequestTtl = 8ms;
  o.expiryInterval = 5ms;
  o.flowIdleTimeout = 10ms;
  o.bandIdleTimeout = 10ms;
  o.priorityDomain = PriorityDomain::kActive;
  o.activityWindow = 5ms;
  o.runner = {.enabled = true, .tickInterval = 1ms};
  auto fc = std::move(FlowController::create(std::move(o))).value();

  constexpr int kProducers = 4;
  constexpr int kPerProducer = 1500;
  std::atomic<bool> stop_chaos{false};
  std::atomic<std::uint64_t> cancelled_ok{0};
  std::vector<std::vector<RequestId>> ids(kProducers);

  std::thread chaos([&] {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> sat(0.0, 1.1);
    const std::vector<Priority> desired_a{3, 10};
    const std::vector<Priority> desired_b{-7};
    int i = 0;
    bool was_empty = false;
    while (!stop_chaos.load()) {
      detector->set(sat(rng));
      const bool empty = (i / 60) % 4 == 3;  // empty pool in ~15 ms phases
      if (empty != was_empty) endpoints->set(VectorEndpointSource::named(empty ? 0 : 1));
      was_empty = empty;
      if (++i % 7 == 0) fc->setDesiredPriorities(i % 2 ? desired_a : desired_b);
      if (i % 5 == 0) (void)renderPrometheus(fc->stats());
      std::this_thread::sleep_for(250us);
    }
  });

  std::vector<std::thread> producers;
  producers.reserve(kProducers);
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(100 + p));
      const Priority prios[] = {10, 0, -5, 3, 42, -7};
      std::vector<Ticket> live;
      for (int i = 0; i < kPerProducer; ++i) {
        FlowRequest r;
        r.flowId = "flow-" + std::to_string(rng() % 8);
        r.priority = prios[rng() % 6];
        r.sizeBytes = rng() % 1000;
        if (rng() % 4 == 0) r.deadline = Clock::now() + std::chrono::milliseconds(rng() % 20);
        Ticket t = fc->enqueue(std::move(r));
        ids[static_cast<std::size_t>(p)].push_back(t.id());
        live.push_back(std::move(t));
        if (rng() % 3 == 0 && !live.empty()) {
          const std::size_t k = rng() % live.size();
          if (live[k].cancel()) cancelled_ok.fetch_add(1);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
        if (i % 5 == 0) std::this_thread::sleep_for(200us);
      }
    });
  }
  for (auto& t : producers) t.join();
  std::this_thread::sleep_for(20ms);  // let the runner drain/expire a little
  stop_chaos.store(true);
  chaos.join();
  fc->shutdown();

  const std::uint64_t total = std::uint64_t{kProducers} * kPerProducer;
  std::lock_guard lock(mu);
  EXPECT_EQ(delivered.load(), total);
  EXPECT_EQ(seen.size(), total);
  for (const auto& per : ids) {
    for (const RequestId id : per) {
      auto it = seen.find(id);
      ASSERT_NE(it, seen.end()) << "request " << id << " has no outcome";
      EXPECT_EQ(it->second, 1) << "request " << id;
    }
  }
  EXPECT_EQ(by_kind[static_cast<std::size_t>(QueueOutcome::kEvictedCancelled)],
            cancelled_ok.load());
  const auto stats = fc->stats();
  EXPECT_EQ(stats.queuedRequests, 0u);
  EXPECT_EQ(stats.queuedBytes, 0u);
  std::uint64_t sum_stats = 0;
  for (std::size_t k = 0; k < kNumQueueOutcomes; ++k) {
    EXPECT_EQ(stats.outcomes[k], by_kind[k]) << toString(static_cast<QueueOutcome>(k));
    sum_stats += stats.outcomes[k];
    std::uint64_t per_band = 0;
    for (const BandStats& b : stats.bands) per_band += b.outcomes[k];
    EXPECT_EQ(per_band, stats.outcomes[k]);
  }
  EXPECT_EQ(sum_stats, total);
  std::string summary;
  for (std::size_t k = 0; k < kNumQueueOutcomes; ++k) {
    summary += std::string(toString(static_cast<QueueOutcome>(k))) + "=" +
               std::to_string(by_kind[k]) + " ";
  }
  std::printf("outcomes: %s cycles=%llu\n", summary.c_str(),
              static_cast<unsigned long long>(stats.cycles));
  // The run exercised the interesting paths.
  EXPECT_GT(by_kind[static_cast<std::size_t>(QueueOutcome::kDispatched)], 0u);
  EXPECT_GT(by_kind[static_cast<std::size_t>(QueueOutcome::kEvictedCancelled)], 0u);
  EXPECT_GT(by_kind[static_cast<std::size_t>(QueueOutcome::kEvictedTtl)], 0u);
  EXPECT_GT(stats.cycles, 0u);
}

// The runner dispatches on arrival (no host call to dispatchCycle) and shutdown joins it.
TEST(FlowControllerRunnerTest, DispatchesOnArrivalAndShutsDownCleanly) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Outcome> outcomes;
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create()).value();
  o.detector = std::make_shared<testing::FakeDetector>(0.0);
  o.endpoints = oneEndpoint();
  o.onOutcome = [&](Completion&& c) {
    std::lock_guard lock(mu);
    outcomes.push_back(c.outcome);
    cv.notify_all();
  };
  o.runner = {.enabled = true, .tickInterval = std::chrono::hours(1)};  // arrivals only
  auto fc = std::move(FlowController::create(std::move(o))).value();
  for (int i = 0; i < 3; ++i) (void)fc->enqueue(testing::request("f", 0, i));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return outcomes.size() == 3; }));
    for (const Outcome& out : outcomes) EXPECT_TRUE(out.dispatched());
  }
  fc->shutdown();
  (void)fc->enqueue(testing::request("f", 0, 9));
  std::lock_guard lock(mu);
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_EQ(outcomes[3], (Outcome{QueueOutcome::kRejectedOther, OutcomeCause::kNotRunning}));
}

// The runner keeps saturated work queued, and shutdown finalizes it EvictedOther.
TEST(FlowControllerRunnerTest, ShutdownFinalizesQueuedWork) {
  std::atomic<int> evicted{0};
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create()).value();
  o.detector = std::make_shared<testing::FakeDetector>(1.0);  // saturated: nothing dispatches
  o.endpoints = oneEndpoint();
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.kind == QueueOutcome::kEvictedOther) evicted.fetch_add(1);
  };
  o.runner = {.enabled = true};
  {
    auto fc = std::move(FlowController::create(std::move(o))).value();
    for (int i = 0; i < 50; ++i) (void)fc->enqueue(testing::request("f", i % 3 - 1, i));
  }  // destructor shuts down
  EXPECT_EQ(evicted.load(), 50);
}

}  // namespace
}  // namespace holdback
