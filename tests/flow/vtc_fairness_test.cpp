// vtc-fairness-policy (flow/plugins/vtc_fairness.hpp): token-count fairness within a band by
// virtual token counters, the lift of returning flows, request-count fairness without declared
// footprints, validation, no allocation.
#include "holdback/flow/plugins/vtc_fairness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../alloc_counter.hpp"
#include "flow_controller_fixture.hpp"

namespace holdback {
namespace {

using testing::FlowControllerTest;
using testing::request;

class VtcFairnessTest : public FlowControllerTest {
 protected:
  std::unique_ptr<FlowController> makeVtc(std::shared_ptr<const FairnessPolicy> fairness) {
    auto o = options();
    o.defaultBand.fairness = std::move(fairness);
    return make(std::move(o));
  }
  void queue(FlowController& fc, const std::string& flow, int n, std::int64_t tokens) {
    for (int i = 0; i < n; ++i) {
      auto r = request(flow, 0, i);
      r.kvTokens = tokens;
      fc.enqueue(std::move(r), t0);
    }
  }
  static std::size_t longestRun(const std::vector<std::string>& seq, const std::string& flow) {
    std::size_t best = 0;
    std::size_t run = 0;
    for (const std::string& f : seq) {
      run = f == flow ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  }
};

// Two backlogged flows, requests of 1,000 and 100 declared tokens: VTC equalizes the tokens
// served (within 2 x the largest cost), so the light flow gets about 10x the dispatches;
// round-robin equalizes the dispatches instead (10x the tokens to the heavy flow).
TEST_F(VtcFairnessTest, EqualizesServedTokensNotRequests) {
  const std::map<std::string, std::int64_t> tokens = {{"heavy", 1000}, {"light", 100}};
  for (const bool vtc : {true, false}) {
    rec.clear();
    auto fc = makeVtc(vtc ? vtcFairness() : roundRobinFairness());
    queue(*fc, "heavy", 600, 1000);
    queue(*fc, "light", 4000, 100);
    for (int i = 0; i < 1100; ++i) fc->dispatchCycle(t0);
    std::map<std::string, double> served;
    std::map<std::string, int> count;
    for (const std::string& f : rec.dispatchedFlows()) {
      served[f] += static_cast<double>(tokens.at(f));
      count[f] += 1;
    }
    if (vtc) {
      EXPECT_LE(std::abs(served["heavy"] - served["light"]), 2.0 * (1.0 + 1000.0));
      // 1,100 x 101 / (101 + 1,001) = 100.8 heavy dispatches.
      EXPECT_NEAR(count["heavy"], 101, 2);
      EXPECT_NEAR(count["light"], 999, 2);
    } else {
      EXPECT_EQ(count["heavy"], 550);
      EXPECT_EQ(count["light"], 550);
    }
  }
}

// A flow that arrives after another was served alone is lifted to the active minimum: it
// shares from then on instead of taking a burst for the credit it never earned.
TEST_F(VtcFairnessTest, AReturningFlowIsLiftedAndCannotBankCredit) {
  auto fc = makeVtc(vtcFairness());
  queue(*fc, "early", 2000, 100);
  for (int i = 0; i < 200; ++i) fc->dispatchCycle(t0);
  rec.clear();
  queue(*fc, "late", 60, 100);
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);
  const std::vector<std::string> seq = rec.dispatchedFlows();
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "late"), 50);
  EXPECT_LE(longestRun(seq, "late"), 2u);
  // And a flow that ran dry and comes back is lifted the same way.
  for (int i = 0; i < 400; ++i) fc->dispatchCycle(t0);  // "late"'s last 10, then "early" alone
  rec.clear();
  queue(*fc, "late", 100, 100);
  for (int i = 0; i < 40; ++i) fc->dispatchCycle(t0);
  const std::vector<std::string> again = rec.dispatchedFlows();
  EXPECT_EQ(std::count(again.begin(), again.end(), "late"), 20);
}

// Without declared footprints every request costs requestCost: request-count fairness.
TEST_F(VtcFairnessTest, UndeclaredFootprintsShareByRequests) {
  auto fc = makeVtc(vtcFairness());
  queue(*fc, "a", 100, 0);
  queue(*fc, "b", 100, -5);  // negative counts as none
  queue(*fc, "c", 100, 0);
  for (int i = 0; i < 90; ++i) fc->dispatchCycle(t0);
  const std::vector<std::string> seq = rec.dispatchedFlows();
  for (const char* f : {"a", "b", "c"}) EXPECT_EQ(std::count(seq.begin(), seq.end(), f), 30) << f;
}

// tokenWeight scales the footprint against requestCost: with requestCost 1,000 and tokenWeight
// 0 the 1,000-token flow and the 100-token flow alternate.
TEST_F(VtcFairnessTest, TokenWeightAgainstRequestCost) {
  auto fc = makeVtc(
      std::move(VtcFairnessPolicy::create({.requestCost = 1000, .tokenWeight = 0})).value());
  queue(*fc, "heavy", 100, 1000);
  queue(*fc, "light", 100, 100);
  for (int i = 0; i < 60; ++i) fc->dispatchCycle(t0);
  const std::vector<std::string> seq = rec.dispatchedFlows();
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "heavy"), 30);
}

TEST_F(VtcFairnessTest, ValidationNamesEachField) {
  Diagnostics d;
  VtcFairnessPolicy::validate({.requestCost = 0, .tokenWeight = -1}, "/p", d);
  const std::string text = d.toString();
  EXPECT_NE(text.find("/p/requestCost: 0.0 is outside (0, 1e9]"), std::string::npos) << text;
  EXPECT_NE(text.find("/p/tokenWeight: -1.0 is outside [0, 1e6]"), std::string::npos) << text;
  EXPECT_FALSE(VtcFairnessPolicy::create({.requestCost = std::nan("")}).ok());
}

TEST_F(VtcFairnessTest, DispatchDoesNotAllocate) {
  std::vector<Priority> dispatched;
  dispatched.reserve(2000);
  auto o = options();
  o.defaultBand.fairness = vtcFairness();
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched()) dispatched.push_back(c.bandPriority);
  };
  auto fc = make(std::move(o));
  for (int f = 0; f < 64; ++f) queue(*fc, "flow-" + std::to_string(f), 20, 10 + f);
  fc->dispatchCycle(t0);  // warm-up
  std::size_t allocations = 0;
  {
    holdback::testing::AllocationCounter counter;
    for (int i = 0; i < 1000; ++i) fc->dispatchCycle(t0);
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(dispatched.size(), 1001u);
}

}  // namespace
}  // namespace holdback
