// Room past the KV threshold across replicas under concurrency (flow/pool_pressure.hpp; run under
// ThreadSanitizer by scripts/test.sh): the replica-sync thread changes the sampler's mode while
// dispatch threads sample; every sample's room past the threshold is the detector's or none,
// never a torn value, and the sampler never reads a half-written setting as a data race.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "holdback/core/endpoint.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/pool_pressure.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

TEST(PastThresholdConcurrencyTest, SamplesSeeTheDetectorsRoomOrNoneWhileTheModeChanges) {
  std::vector<Endpoint> pool = VectorEndpointSource::named(4);
  for (Endpoint& e : pool) {
    e.maxRunningRequests = 16;
    e.runningRequests = 4;
    e.kvCapacityTokens = 10000;
    e.kvCacheUsage = 0.75;  // 2500 tokens left in the whole cache
  }
  PoolPressureSampler sampler(std::make_shared<VectorEndpointSource>(
                                  std::move(pool), VectorEndpointSource::Freshness::kStampNow),
                              UtilizationDetector::create().value());
  sampler.keepEndpointRoom(true);
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::atomic<int> samples{0};
  std::vector<std::thread> dispatchers;
  for (int t = 0; t < 2; ++t) {
    dispatchers.emplace_back([&, t] {
      std::vector<EndpointRoom> room;
      std::vector<std::uint8_t> waits;
      TimePoint now = TimePoint{} + 1h + t * 7ms;
      while (!stop.load()) {
        (void)sampler.sample(now);
        if (sampler.copyEndpointRoom(room, waits)) {
          for (const EndpointRoom& r : room) {
            if (r.kvCapacityLeft != 0.0 && r.kvCapacityLeft != 2500.0) torn.fetch_add(1);
          }
        }
        samples.fetch_add(1);
        now += 13ms;
      }
    });
  }
  using Past = PoolPressureSampler::PastThreshold;
  // Until the dispatchers have sampled 2000 times (a bound of a minute against a hang).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (int k = 0; samples.load() < 2000 && std::chrono::steady_clock::now() < deadline; ++k) {
    switch (k % 4) {
      case 0:
        sampler.setPastThreshold(Past::kTurn,
                                 ReplicaTurn{k % 3, 3, std::chrono::milliseconds(k % 1000)});
        break;
      case 1:
        sampler.setPastThreshold(Past::kNone);
        break;
      case 2:
        sampler.setPastThreshold(Past::kDetector);
        break;
      default:
        sampler.setPastThreshold(Past::kTurn, ReplicaTurn{0, 1});
        break;
    }
    std::this_thread::yield();
  }
  stop.store(true);
  for (std::thread& t : dispatchers) t.join();
  EXPECT_GE(samples.load(), 2000);
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace holdback
