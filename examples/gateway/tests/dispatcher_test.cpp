// The gateway's Dispatcher: cycles that several threads start at once never admit more than the
// room the pool shows, because each dispatch is recorded (by its outcome callback, as the
// gateway's pick records it in the ledger) before the next cycle reads the pool.
#include "dispatcher.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "holdback/core/endpoint.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

// Saturation = dispatches recorded so far / capacity: the pool a ledger shows.
class RecordedDetector final : public SaturationDetector {
 public:
  explicit RecordedDetector(double capacity) : SaturationDetector("recorded"), cap_(capacity) {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override {
    return static_cast<double>(recorded.load()) / cap_;
  }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "recorded"; }
  std::atomic<int> recorded{0};

 private:
  double cap_;
};

TEST(Dispatcher, ConcurrentCyclesNeverAdmitBeyondTheRecordedRoom) {
  constexpr int kRoom = 4;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 4;
  auto detector = std::make_shared<RecordedDetector>(kRoom);
  std::atomic<int> dispatched{0};
  std::atomic<int> outcomes{0};
  Dispatcher* dispatcher = nullptr;
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = 1.0})).value();
  o.detector = detector;
  o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched()) {
      dispatched.fetch_add(1);
      // The gateway's pick takes a while before the ledger records the dispatch: a cycle that
      // overlapped this one would read the pool without it.
      std::this_thread::sleep_for(2ms);
      detector->recorded.fetch_add(1);
    }
    dispatcher->finalized(c.outcome.dispatched());
    outcomes.fetch_add(1);
  };
  auto controller = std::move(FlowController::create(std::move(o))).value();
  Dispatcher d(*controller, 1ms, 100ms);
  dispatcher = &d;
  d.start();

  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < kPerThread; ++k) {
        FlowRequest r;
        r.flowId = "flow-" + std::to_string(t);
        d.arrived();
        (void)controller->enqueue(std::move(r));
        d.dispatchNow();
      }
    });
  }
  go.store(true);
  for (std::thread& th : threads) th.join();
  // A dispatch the driver thread made may still be in its callback: wait for its outcome.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (outcomes.load() < kRoom && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(20ms);  // the driver's retries meanwhile: the pool is full
  EXPECT_EQ(dispatched.load(), kRoom);
  EXPECT_EQ(d.queued(), kThreads * kPerThread - kRoom);
  d.stop();
  controller->shutdown();
  EXPECT_EQ(outcomes.load(), kThreads * kPerThread);  // the rest evicted at shutdown, once each
  EXPECT_EQ(d.queued(), 0);
}

}  // namespace
}  // namespace holdback::gateway
