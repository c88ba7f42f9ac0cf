// Host code that blocks never stalls the controller (run under ThreadSanitizer by
// scripts/test.sh): while one thread's dispatchCycle is held inside a host endpoints() call,
// enqueue, cancel, stats, reconfigure and shutdown on other threads return; and a source that
// waits for another thread's enqueue/stats does not deadlock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

// endpoints() announces that it was entered and blocks until release() (or a 30 s safety limit,
// so a regression fails the test instead of hanging it).
class BlockingEndpoints final : public EndpointSource {
 public:
  BlockingEndpoints() : pool_(1) { pool_[0].name = "ep"; }
  std::span<const Endpoint> endpoints(TimePoint) noexcept override {
    std::unique_lock lock(mu_);
    if (block_) {
      entered_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, 30s, [this] { return released_; });
    }
    return pool_;
  }
  void arm() {
    std::lock_guard lock(mu_);
    block_ = true;
  }
  bool waitEntered() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 30s, [this] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool released() {
    std::lock_guard lock(mu_);
    return released_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool block_ = false;
  bool entered_ = false;
  bool released_ = false;
  std::vector<Endpoint> pool_;
};

FlowControllerOptions baseOptions(std::shared_ptr<EndpointSource> endpoints,
                                  testing::Recorder& rec) {
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = 1.0})).value();
  o.detector = std::make_shared<testing::FakeDetector>(0.1);
  o.endpoints = std::move(endpoints);
  o.onOutcome = rec.callback();
  return o;
}

TEST(HostCallbackConcurrencyTest, BlockedEndpointSourceStallsNoOtherCall) {
  auto source = std::make_shared<BlockingEndpoints>();
  testing::Recorder rec;
  auto fc = std::move(FlowController::create(baseOptions(source, rec))).value();
  const TimePoint t0 = TimePoint{} + 1h;
  fc->enqueue(testing::request("queued", 0, 1), t0);

  source->arm();
  auto cycle = std::async(std::launch::async, [&] { return fc->dispatchCycle(t0); });
  ASSERT_TRUE(source->waitEntered());

  // Every call below must return while the cycle's endpoints() call is still blocked.
  Ticket t = fc->enqueue(testing::request("other", 0, 2), t0);
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(fc->stats().queuedRequests, 2u);
  EXPECT_TRUE(t.cancel());
  (void)fc->bandPriorities();
  EXPECT_FALSE(fc->reconfigure(baseOptions(nullptr, rec)).hasErrors());
  PoolPressure pressure;
  pressure.saturation.effective = 0.1;
  EXPECT_EQ(fc->dispatch(t0, pressure).kind, DispatchResult::Kind::kDispatched);
  fc->shutdown(t0);
  EXPECT_TRUE(fc->stats().stopped);
  EXPECT_FALSE(source->released());  // nothing above waited for the host

  source->release();
  EXPECT_EQ(cycle.get().kind, DispatchResult::Kind::kStopped);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedCancelled);
  EXPECT_TRUE(rec.all()[1].outcome.dispatched());
}

// endpoints() hands work to another thread and waits for it: that thread's enqueue and stats
// must not need anything the sampling thread holds.
class DelegatingEndpoints final : public EndpointSource {
 public:
  DelegatingEndpoints() : pool_(1) { pool_[0].name = "ep"; }
  std::span<const Endpoint> endpoints(TimePoint now) noexcept override {
    if (FlowController* fc = controller.load()) {
      std::thread helper([this, fc, now] {
        fc->enqueue(testing::request("from-helper", 0, 7), now);
        queued_seen = fc->stats().queuedRequests;
      });
      helper.join();
    }
    return pool_;
  }
  std::atomic<FlowController*> controller{nullptr};
  std::atomic<std::size_t> queued_seen{0};

 private:
  std::vector<Endpoint> pool_;
};

TEST(HostCallbackConcurrencyTest, EndpointSourceMayWaitForAnotherThreadsCalls) {
  auto source = std::make_shared<DelegatingEndpoints>();
  testing::Recorder rec;
  auto fc = std::move(FlowController::create(baseOptions(source, rec))).value();
  source->controller = fc.get();
  const TimePoint t0 = TimePoint{} + 1h;
  EXPECT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  EXPECT_EQ(source->queued_seen.load(), 1u);
  source->controller = nullptr;
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{7}));
}

TEST(HostCallbackConcurrencyTest, RunnerWithReentrantSourceShutsDown) {
  // The runner's own cycles call a source that calls back into the controller.
  auto source = std::make_shared<DelegatingEndpoints>();
  testing::Recorder rec;
  auto o = baseOptions(source, rec);
  o.runner.enabled = true;
  o.runner.tickInterval = 1ms;
  auto fc = std::move(FlowController::create(std::move(o))).value();
  source->controller = fc.get();
  for (int i = 0; i < 5000 && rec.dispatchedPayloads().size() < 3; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  fc->shutdown();
  source->controller = nullptr;
  EXPECT_GE(rec.dispatchedPayloads().size(), 3u);
  EXPECT_TRUE(fc->stats().stopped);
}

}  // namespace
}  // namespace holdback
