// Band scheduling (flow/band_scheduling.hpp): saturation-activated weighted fair queuing across
// bands. The starvation bound under sustained high-priority load, the shares, strict priority
// when off or below the threshold, the ceilings' precedence, no banked credit, no allocation,
// validation and reload.
#include "holdback/flow/band_scheduling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "../alloc_counter.hpp"
#include "flow_controller_fixture.hpp"

namespace holdback {
namespace {

using testing::FlowControllerTest;
using testing::holdbackPolicy;
using testing::request;

class BandSchedulingTest : public FlowControllerTest {
 protected:
  // Band priorities of the dispatched requests, in order.
  std::vector<Priority> dispatchedBands() const {
    std::vector<Priority> out;
    for (const auto& r : rec.all()) {
      if (r.outcome.dispatched()) out.push_back(r.band);
    }
    return out;
  }
  // `n` requests queued in band `p` (flows f0..f3).
  void backlog(FlowController& fc, Priority p, int n, TimePoint at) {
    for (int i = 0; i < n; ++i) fc.enqueue(request("f" + std::to_string(i % 4), p, i), at);
  }
  static std::size_t countOf(const std::vector<Priority>& seq, Priority p) {
    return static_cast<std::size_t>(std::count(seq.begin(), seq.end(), p));
  }
  // The largest distance between consecutive dispatches of `p` (the first counted from the start
  // of the sequence, position -1): "one in every K" holds when this is <= K.
  static std::size_t maxGapOf(const std::vector<Priority>& seq, Priority p) {
    std::size_t gap = 0;
    std::size_t last = 0;  // the position after the previous dispatch of p
    for (std::size_t k = 0; k < seq.size(); ++k) {
      if (seq[k] != p) continue;
      gap = std::max(gap, k + 1 - last);
      last = k + 1;
    }
    return std::max(gap, seq.size() + 1 - last);  // a trailing run without p counts too
  }
  static std::size_t longestRunOf(const std::vector<Priority>& seq, Priority p) {
    std::size_t best = 0;
    std::size_t run = 0;
    for (const Priority q : seq) {
      run = q == p ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  }
  static BandSchedulingOptions wfq(double threshold = 0.5) {
    return {.schedule = BandSchedule::kWeightedFair, .activationThreshold = threshold};
  }
};

TEST(BandSchedulingBoundTest, FormulaOfTheHeader) {
  const std::vector<double> w = {8.0, 3.0, 1.0};
  // K_i = 1 + sum over j != i of (ceil(w_j / w_i) + 1).
  EXPECT_EQ(wfqStarvationBound(w, 0), 1u + 2u + 2u);
  EXPECT_EQ(wfqStarvationBound(w, 1), 1u + 4u + 2u);
  EXPECT_EQ(wfqStarvationBound(w, 2), 1u + 9u + 4u);
  EXPECT_EQ(wfqStarvationBound(w, 3), 0u);
  const std::vector<double> alone = {5.0};
  EXPECT_EQ(wfqStarvationBound(alone, 0), 1u);
  const std::vector<double> huge = {1.0, 1e300};
  EXPECT_EQ(wfqStarvationBound(huge, 0), std::numeric_limits<std::size_t>::max());
}

// The named property: three bands kept backlogged (the top one always has work), weights
// 8 : 3 : 1, the pool saturated above the threshold in every cycle. Each band's largest gap
// between dispatches stays within the stated bound, and the shares follow the weights.
TEST_F(BandSchedulingTest, SustainedHighLoadKeepsEveryBandWithinTheBound) {
  auto o = options();  // static policy at 1.0: no band gated below s = 1
  o.bandScheduling = wfq();
  o.bands = {
      {.priority = 30, .weight = 8}, {.priority = 20, .weight = 3}, {.priority = 10, .weight = 1}};
  auto fc = make(std::move(o));
  for (const Priority p : {30, 20, 10}) backlog(*fc, p, 4000, t0);
  detector->set(0.9);
  constexpr int kCycles = 3600;
  for (int i = 0; i < kCycles; ++i) {
    ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  }
  const std::vector<Priority> seq = dispatchedBands();
  ASSERT_EQ(seq.size(), static_cast<std::size_t>(kCycles));
  const std::vector<double> weights = {8.0, 3.0, 1.0};
  const Priority prios[] = {30, 20, 10};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t bound = wfqStarvationBound(weights, i);
    EXPECT_LE(maxGapOf(seq, prios[i]), bound) << "band " << prios[i];
    const double expected = kCycles * weights[i] / 12.0;
    EXPECT_NEAR(static_cast<double>(countOf(seq, prios[i])), expected, 2.0) << prios[i];
  }
  EXPECT_EQ(maxGapOf(seq, 10), 12u);  // weight 1 of 12: exactly one in every 12
}

// Derived weights (no `weight` set): the position in the priority domain, lowest 1. Bands 10
// and 0 (band 0 always exists): 2 : 1.
TEST_F(BandSchedulingTest, DerivedWeightsFollowThePosition) {
  auto o = options();
  o.bandScheduling = wfq();
  o.bands = {{.priority = 10}};
  auto fc = make(std::move(o));
  backlog(*fc, 10, 1000, t0);
  backlog(*fc, 0, 1000, t0);
  detector->set(0.6);
  for (int i = 0; i < 900; ++i) fc->dispatchCycle(t0);
  const std::vector<Priority> seq = dispatchedBands();
  EXPECT_EQ(countOf(seq, 10), 600u);
  EXPECT_EQ(countOf(seq, 0), 300u);
  const std::vector<double> derived = {2.0, 1.0};
  EXPECT_LE(maxGapOf(seq, 0), wfqStarvationBound(derived, 1));
}

// Off (the default) the same load starves the low band completely: strict priority, unchanged.
TEST_F(BandSchedulingTest, OffByDefaultIsStrictPriority) {
  auto o = options();
  EXPECT_EQ(o.bandScheduling.schedule, BandSchedule::kStrictPriority);
  o.bands = {{.priority = 30, .weight = 8}, {.priority = 10, .weight = 1000}};
  auto fc = make(std::move(o));
  backlog(*fc, 30, 500, t0);
  backlog(*fc, 10, 500, t0);
  detector->set(0.9);
  for (int i = 0; i < 500; ++i) fc->dispatchCycle(t0);
  const std::vector<Priority> seq = dispatchedBands();
  EXPECT_EQ(countOf(seq, 30), 500u);
  EXPECT_EQ(countOf(seq, 10), 0u);
  fc->dispatchCycle(t0);
  EXPECT_EQ(dispatchedBands().back(), 10);  // only once the top band is empty
}

// Below the activation threshold the cycle is strict; at and above it the shares apply.
TEST_F(BandSchedulingTest, BelowTheThresholdDispatchIsStrict) {
  auto o = options();
  o.bandScheduling = wfq(0.5);
  o.bands = {{.priority = 30, .weight = 1}, {.priority = 10, .weight = 1}};
  auto fc = make(std::move(o));
  backlog(*fc, 30, 1000, t0);
  backlog(*fc, 10, 1000, t0);
  detector->set(0.49);
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(countOf(dispatchedBands(), 10), 0u);
  rec.clear();
  detector->set(0.5);  // exactly the threshold: active
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(countOf(dispatchedBands(), 10), 50u);
  rec.clear();
  detector->set(std::numeric_limits<double>::quiet_NaN());  // NaN gates every band anyway
  EXPECT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kGated);
}

// The ceilings win: WFQ never dispatches a gated band nor a band below one. Ceilings [0.9,
// 0.65, 0.4] for bands [100, 0, -10] (holdback, min 0.4, max 0.9).
TEST_F(BandSchedulingTest, NeverDispatchesAGatedBand) {
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bandScheduling = wfq(0.3);
  o.bands = {{.priority = 100, .weight = 1},
             {.priority = 0, .weight = 1},
             {.priority = -10, .weight = 1000}};
  auto fc = make(std::move(o));
  for (const Priority p : {100, 0, -10}) backlog(*fc, p, 1000, t0);
  detector->set(0.7);  // 0 and -10 gated: only 100
  for (int i = 0; i < 200; ++i) fc->dispatchCycle(t0);
  std::vector<Priority> seq = dispatchedBands();
  EXPECT_EQ(countOf(seq, 100), 200u);
  EXPECT_EQ(countOf(seq, -10), 0u);
  rec.clear();
  detector->set(0.5);  // -10 gated (0.4): 100 and 0 share 1 : 1, -10 never
  for (int i = 0; i < 200; ++i) fc->dispatchCycle(t0);
  seq = dispatchedBands();
  EXPECT_EQ(countOf(seq, -10), 0u);
  EXPECT_EQ(countOf(seq, 0), 100u);
  EXPECT_EQ(countOf(seq, 100), 100u);
  // An empty gated band above still stops the cycle (head-of-line blocking is unchanged).
  rec.clear();
  const Diagnostics reloaded = fc->reconfigure([&] {
    auto r = options(holdbackPolicy(0.4, 0.9));
    r.bandScheduling = wfq(0.3);
    r.bands = {{.priority = 100, .weight = 1},
               {.priority = 0, .weight = 1},
               {.priority = -10, .weight = 1000}};
    return r;
  }());
  ASSERT_FALSE(reloaded.hasErrors());
  detector->set(0.95);  // every band gated
  EXPECT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kGated);
  EXPECT_TRUE(dispatchedBands().empty());
}

// A band that was empty while another dispatched alone returns lifted to the virtual time: it
// gets its share from then on, not a burst of the credit it would otherwise have banked.
TEST_F(BandSchedulingTest, AReturningBandCannotBankCredit) {
  auto o = options();
  o.bandScheduling = wfq();
  o.bands = {{.priority = 30, .weight = 1}, {.priority = 10, .weight = 1}};
  auto fc = make(std::move(o));
  backlog(*fc, 30, 1000, t0);
  detector->set(0.9);
  for (int i = 0; i < 500; ++i) fc->dispatchCycle(t0);  // band 10 empty: 30 alone
  rec.clear();
  backlog(*fc, 10, 400, t0);
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
  const std::vector<Priority> seq = dispatchedBands();
  EXPECT_EQ(countOf(seq, 10), 50u);
  EXPECT_LE(longestRunOf(seq, 10), 2u);  // ceil(1 / 1) + 1
}

TEST_F(BandSchedulingTest, ActiveCyclesDoNotAllocate) {
  std::vector<Priority> seq;
  seq.reserve(1000);
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched()) seq.push_back(c.bandPriority);
  };
  o.bandScheduling = wfq(0.2);
  o.bands = {{.priority = 100}, {.priority = 50}, {.priority = 0}, {.priority = -10}};
  auto fc = make(std::move(o));
  for (const Priority p : {100, 50, 0, -10}) backlog(*fc, p, 500, t0);
  detector->set(0.3);
  fc->dispatchCycle(t0);  // warm-up: scratch buffers
  std::size_t allocations = 0;
  {
    holdback::testing::AllocationCounter counter;
    for (int i = 0; i < 300; ++i) fc->dispatchCycle(t0);
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(seq.size(), 301u);
  EXPECT_GT(countOf(seq, -10), 0u);  // WFQ was active (strict would serve only 100)
}

TEST_F(BandSchedulingTest, ReconfigureTurnsItOnAndOff) {
  auto o = options();
  o.bands = {{.priority = 30}, {.priority = 10}};
  auto fc = make(o);
  backlog(*fc, 30, 500, t0);
  backlog(*fc, 10, 500, t0);
  detector->set(0.9);
  for (int i = 0; i < 30; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(countOf(dispatchedBands(), 10), 0u);
  o.bandScheduling = wfq();
  o.bands = {{.priority = 30, .weight = 2}, {.priority = 10, .weight = 1}};
  ASSERT_FALSE(fc->reconfigure(o).hasErrors());
  rec.clear();
  for (int i = 0; i < 30; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(countOf(dispatchedBands(), 10), 10u);
  o.bandScheduling = {};
  ASSERT_FALSE(fc->reconfigure(o).hasErrors());
  rec.clear();
  for (int i = 0; i < 30; ++i) fc->dispatchCycle(t0);
  EXPECT_EQ(countOf(dispatchedBands(), 10), 0u);
}

TEST_F(BandSchedulingTest, ValidationNamesEveryBadValueAtOnce) {
  auto o = options();
  o.bandScheduling = wfq(1.0);
  o.bands = {{.priority = 1, .weight = 0.5}, {.priority = 2, .weight = 2e6}, {.priority = 3}};
  o.defaultBand.weight = std::nan("");
  Diagnostics d;
  FlowController::validate(o, d);
  const std::string text = d.toString();
  EXPECT_NE(text.find("/bandScheduling/activationThreshold: 1.0 is outside [0, 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("/bands/0/weight: 0.5 is not a band weight"), std::string::npos) << text;
  EXPECT_NE(text.find("/bands/1/weight: 2e+06 is not a band weight"), std::string::npos) << text;
  EXPECT_NE(text.find("/defaultBand/weight: nan"), std::string::npos) << text;
  EXPECT_EQ(text.find("/bands/2/weight"), std::string::npos) << text;
  for (const double bad : {-0.1, std::nan("")}) {
    o = options();
    o.bandScheduling = wfq(bad);
    Diagnostics e;
    FlowController::validate(o, e);
    EXPECT_TRUE(e.hasErrors()) << bad;
  }
}

}  // namespace
}  // namespace holdback
