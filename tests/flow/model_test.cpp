// FlowController against a naive model: random enqueue / cancel / dispatch sequences with random
// saturation, checked step by step against a straightforward scan of every live request. This
// exercises the incremental indexes (per-band heads and non-empty flows, node-handle re-seating)
// that make dispatchCycle O(bands).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

struct ModelItem {
  RequestId id;
  Priority band;
  std::string flow;
  TimePoint enqueueTime;
  Duration ttl;  // EDF band only
  std::uint64_t seq;
  std::uint64_t bytes;
};

class Model {
 public:
  // Bands highest first; band 0 is round-robin + fcfs, band -5 global-strict + edf, the others
  // global-strict + fcfs.
  std::vector<Priority> bands{5, 0, -5};
  std::vector<ModelItem> live;
  std::optional<std::string> cursor;  // round-robin cursor of band 0

  static bool fcfsBefore(const ModelItem& a, const ModelItem& b) {
    if (a.enqueueTime != b.enqueueTime) return a.enqueueTime < b.enqueueTime;
    return a.seq < b.seq;
  }
  static bool edfBefore(const ModelItem& a, const ModelItem& b) {
    const TimePoint da = a.enqueueTime + a.ttl;
    const TimePoint db = b.enqueueTime + b.ttl;
    if (da != db) return da < db;
    return fcfsBefore(a, b);
  }

  // What the cycle must do given the ceilings; removes the dispatched item.
  DispatchResult::Kind cycle(const std::vector<double>& ceilings, double s, Priority& priority,
                             RequestId& id) {
    if (live.empty()) return DispatchResult::Kind::kNothingQueued;
    for (std::size_t i = 0; i < bands.size(); ++i) {
      const Priority p = bands[i];
      if (!(s < ceilings[i])) {
        priority = p;
        return DispatchResult::Kind::kGated;
      }
      std::vector<const ModelItem*> in_band;
      for (const auto& it : live)
        if (it.band == p) in_band.push_back(&it);
      if (in_band.empty()) continue;
      const ModelItem* best = nullptr;
      if (p == 0) {  // round-robin over flow ids, then fcfs within the flow
        std::vector<std::string> flows;
        flows.reserve(in_band.size());
        for (const auto* it : in_band) flows.push_back(it->flow);
        std::sort(flows.begin(), flows.end());
        std::string pick = flows.front();
        if (cursor) {
          auto next = std::upper_bound(flows.begin(), flows.end(), *cursor);
          if (next != flows.end()) pick = *next;
        }
        cursor = pick;
        for (const auto* it : in_band)
          if (it->flow == pick && (!best || fcfsBefore(*it, *best))) best = it;
      } else {
        for (const auto* it : in_band) {
          const bool before =
              p == -5 ? (!best || edfBefore(*it, *best)) : (!best || fcfsBefore(*it, *best));
          if (before) best = it;
        }
      }
      priority = p;
      id = best->id;
      live.erase(live.begin() + (best - live.data()));
      return DispatchResult::Kind::kDispatched;
    }
    return DispatchResult::Kind::kNothingQueued;
  }
};

TEST(FlowControllerModelTest, RandomOperationsMatchANaiveScan) {
  std::map<DispatchResult::Kind, int> kinds;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    auto detector = std::make_shared<testing::FakeDetector>(0.0);
    std::shared_ptr<UsageLimitPolicy> policy =
        std::move(PriorityHoldbackPolicy::create({.strategy = HoldbackStrategy::kStepwiseSpread,
                                                  .minCeiling = 0.4,
                                                  .maxCeiling = 0.9}))
            .value();
    std::vector<RequestId> cancelled_delivered;
    FlowControllerOptions o;
    o.policy = policy;
    o.detector = detector;
    o.endpoints = std::make_shared<testing::FakeEndpoints>(1);
    o.onOutcome = [](Completion&&) {};
    o.bands = {{.priority = 5},
               {.priority = 0, .fairness = roundRobinFairness()},
               {.priority = -5, .ordering = edfOrdering()}};
    o.defaultRequestTtl = 0s;
    o.provisionOnFirstUse = false;
    auto fc = std::move(FlowController::create(std::move(o))).value();

    Model model;
    std::mt19937 rng(seed);
    const TimePoint t0 = TimePoint{} + 1h;
    const TimePoint cycle_time = t0 + 5ms;  // after every enqueue time, before any TTL
    const double saturations[] = {0.1, 0.5, 0.7, 0.95};
    const Priority prios[] = {5, 0, -5};
    std::uint64_t seq = 0;
    std::vector<double> ceilings(3);
    const std::vector<Priority> band_list{5, 0, -5};
    for (int step = 0; step < 3000; ++step) {
      const unsigned op = rng() % 10;
      if (op < 5) {  // enqueue
        FlowRequest r;
        r.flowId = "f" + std::to_string(rng() % 6);
        r.priority = prios[rng() % 3];
        r.sizeBytes = rng() % 100;
        const TimePoint at = t0 + std::chrono::microseconds(rng() % 5000);
        r.ttl = std::chrono::milliseconds(10 + rng() % 3 * 20);
        const Ticket t = fc->enqueue(r, at);
        model.live.push_back({t.id(), r.priority, r.flowId, at, *r.ttl, seq++, r.sizeBytes});
      } else if (op < 7) {  // cancel a random request (live or not)
        if (model.live.empty()) continue;
        const std::size_t k = rng() % model.live.size();
        ASSERT_TRUE(fc->cancel(model.live[k].id));
        EXPECT_FALSE(fc->cancel(model.live[k].id));
        model.live.erase(model.live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {  // dispatch
        const double s = saturations[rng() % 4];
        detector->set(s);
        std::fill(ceilings.begin(), ceilings.end(), 1.0);
        policy->computeLimit(s, band_list, ceilings);
        Priority want_p = 0;
        RequestId want_id = 0;
        const auto want = model.cycle(ceilings, s, want_p, want_id);
        const DispatchResult got = fc->dispatchCycle(cycle_time);
        kinds[got.kind] += 1;
        ASSERT_EQ(got.kind, want) << "seed " << seed << " step " << step;
        if (want != DispatchResult::Kind::kNothingQueued) {
          ASSERT_EQ(got.priority, want_p) << "seed " << seed << " step " << step;
        }
        if (want == DispatchResult::Kind::kDispatched) {
          ASSERT_EQ(got.id, want_id) << "seed " << seed << " step " << step;
        }
      }
      // Accounting matches after every step.
      const auto stats = fc->stats();
      std::uint64_t bytes = 0;
      for (const auto& it : model.live) bytes += it.bytes;
      ASSERT_EQ(stats.queuedRequests, model.live.size());
      ASSERT_EQ(stats.queuedBytes, bytes);
    }
  }
  // Every branch of the cycle was exercised many times.
  EXPECT_GT(kinds[DispatchResult::Kind::kDispatched], 1000);
  EXPECT_GT(kinds[DispatchResult::Kind::kGated], 1000);
  EXPECT_GT(kinds[DispatchResult::Kind::kNothingQueued], 10);
}

}  // namespace
}  // namespace holdback
