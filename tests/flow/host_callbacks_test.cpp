// Host code and the controller's locks (flow_controller.hpp, "Locking"): the endpoint source, the
// detector and the clock run under no controller lock, so they may call every controller method
// without deadlock; a dispatchCycle/expire nested in the source decides on the last pressure;
// dispatch(now, pressure) and expire(now, pressure) take the pool's pressure from the caller.
// Single-threaded: a deadlock here would be a self-deadlock on a non-recursive mutex.
#include "holdback/flow/flow_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;
using testing::staticPolicy;
using Kind = DispatchResult::Kind;

// An endpoint source that runs `hook` (once at a time: not recursively) inside endpoints().
class HookedEndpoints final : public EndpointSource {
 public:
  HookedEndpoints() : pool_(1) { pool_[0].name = "ep"; }
  std::span<const Endpoint> endpoints(TimePoint now) noexcept override {
    calls += 1;
    if (hook && !inside_) {
      inside_ = true;
      hook(now);
      inside_ = false;
    }
    return pool_;
  }
  std::function<void(TimePoint)> hook;
  int calls = 0;

 private:
  std::vector<Endpoint> pool_;
  bool inside_ = false;
};

// A detector that runs `hook` inside saturation() and returns `value`.
class HookedDetector final : public SaturationDetector {
 public:
  HookedDetector() : SaturationDetector("hooked") {}
  double saturation(std::span<const Endpoint>, TimePoint now) const noexcept override {
    if (hook && !inside_) {
      inside_ = true;
      hook(now);
      inside_ = false;
    }
    return value;
  }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "hooked"; }
  std::function<void(TimePoint)> hook;
  double value = 0.1;

 private:
  mutable bool inside_ = false;
};

class HostCallbacksTest : public FlowControllerTest {
 protected:
  FlowControllerOptions hookedOptions() {
    FlowControllerOptions o = options();
    o.endpoints = source;
    o.detector = hooked_detector;
    return o;
  }
  std::shared_ptr<HookedEndpoints> source = std::make_shared<HookedEndpoints>();
  std::shared_ptr<HookedDetector> hooked_detector = std::make_shared<HookedDetector>();
};

TEST_F(HostCallbacksTest, EndpointSourceMayCallEveryControllerMethod) {
  auto fc = make(hookedOptions());
  fc->enqueue(request("queued", 0, 1), t0);
  std::vector<std::string> done;
  source->hook = [&](TimePoint at) {
    Ticket t = fc->enqueue(request("from-source", 0, 2), at);
    done.push_back("enqueue");
    EXPECT_EQ(fc->stats().queuedRequests, 2u);
    done.push_back("stats");
    EXPECT_TRUE(t.cancel());
    done.push_back("cancel");
    // Nested in the source on this thread: no second sample, the last pressure decides.
    EXPECT_EQ(fc->dispatchCycle(at).kind, Kind::kDispatched);
    done.push_back("dispatchCycle");
    EXPECT_EQ(fc->expire(at), 0u);
    done.push_back("expire");
    fc->setDesiredPriorities(std::vector<Priority>{5});
    done.push_back("setDesiredPriorities");
    FlowControllerOptions again = hookedOptions();
    EXPECT_FALSE(fc->reconfigure(std::move(again)).hasErrors());
    done.push_back("reconfigure");
    (void)fc->bandPriorities();
    (void)fc->poolRegime();
    done.push_back("observers");
  };
  const DispatchResult r = fc->dispatchCycle(t0);
  EXPECT_EQ(r.kind, Kind::kNothingQueued);  // the nested cycle dispatched the queued request
  EXPECT_EQ(done, (std::vector<std::string>{"enqueue", "stats", "cancel", "dispatchCycle", "expire",
                                            "setDesiredPriorities", "reconfigure", "observers"}));
  EXPECT_EQ(source->calls, 1);  // the nested dispatchCycle and expire did not sample again
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedCancelled);
  EXPECT_TRUE(rec.all()[1].outcome.dispatched());
}

TEST_F(HostCallbacksTest, EndpointSourceMayShutTheControllerDown) {
  auto fc = make(hookedOptions());
  fc->enqueue(request("a", 0, 1), t0);
  source->hook = [&](TimePoint at) { fc->shutdown(at); };
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kStopped);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedOther);
  EXPECT_TRUE(fc->stats().stopped);
}

TEST_F(HostCallbacksTest, EndpointSourceMayExpireFromInsideExpire) {
  auto o = hookedOptions();
  o.defaultRequestTtl = 1s;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  std::size_t nested = 99;
  source->hook = [&](TimePoint at) { nested = fc->expire(at); };
  EXPECT_EQ(fc->expire(t0 + 2s), 0u);  // the nested sweep found it first
  EXPECT_EQ(nested, 1u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedTtl);
}

TEST_F(HostCallbacksTest, DetectorMayCallTheController) {
  auto fc = make(hookedOptions());
  fc->enqueue(request("a", 0, 1), t0);
  int nested_kind = -1;
  bool fired = false;
  hooked_detector->hook = [&](TimePoint at) {
    if (std::exchange(fired, true)) return;
    fc->enqueue(request("b", 0, 2), at);
    nested_kind = static_cast<int>(fc->dispatchCycle(at).kind);
    EXPECT_EQ(fc->stats().queuedRequests, 1u);
  };
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  EXPECT_EQ(nested_kind, static_cast<int>(Kind::kDispatched));
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{1, 2}));
}

TEST_F(HostCallbacksTest, ClockMayCallTheControllerFromCancelAndShutdown) {
  auto o = hookedOptions();
  FlowController* self = nullptr;
  int clock_calls = 0;
  o.clock = [&] {
    clock_calls += 1;
    if (self != nullptr) (void)self->stats();  // would self-deadlock under the lock
    return now;
  };
  auto fc = make(std::move(o));
  self = fc.get();
  Ticket t = fc->enqueue(request("a", 0, 1));
  EXPECT_TRUE(t.cancel());
  fc->enqueue(request("b", 0, 2));
  fc->shutdown();
  EXPECT_GE(clock_calls, 4);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedCancelled);
  EXPECT_EQ(rec.all()[1].outcome.kind, QueueOutcome::kEvictedOther);
  self = nullptr;
}

TEST_F(HostCallbacksTest, DispatchTakesThePressureFromTheCaller) {
  auto fc = make(options(testing::holdbackPolicy(0.4, 0.9)));
  fc->enqueue(request("a", 0, 1), t0);
  const int detector_calls = detector->calls.load();
  PoolPressure gated;
  gated.saturation.effective = 0.95;
  EXPECT_EQ(fc->dispatch(t0, gated).kind, Kind::kGated);
  EXPECT_DOUBLE_EQ(fc->stats().lastSaturation, 0.95);
  PoolPressure open;
  open.saturation.effective = 0.1;
  open.saturation.prefill = 0.2;
  const DispatchResult r = fc->dispatch(t0, open);
  EXPECT_EQ(r.kind, Kind::kDispatched);
  EXPECT_DOUBLE_EQ(r.saturation, 0.1);
  const auto prefill = fc->stats().lastPrefillSaturation;
  ASSERT_TRUE(prefill.has_value());
  EXPECT_DOUBLE_EQ(*prefill, 0.2);
  EXPECT_EQ(detector->calls.load(), detector_calls);  // no detector, no endpoint source
}

TEST_F(HostCallbacksTest, CallerPressureDrivesTheRegime) {
  auto o = options();
  o.defaultRequestTtl = 0s;  // never expires in the saturation regime
  o.noEndpointRequestTtl = 5s;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  PoolPressure empty;
  empty.poolEmpty = true;
  EXPECT_EQ(fc->expire(t0 + 1s, empty), 0u);
  EXPECT_TRUE(fc->poolRegime().empty);
  EXPECT_TRUE(fc->poolRegime().since == t0 + 1s);
  EXPECT_EQ(fc->expire(t0 + 6s, empty), 1u);  // 5 s charged from the regime change
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedNoEndpoints);
  PoolPressure full;
  EXPECT_EQ(fc->dispatch(t0 + 7s, full).kind, Kind::kNothingQueued);
  EXPECT_FALSE(fc->poolRegime().empty);
}

TEST_F(HostCallbacksTest, OutcomeCallbackMayReconfigureAndShutDown) {
  std::unique_ptr<FlowController> fc;
  auto o = options();
  bool reconfigured = false;
  o.onOutcome = [&](Completion&& c) {
    rec.callback()(std::move(c));
    if (!reconfigured) {
      reconfigured = true;
      EXPECT_FALSE(fc->reconfigure(options()).hasErrors());
      fc->shutdown(t0);
    }
  };
  fc = make(std::move(o));
  fc->enqueue(request("a", 0, 1), t0);
  fc->enqueue(request("b", 0, 2), t0);
  EXPECT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_TRUE(rec.all()[0].outcome.dispatched());
  EXPECT_EQ(rec.all()[1].outcome.kind, QueueOutcome::kEvictedOther);
}

}  // namespace
}  // namespace holdback
