// release() against dispatchCycle, enqueue and expire on other threads (run under
// ThreadSanitizer by scripts/test.sh): every dispatched request's lease is released exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

TEST(FlowControllerReleaseConcurrencyTest, ReleaseVersusDispatchEndsEveryLeaseOnce) {
  std::mutex mu;
  std::vector<RequestId> inflight;
  std::atomic<std::uint64_t> dispatched{0};
  std::atomic<std::uint64_t> released{0};
  std::atomic<bool> stop{false};
  // Set only after the dispatchers have joined: the queue reads empty before the last
  // dispatch's onOutcome has run, so `stop` alone would let a releaser leave one lease behind.
  std::atomic<bool> dispatchers_done{false};

  FlowControllerOptions o;
  o.policy = std::move(ReservationPolicy::create({.minCeiling = 0.5, .minReserve = 1.0})).value();
  o.detector = std::make_shared<testing::FakeDetector>(0.2);
  o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
  o.onOutcome = [&](Completion&& c) {
    if (!c.outcome.dispatched()) return;
    dispatched.fetch_add(1);
    std::lock_guard lock(mu);
    inflight.push_back(c.id);
  };
  o.bands = {{.priority = 10}, {.priority = 0}};
  o.leaseTimeout = std::chrono::hours(1);
  auto fc = std::move(FlowController::create(std::move(o))).value();

  const TimePoint t0 = TimePoint{} + 1h;
  auto at = [&](int i) { return t0 + std::chrono::microseconds(i); };
  std::thread producer([&] {
    for (int i = 0; i < 4000; ++i) {
      FlowRequest r;
      r.flowId = i % 3 == 0 ? "interactive" : "batch";
      r.priority = i % 3 == 0 ? 10 : 0;
      fc->enqueue(std::move(r), at(i));
    }
  });
  std::vector<std::thread> dispatchers;
  for (int d = 0; d < 2; ++d) {
    dispatchers.emplace_back([&, d] {
      for (int i = 0; !stop.load(); ++i) {
        fc->dispatchCycle(at(i));
        if (i % 64 == d) fc->expire(at(i));
      }
    });
  }
  std::vector<std::thread> releasers;
  for (int r = 0; r < 2; ++r) {
    releasers.emplace_back([&] {
      for (int i = 0; !dispatchers_done.load() || released.load() < dispatched.load(); ++i) {
        RequestId id = 0;
        {
          std::lock_guard lock(mu);
          if (!inflight.empty()) {
            id = inflight.back();
            inflight.pop_back();
          }
        }
        if (id == 0) {
          if (dispatchers_done.load() && released.load() >= dispatched.load()) break;
          std::this_thread::yield();
          continue;
        }
        EXPECT_TRUE(fc->release(id, at(i)));
        EXPECT_FALSE(fc->release(id, at(i)));  // exactly once
        released.fetch_add(1);
      }
    });
  }
  producer.join();
  // minCeiling 0.5 > saturation 0.2: no band is ever gated, so the queue drains.
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (fc->stats().queuedRequests > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  stop.store(true);
  for (auto& t : dispatchers) t.join();
  dispatchers_done.store(true);
  for (auto& t : releasers) t.join();
  EXPECT_EQ(dispatched.load(), 4000u);
  EXPECT_EQ(released.load(), dispatched.load());
}

}  // namespace
}  // namespace holdback
