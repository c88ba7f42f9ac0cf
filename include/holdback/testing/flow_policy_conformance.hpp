// Value-parameterized GoogleTest suites that every fairness and ordering policy must pass: the
// built-in ones and a host's own. Include this header in one test file and instantiate them:
//
//   INSTANTIATE_TEST_SUITE_P(Mine, OrderingPolicyConformanceTest,
//       ::testing::Values(holdback::testing::OrderingFactory{"lifo", [] { return makeLifo(); }}),
//       holdback::testing::FactoryName{});
//   INSTANTIATE_TEST_SUITE_P(Mine, FairnessPolicyConformanceTest,
//       ::testing::Values(holdback::testing::FairnessFactory{"mine", [] { return makeMine(); }}),
//       holdback::testing::FactoryName{});
//
// Ordering policies, on random request views from a fixed seed (extreme times, missing and
// present TTLs, deadlines, TTFT objectives): less() is a strict weak ordering (irreflexive,
// asymmetric, transitive, incomparability transitive), never throws and is safe from several
// threads; inside a controller a flow's requests, all queued before the first dispatch, come out
// sorted by less() (ties in arrival order), each exactly once.
// Fairness policies, inside a controller: work-conserving (a band with work never yields
// nothing: N queued requests over random flows and bands drain in N cycles), each request
// dispatched exactly once, under random interleavings of enqueue, cancel and dispatch; one
// instance may serve two controllers on two threads at once.
#pragma once

#include "holdback/abi.hpp"
#include "holdback/testing/conformance_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <any>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "holdback/flow/fairness.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

using OrderingFactory = Factory<OrderingPolicy>;
using FairnessFactory = Factory<FairnessPolicy>;

// A detector that reads 0 (never gated) for a non-empty pool.
class IdleDetectorForConformance final : public SaturationDetector {
 public:
  IdleDetectorForConformance() : SaturationDetector("idle") {}
  double saturation(std::span<const Endpoint> endpoints, TimePoint) const noexcept override {
    return endpoints.empty() ? 1.0 : 0.0;
  }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "idle"; }
};

// The outcomes of one controller, by request payload (an int).
struct ConformanceRecorder {
  std::mutex mu;
  std::vector<int> dispatched;
  std::map<int, int> outcomes;  // payload -> number of outcomes
  std::function<void(Completion&&)> callback() {
    return [this](Completion&& c) {
      const int* payload = std::any_cast<int>(&c.payload);
      std::lock_guard lock(mu);
      if (payload == nullptr) return;
      ++outcomes[*payload];
      if (c.outcome.dispatched()) dispatched.push_back(*payload);
    };
  }
};

inline std::unique_ptr<FlowController> conformanceController(
    std::shared_ptr<const FairnessPolicy> fairness, std::shared_ptr<const OrderingPolicy> ordering,
    ConformanceRecorder& recorder, const std::vector<Priority>& priorities = {0}) {
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create()).value();
  o.detector = std::make_shared<IdleDetectorForConformance>();
  o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
  o.onOutcome = recorder.callback();
  o.defaultRequestTtl = Duration::zero();  // nothing expires: the suites test order only
  for (Priority p : priorities) {
    o.bands.push_back({.priority = p, .fairness = fairness, .ordering = ordering});
  }
  auto made = FlowController::create(std::move(o));
  EXPECT_TRUE(made) << made.diagnostics().toString();
  return made ? std::move(made).value() : nullptr;
}

class RequestViewGenerator : public SeededGenerator {
 public:
  using SeededGenerator::SeededGenerator;

  TimePoint time() {
    static constexpr std::int64_t kSpecial[] = {std::numeric_limits<std::int64_t>::min(),
                                                std::numeric_limits<std::int64_t>::max(), 0, -1, 1};
    if (pick(8) == 0) return TimePoint(Duration(oneOf(kSpecial)));
    return TimePoint(std::chrono::milliseconds(between<std::int64_t>(0, 50)));  // many ties
  }
  Duration duration() {
    static constexpr std::int64_t kSpecial[] = {std::numeric_limits<std::int64_t>::max(), 0, -1,
                                                std::numeric_limits<std::int64_t>::min()};
    if (pick(6) == 0) return Duration(oneOf(kSpecial));
    return std::chrono::milliseconds(between<std::int64_t>(0, 50));
  }
  QueuedRequestView view(std::uint64_t sequence) {
    QueuedRequestView v;
    v.flowId = pick(2) == 0 ? "a" : "b";
    v.sizeBytes = between<std::uint64_t>(0, 10);
    v.enqueueTime = time();
    v.receivedTime = pick(2) == 0 ? v.enqueueTime : time();
    v.effectiveTtl = pick(3) == 0 ? Duration::zero() : duration();
    if (pick(3) == 0) v.deadline = time();
    if (pick(2) == 0) v.ttftObjective = duration();
    v.sequence = sequence;
    return v;
  }
};

class OrderingPolicyConformanceTest : public ::testing::TestWithParam<OrderingFactory> {
 protected:
  std::shared_ptr<const OrderingPolicy> make() { return GetParam().make(); }
};

TEST_P(OrderingPolicyConformanceTest, LessIsAStrictWeakOrdering) {
  const auto policy = make();
  ASSERT_NE(policy, nullptr);
  EXPECT_FALSE(policy->type().empty());
  RequestViewGenerator gen(20261201);
  for (int round = 0; round < 20000; ++round) {
    const QueuedRequestView a = gen.view(1);
    const QueuedRequestView b = gen.view(2);
    const QueuedRequestView c = gen.view(3);
    ASSERT_FALSE(policy->less(a, a)) << "irreflexive";
    const bool ab = policy->less(a, b);
    const bool ba = policy->less(b, a);
    ASSERT_FALSE(ab && ba) << "asymmetric";
    const bool bc = policy->less(b, c);
    const bool ac = policy->less(a, c);
    if (ab && bc) {
      ASSERT_TRUE(ac) << "transitive";
    }
    const bool cb = policy->less(c, b);
    const bool ca = policy->less(c, a);
    // Incomparability (neither less) is transitive.
    if (!ab && !ba && !bc && !cb) {
      ASSERT_TRUE(!ac && !ca) << "incomparability transitive";
    }
  }
}

TEST_P(OrderingPolicyConformanceTest, SafeFromSeveralThreads) {
  const auto policy = make();
  runConcurrently(4, [&](int t) {
    RequestViewGenerator gen(static_cast<std::uint32_t>(t + 1));
    for (int i = 0; i < 5000; ++i) {
      const QueuedRequestView a = gen.view(1);
      const QueuedRequestView b = gen.view(2);
      const bool ab = policy->less(a, b);
      const bool ba = policy->less(b, a);
      EXPECT_FALSE(ab && ba);
    }
  });
}

TEST_P(OrderingPolicyConformanceTest, ControllerDispatchesAFlowInLessOrder) {
  const auto policy = make();
  ConformanceRecorder recorder;
  auto fc = conformanceController(globalStrictFairness(), policy, recorder);
  ASSERT_NE(fc, nullptr);
  SeededGenerator gen(7);
  const TimePoint t0 = TimePoint(std::chrono::hours(1));
  std::vector<QueuedRequestView> views;
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    FlowRequest r;
    r.flowId = "flow";
    r.payload = i;
    const TimePoint at = t0 + std::chrono::milliseconds(gen.between<int>(0, 20));
    if (gen.pick(2) == 0)
      r.ttl = std::chrono::milliseconds(gen.between<int>(1100, 100000));  // none expires
    if (gen.pick(2) == 0) r.ttftObjective = std::chrono::milliseconds(gen.between<int>(0, 50));
    if (gen.pick(2) == 0) r.receivedTime = at - std::chrono::milliseconds(gen.between<int>(0, 5));
    QueuedRequestView v;
    v.enqueueTime = at;
    v.receivedTime = r.receivedTime.value_or(at);
    v.effectiveTtl = r.ttl.value_or(Duration::zero());
    v.ttftObjective = r.ttftObjective;
    v.sequence = static_cast<std::uint64_t>(i);
    views.push_back(v);
    fc->enqueue(std::move(r), at);
  }
  const TimePoint later = t0 + std::chrono::seconds(1);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(fc->dispatchCycle(later).kind, DispatchResult::Kind::kDispatched);
  }
  ASSERT_EQ(recorder.dispatched.size(), std::size_t{kRequests});
  // No later dispatch goes strictly before an earlier one; ties keep the arrival order.
  for (std::size_t i = 1; i < recorder.dispatched.size(); ++i) {
    const QueuedRequestView& prev = views[static_cast<std::size_t>(recorder.dispatched[i - 1])];
    const QueuedRequestView& next = views[static_cast<std::size_t>(recorder.dispatched[i])];
    ASSERT_FALSE(policy->less(next, prev)) << "position " << i;
    if (!policy->less(prev, next)) {
      ASSERT_LT(prev.sequence, next.sequence) << "position " << i;
    }
  }
}

class FairnessPolicyConformanceTest : public ::testing::TestWithParam<FairnessFactory> {
 protected:
  std::shared_ptr<const FairnessPolicy> make() { return GetParam().make(); }
};

TEST_P(FairnessPolicyConformanceTest, WorkConservingAndExactlyOnce) {
  const auto policy = make();
  ASSERT_NE(policy, nullptr);
  EXPECT_FALSE(policy->type().empty());
  ConformanceRecorder recorder;
  auto fc = conformanceController(policy, fcfsOrdering(), recorder, {10, 0, -5});
  ASSERT_NE(fc, nullptr);
  SeededGenerator gen(11);
  const TimePoint t0 = TimePoint(std::chrono::hours(1));
  TimePoint now = t0;
  std::vector<Ticket> tickets;
  int next = 0;
  int cancelled = 0;
  for (int step = 0; step < 3000; ++step) {
    now += std::chrono::microseconds(gen.between<int>(0, 2000));
    switch (gen.pick(4)) {
      case 0:
      case 1: {
        FlowRequest r;
        r.flowId = "flow-" + std::to_string(gen.pick(gen.pick(2) == 0 ? 3 : 64));
        r.priority = gen.pick(3) == 0 ? 10 : gen.pick(2) == 0 ? 0 : -5;
        r.payload = next++;
        tickets.push_back(fc->enqueue(std::move(r), now));
        break;
      }
      case 2:
        fc->dispatchCycle(now);
        break;
      default:
        if (!tickets.empty() && gen.pick(8) == 0) {
          if (tickets[gen.pick(tickets.size())].cancel()) ++cancelled;
        }
    }
  }
  // Drain: every remaining request goes in one cycle each.
  const std::size_t queued = fc->stats().queuedRequests;
  for (std::size_t i = 0; i < queued; ++i) {
    ASSERT_EQ(fc->dispatchCycle(now).kind, DispatchResult::Kind::kDispatched) << i;
  }
  EXPECT_EQ(fc->dispatchCycle(now).kind, DispatchResult::Kind::kNothingQueued);
  std::lock_guard lock(recorder.mu);
  ASSERT_EQ(recorder.outcomes.size(), static_cast<std::size_t>(next));
  for (const auto& [payload, count] : recorder.outcomes) ASSERT_EQ(count, 1) << payload;
  EXPECT_EQ(recorder.dispatched.size() + static_cast<std::size_t>(cancelled),
            static_cast<std::size_t>(next));
}

TEST_P(FairnessPolicyConformanceTest, OneInstanceServesTwoControllersAtOnce) {
  const auto policy = make();
  ConformanceRecorder recorders[2];
  std::unique_ptr<FlowController> controllers[2] = {
      conformanceController(policy, fcfsOrdering(), recorders[0]),
      conformanceController(policy, fcfsOrdering(), recorders[1])};
  ASSERT_NE(controllers[0], nullptr);
  ASSERT_NE(controllers[1], nullptr);
  runConcurrently(2, [&](int t) {
    FlowController& fc = *controllers[t];
    const TimePoint t0 = TimePoint(std::chrono::hours(1));
    for (int i = 0; i < 2000; ++i) {
      FlowRequest r;
      r.flowId = "f" + std::to_string(i % 17);
      r.payload = i;
      fc.enqueue(std::move(r), t0 + std::chrono::microseconds(i));
      if (i % 2 == 1) {
        fc.dispatchCycle(t0 + std::chrono::microseconds(i));
        fc.dispatchCycle(t0 + std::chrono::microseconds(i));
      }
    }
  });
  for (const ConformanceRecorder& r : recorders) EXPECT_EQ(r.dispatched.size(), 2000u);
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
