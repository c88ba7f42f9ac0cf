// program-aware-fairness's program table and the duration histograms under concurrent use:
// dispatch cycles pick while host threads report served tokens and read the state; enqueues and
// cycles record durations while stats() reads them. Run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/testing/conformance_support.hpp"

namespace holdback {
namespace {

using testing::FlowControllerTest;
using testing::request;

TEST_F(FlowControllerTest, ProgramAwareAndDurationMetricsUnderConcurrency) {
  std::shared_ptr<ProgramAwareFairnessPolicy> policy =
      std::move(ProgramAwareFairnessPolicy::create({.evictionTtl = std::chrono::milliseconds(5),
                                                    .evictionSweep = std::chrono::milliseconds(1)}))
          .value();
  std::shared_ptr<const FairnessPolicy> shared = policy;
  auto o = options();
  o.bands = {{.priority = 0, .fairness = shared}, {.priority = 5, .fairness = shared}};
  o.durationMetrics = true;
  o.clock = [] { return Clock::now(); };
  auto fc = make(std::move(o));
  ASSERT_NE(fc, nullptr);
  constexpr int kPerThread = 2000;
  std::atomic<int> done{0};
  testing::runConcurrently(4, [&](int t) {
    const TimePoint t0 = TimePoint{} + std::chrono::hours(1);
    for (int i = 0; i < kPerThread; ++i) {
      const TimePoint now = t0 + std::chrono::microseconds(i);
      const std::string flow = "p" + std::to_string((i * 7 + t) % 23);
      switch (t) {
        case 0:
          fc->enqueue(request(flow, i % 2 ? 5 : 0, i), now);
          break;
        case 1:
          fc->dispatchCycle(now);
          break;
        case 2:
          policy->recordServed(flow, 10, i % 5, now, std::chrono::microseconds(i));
          break;
        default:
          (void)policy->dumpState(now);
          (void)policy->attainedService(flow, now);
          (void)fc->stats();
      }
    }
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 4);
  // Drain what the cycling thread left (it may finish before the enqueuing one), within the
  // requests' 60 s default TTL: past it they would expire instead of being dispatched.
  const TimePoint drain = TimePoint{} + std::chrono::hours(1) + std::chrono::seconds(1);
  while (fc->dispatchCycle(drain).kind == DispatchResult::Kind::kDispatched) {
  }
  const FlowControllerStats s = fc->stats();
  EXPECT_EQ(s.queuedRequests, 0u);
  ASSERT_TRUE(s.enqueueDuration);
  EXPECT_EQ(s.enqueueDuration->count, std::uint64_t{kPerThread});
  EXPECT_EQ(rec.dispatchedPayloads().size(), std::size_t{kPerThread});
}

// Reloads that replace the program-aware policy (each new instance inherits the previous one's
// programs, under no controller lock) while cycles pick, enqueues arrive, the host reports served
// tokens to whichever instance is current and stats() reads the per-flow gauges.
TEST_F(FlowControllerTest, ProgramAwareReloadsUnderConcurrency) {
  const auto make_policy = [] {
    return std::shared_ptr<ProgramAwareFairnessPolicy>(
        std::move(ProgramAwareFairnessPolicy::create({})).value());
  };
  std::shared_ptr<ProgramAwareFairnessPolicy> first = make_policy();
  std::mutex current_mu;
  std::shared_ptr<ProgramAwareFairnessPolicy> current = first;
  const auto optionsWith = [&](std::shared_ptr<const FairnessPolicy> p) {
    auto o = options();
    o.defaultBand.fairness = p;
    o.bands = {{.priority = 5, .fairness = p}};
    o.fairnessIdLabelLimit = 4;
    o.clock = [] { return TimePoint{} + std::chrono::hours(1); };
    return o;
  };
  auto fc = make(optionsWith(first));
  ASSERT_NE(fc, nullptr);
  first->recordServed("p0", 1000000, 0, TimePoint{} + std::chrono::hours(1));
  constexpr int kPerThread = 1000;
  testing::runConcurrently(4, [&](int t) {
    const TimePoint t0 = TimePoint{} + std::chrono::hours(1);
    for (int i = 0; i < kPerThread; ++i) {
      const TimePoint now = t0 + std::chrono::microseconds(i);
      const std::string flow = "p" + std::to_string((i * 7 + t) % 13);
      switch (t) {
        case 0:
          fc->enqueue(request(flow, i % 2 ? 5 : 0, i), now);
          break;
        case 1:
          fc->dispatchCycle(now);
          break;
        case 2: {
          std::shared_ptr<ProgramAwareFairnessPolicy> p;
          {
            std::lock_guard lock(current_mu);
            p = current;
          }
          p->recordServed(flow, 10, i % 5, now);
          (void)fc->stats();
          break;
        }
        default:
          if (i % 50 == 0) {
            auto next = make_policy();
            ASSERT_FALSE(fc->reconfigure(optionsWith(next)).hasErrors());
            std::lock_guard lock(current_mu);
            current = next;
          }
      }
    }
  });
  // The heavy program's service survived every reload (no decay: the clock is fixed).
  std::lock_guard lock(current_mu);
  EXPECT_GE(current->attainedService("p0", TimePoint{} + std::chrono::hours(1)), 1000000.0);
  EXPECT_NE(current, first);
}

}  // namespace
}  // namespace holdback
