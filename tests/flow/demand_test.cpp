// Demand measured by the flow controller (leases, release, the DemandView handed to the policy).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_controller_fixture.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;
using Kind = DispatchResult::Kind;

// Records the last DemandView it was given (fixed-size storage: records without allocating).
class RecordingDemandPolicy final : public UsageLimitPolicy {
 public:
  explicit RecordingDemandPolicy(bool uses = true)
      : UsageLimitPolicy("recording-demand"), uses_(uses) {}
  [[nodiscard]] bool usesDemand() const noexcept override { return uses_; }
  [[nodiscard]] DemandSmoothing demandSmoothing() const noexcept override {
    DemandSmoothing s;
    s.rise = 100ms;
    s.decay = 1s;
    s.holdingSamples = 1.0;  // the last holding time
    return s;
  }
  [[nodiscard]] std::string_view type() const noexcept override { return "recording-demand"; }

  std::size_t calls = 0;
  std::size_t demandCalls = 0;
  std::size_t bands = 0;
  std::array<Priority, 8> priorities{};
  std::array<BandDemand, 8> demand{};
  double requestUnit = 0.0;
  double completionRate = 0.0;

 protected:
  void compute(double, std::span<const Priority>, std::span<double> ceilings) noexcept override {
    ++calls;
    for (double& c : ceilings) c = 1.0;
  }
  void computeWithDemand(double, std::span<const Priority> p, std::span<double> ceilings,
                         const DemandView& view) noexcept override {
    ++calls;
    ++demandCalls;
    bands = view.bands.size();
    for (std::size_t i = 0; i < view.bands.size() && i < demand.size(); ++i) {
      demand[i] = view.bands[i];
      priorities[i] = p[i];
    }
    requestUnit = view.requestUnit;
    completionRate = view.completionRate;
    for (double& c : ceilings) c = 1.0;
  }

 private:
  bool uses_;
};

class DemandTest : public FlowControllerTest {
 protected:
  std::shared_ptr<RecordingDemandPolicy> policy = std::make_shared<RecordingDemandPolicy>();
  std::unique_ptr<FlowController> makeDemand() {
    auto o = options(policy);
    o.bands = {{.priority = 10}, {.priority = 0}};
    return make(std::move(o));
  }
};

TEST_F(DemandTest, ReleaseOfUnknownQueuedOrReleasedIdReturnsFalse) {
  auto fc = makeDemand();
  EXPECT_FALSE(fc->release(12345, t0));  // unknown
  Ticket a = fc->enqueue(request("a", 10, 1), t0);
  Ticket b = fc->enqueue(request("a", 10, 2), t0);
  EXPECT_FALSE(a.release(t0));  // queued
  ASSERT_EQ(fc->dispatchCycle(t0).id, a.id());
  EXPECT_FALSE(b.release(t0));  // still queued
  EXPECT_TRUE(a.release(t0 + 1s));
  EXPECT_FALSE(a.release(t0 + 2s));  // already released
  EXPECT_FALSE(fc->release(a.id(), t0 + 2s));
  EXPECT_TRUE(b.cancel());
  EXPECT_FALSE(b.release(t0));  // cancelled, never dispatched
  EXPECT_FALSE(Ticket{}.release(t0));
}

TEST_F(DemandTest, NoLeasesWhenThePolicyDoesNotReadDemand) {
  auto quiet = std::make_shared<RecordingDemandPolicy>(false);
  auto o = options(quiet);
  auto fc = make(std::move(o));
  Ticket a = fc->enqueue(request("a", 0, 1), t0);
  ASSERT_EQ(fc->dispatchCycle(t0).id, a.id());
  EXPECT_FALSE(a.release(t0 + 1s));
  EXPECT_EQ(quiet->demandCalls, 0u);
  EXPECT_GT(quiet->calls, 0u);
}

TEST_F(DemandTest, DemandFiguresReachThePolicy) {
  auto fc = makeDemand();
  detector->set(0.5);
  for (int i = 0; i < 3; ++i) fc->enqueue(request("hi", 10, i), t0);
  for (int i = 0; i < 2; ++i) fc->enqueue(request("lo", 0, i), t0);
  ASSERT_EQ(fc->dispatchCycle(t0).kind, Kind::kDispatched);  // first update: counts only
  ASSERT_EQ(policy->bands, 2u);
  EXPECT_EQ(policy->priorities[0], 10);
  EXPECT_EQ(policy->priorities[1], 0);
  EXPECT_EQ(policy->demand[0].queued, 3.0);  // counted before this cycle's dispatch
  EXPECT_EQ(policy->demand[1].queued, 2.0);
  EXPECT_TRUE(std::isnan(policy->requestUnit));  // nothing in flight yet

  const DispatchResult second = fc->dispatchCycle(t0 + 100ms);
  ASSERT_EQ(second.kind, Kind::kDispatched);
  EXPECT_EQ(second.priority, 10);
  EXPECT_EQ(policy->demand[0].inFlight, 1.0);
  EXPECT_EQ(policy->demand[0].queued, 2.0);
  EXPECT_EQ(policy->demand[1].inFlight, 0.0);
  EXPECT_DOUBLE_EQ(policy->requestUnit, 0.5);     // saturation 0.5 / 1 in flight
  EXPECT_GT(policy->demand[0].arrivalRate, 0.0);  // 3 arrivals over 100 ms
  EXPECT_GT(policy->demand[0].occupancy, 0.0);
  EXPECT_EQ(policy->demand[0].holdingTime, 0.0);  // no completion yet

  EXPECT_TRUE(fc->release(second.id, t0 + 2100ms));  // held 2 s
  fc->dispatchCycle(t0 + 2200ms);
  EXPECT_DOUBLE_EQ(policy->demand[0].holdingTime, 2.0);
  EXPECT_EQ(policy->demand[0].inFlight, 1.0);  // the first one, never released
  EXPECT_DOUBLE_EQ(policy->requestUnit, 0.5);
}

// A replica sharing the pool (ReplicaPort::setShare): the policy sizes from the pool's completions
// per replica, and the replica publishes its own completions and leases whether or not eviction is
// on (the others' policies need them).
TEST_F(DemandTest, AReplicaGivesThePolicyThePoolsCompletionsPerReplica) {
  auto fc = makeDemand();
  detector->set(0.5);
  for (int i = 0; i < 4; ++i) fc->enqueue(request("lo", 0, i), t0);
  std::vector<RequestId> sent;
  for (int i = 0; i < 4; ++i) sent.push_back(fc->dispatchCycle(t0 + i * 10ms).id);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(fc->release(sent[i], t0 + 500ms));
  fc->dispatchCycle(t0 + 600ms);
  EXPECT_TRUE(std::isnan(policy->completionRate));  // alone: the bands' own sum
  const ReplicaRestoreFigures mine = fc->replicaPort().restoreFigures();
  EXPECT_GT(mine.completionRate, 0.0);  // three released, eviction off
  EXPECT_EQ(mine.leases, 1.0);
  ReplicaShare share;
  share.replicas = 3;
  share.rank = 1;
  share.others.completionRate = 30.0;
  fc->replicaPort().setShare(share);
  fc->dispatchCycle(t0 + 700ms);
  const double own = fc->replicaPort().restoreFigures().completionRate;
  EXPECT_GT(own, 0.0);
  EXPECT_DOUBLE_EQ(policy->completionRate, (own + 30.0) / 3.0);
  fc->replicaPort().setShare(std::nullopt);  // the store failed: alone again
  fc->dispatchCycle(t0 + 800ms);
  EXPECT_TRUE(std::isnan(policy->completionRate));
}

TEST_F(DemandTest, ExpireReapsLeasesOlderThanTheLeaseTimeout) {
  auto o = options(policy);
  o.leaseTimeout = 10s;
  auto fc = make(std::move(o));
  Ticket a = fc->enqueue(request("a", 0, 1), t0);
  Ticket b = fc->enqueue(request("a", 0, 2), t0);
  ASSERT_EQ(fc->dispatchCycle(t0).id, a.id());
  ASSERT_EQ(fc->dispatchCycle(t0 + 5s).id, b.id());
  fc->expire(t0 + 9s);
  fc->dispatchCycle(t0 + 9s);
  EXPECT_EQ(policy->demand[0].inFlight, 2.0);
  fc->expire(t0 + 10s);  // a reaped, b kept
  fc->dispatchCycle(t0 + 10s);
  EXPECT_EQ(policy->demand[0].inFlight, 1.0);
  EXPECT_FALSE(a.release(t0 + 11s));
  EXPECT_TRUE(b.release(t0 + 11s));
}

TEST_F(DemandTest, LeaseTimeoutMustBePositive) {
  auto o = options(policy);
  o.leaseTimeout = 0s;
  Diagnostics d;
  FlowController::validate(o, d);
  EXPECT_TRUE(d.hasErrors());
  EXPECT_NE(d.toString().find("/leaseTimeout"), std::string::npos) << d.toString();
}

TEST_F(DemandTest, NoAllocationPerRequestInSteadyStateWithDemand) {
  std::size_t outcomes = 0;
  auto o = options(policy);
  o.bands = {{.priority = 10}, {.priority = 0}};
  o.onOutcome = [&](Completion&&) { ++outcomes; };
  auto fc = make(std::move(o));
  std::vector<RequestId> ids(64);
  // Warm-up: the lease table, the demand slots and the scratch grow once.
  auto round = [&](TimePoint at) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      fc->enqueue(request("f", i % 2 == 0 ? 10 : 0, static_cast<int>(i)), at);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = fc->dispatchCycle(at + 1ms).id;
    for (RequestId id : ids) fc->release(id, at + 2ms);
  };
  for (int i = 0; i < 3; ++i) round(t0 + i * 10ms);
  std::size_t allocations = 0;
  {
    holdback::testing::AllocationCounter counter;
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = fc->dispatchCycle(t0 + 1s).id;
    for (RequestId id : ids) fc->release(id, t0 + 1s);
    allocations = counter.count();
  }
  // Nothing was queued: measure dispatch + release of queued requests as well.
  for (std::size_t i = 0; i < ids.size(); ++i) {
    fc->enqueue(request("f", i % 2 == 0 ? 10 : 0, static_cast<int>(i)), t0 + 2s);
  }
  {
    holdback::testing::AllocationCounter counter;
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = fc->dispatchCycle(t0 + 3s).id;
    for (RequestId id : ids) EXPECT_TRUE(fc->release(id, t0 + 4s));
    allocations += counter.count();
  }
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(outcomes, 4 * ids.size());
  EXPECT_GT(policy->demandCalls, 0u);
}

}  // namespace
}  // namespace holdback
