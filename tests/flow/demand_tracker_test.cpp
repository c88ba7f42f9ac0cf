// detail::DemandTracker on its own: per-priority slots kept and reused, the first update counting
// only, the view in the domain's order, restarts on new smoothing; and, for a known sequence of
// arrivals, dispatches and a release, exactly the figures the flow controller hands its policy.
// detail/ headers are not self-contained in header-only mode (band_table.hpp reaches
// flow_controller.hpp, whose -inl includes the detail -inl files): enter through the public header.
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/demand_tracker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using detail::Band;
using detail::DemandTracker;
using detail::LeaseTable;

// Keeps every DemandView it is given (the tracker side reads only its smoothing).
class ViewKeepingPolicy final : public UsageLimitPolicy {
 public:
  ViewKeepingPolicy() : UsageLimitPolicy("view-keeping") {}
  [[nodiscard]] bool usesDemand() const noexcept override { return true; }
  [[nodiscard]] DemandSmoothing demandSmoothing() const noexcept override {
    DemandSmoothing s;
    s.rise = 100ms;
    s.decay = 1s;
    s.holdingSamples = 1.0;
    return s;
  }
  [[nodiscard]] std::string_view type() const noexcept override { return "view-keeping"; }

  std::vector<std::vector<BandDemand>> views;

 protected:
  void compute(double, std::span<const Priority>, std::span<double> ceilings) noexcept override {
    for (double& c : ceilings) c = 1.0;
  }
  void computeWithDemand(double, std::span<const Priority>, std::span<double> ceilings,
                         const DemandView& view) noexcept override {
    views.emplace_back(view.bands.begin(), view.bands.end());
    for (double& c : ceilings) c = 1.0;
  }
};

void expectSameDemand(std::span<const BandDemand> got, const std::vector<BandDemand>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].occupancy, want[i].occupancy) << i;
    EXPECT_EQ(got[i].arrivalRate, want[i].arrivalRate) << i;
    EXPECT_EQ(got[i].holdingTime, want[i].holdingTime) << i;
    EXPECT_EQ(got[i].inFlight, want[i].inFlight) << i;
    EXPECT_EQ(got[i].queued, want[i].queued) << i;
    EXPECT_EQ(got[i].waitP95, want[i].waitP95) << i;
    EXPECT_EQ(got[i].completionRate, want[i].completionRate) << i;
  }
}

class DemandTrackerTest : public testing::FlowControllerTest {
 protected:
  std::shared_ptr<ViewKeepingPolicy> policy = std::make_shared<ViewKeepingPolicy>();
  Band high{10, 0, 0, nullptr, nullptr};
  Band low{0, 0, 0, nullptr, nullptr};
  std::vector<Band*> bands{&high, &low};
  LeaseTable leases;
  DemandTracker tracker;
};

TEST_F(DemandTrackerTest, MatchesTheControllersDemandViewForAKnownSequence) {
  // The controller: 3 requests at 10 and 2 at 0 queued at t0; cycles at t0 and t0 + 100 ms (each
  // dispatches a request of 10); the second released at t0 + 2100 ms; a cycle at t0 + 2200 ms.
  auto o = options(policy);
  o.bands = {{.priority = 10}, {.priority = 0}};
  auto fc = make(std::move(o));
  detector->set(0.5);
  for (int i = 0; i < 3; ++i) fc->enqueue(testing::request("hi", 10, i), t0);
  for (int i = 0; i < 2; ++i) fc->enqueue(testing::request("lo", 0, i), t0);
  const RequestId first = fc->dispatchCycle(t0).id;
  const RequestId second = fc->dispatchCycle(t0 + 100ms).id;
  ASSERT_TRUE(fc->release(second, t0 + 2100ms));
  fc->dispatchCycle(t0 + 2200ms);
  ASSERT_EQ(policy->views.size(), 3u);

  // The same sequence through the tracker, as the controller drives it.
  for (int i = 0; i < 3; ++i) tracker.arrived(&high, *policy, leases);
  for (int i = 0; i < 2; ++i) tracker.arrived(&low, *policy, leases);
  high.queued_requests = 3;
  low.queued_requests = 2;
  const auto dispatch = [&](RequestId id, TimePoint at) {
    const std::uint32_t slot = tracker.slotOf(&high, *policy, leases);
    ASSERT_TRUE(leases.add(id, slot, high.prio, at));
    tracker.dispatched(slot, at - t0);
    high.queued_requests -= 1;
  };
  tracker.update(t0, bands, bands, *policy, leases);
  expectSameDemand(tracker.view(), policy->views[0]);
  dispatch(first, t0);
  tracker.update(t0 + 100ms, bands, bands, *policy, leases);
  expectSameDemand(tracker.view(), policy->views[1]);
  dispatch(second, t0 + 100ms);
  const std::optional<LeaseTable::Lease> ended = leases.remove(second);
  ASSERT_TRUE(ended);
  tracker.completed(ended->band, t0 + 2100ms - ended->dispatchedAt);
  tracker.update(t0 + 2200ms, bands, bands, *policy, leases);
  expectSameDemand(tracker.view(), policy->views[2]);
  EXPECT_DOUBLE_EQ(tracker.view()[0].holdingTime, 2.0);
}

TEST_F(DemandTrackerTest, PeerArrivalsCountAsTheirPrioritysArrivals) {
  // Another replica's arrivals (the replica feed) count as this one's of the same priority.
  DemandTracker mine;
  const std::uint32_t h = tracker.slotOf(&high, *policy, leases);
  (void)mine.slotOf(&high, *policy, leases);
  for (int i = 0; i < 2; ++i) tracker.arrived(&high, *policy, leases);
  for (int i = 0; i < 3; ++i) tracker.peerArrived(10, 0);
  for (int i = 0; i < 5; ++i) mine.arrived(&high, *policy, leases);
  EXPECT_DOUBLE_EQ(tracker.slots()[h].arrivals, 5.0);
  // A priority without a slot here: dropped, no slot added.
  tracker.peerArrived(7, 0);
  EXPECT_EQ(tracker.slots().size(), 1U);
  const std::vector<Band*> only{&high};
  for (DemandTracker* t : {&tracker, &mine}) {
    t->update(t0, only, only, *policy, leases);
    t->update(t0 + 100ms, only, only, *policy, leases);
  }
  EXPECT_GT(tracker.view()[0].arrivalRate, 0.0);
  EXPECT_DOUBLE_EQ(tracker.view()[0].arrivalRate, mine.view()[0].arrivalRate);
}

TEST_F(DemandTrackerTest, TheControllerCountsPeerArrivalsInItsDemand) {
  // A controller that sees 2 arrivals of its own and 3 of another replica's reads the arrival
  // rate of one that sees 5 of its own, and more than one that sees only its 2.
  const auto arrivalRateAfter = [&](int own, int peers) {
    auto p = std::make_shared<ViewKeepingPolicy>();
    auto o = options(p);
    o.bands = {{.priority = 10}};
    auto fc = make(std::move(o));
    detector->set(0.5);
    fc->dispatchCycle(t0);
    for (int i = 0; i < own; ++i) fc->enqueue(testing::request("hi", 10, i), t0 + 50ms);
    for (int i = 0; i < peers; ++i) fc->replicaPort().recordPeerArrival(10, 0);
    fc->replicaPort().recordPeerArrival(3, 0);  // no band of that priority: dropped
    fc->dispatchCycle(t0 + 100ms);
    return p->views.back().at(0).arrivalRate;
  };
  const double mixed = arrivalRateAfter(2, 3);
  EXPECT_DOUBLE_EQ(mixed, arrivalRateAfter(5, 0));
  EXPECT_GT(mixed, arrivalRateAfter(2, 0));
}

TEST_F(DemandTrackerTest, SlotsArePerPriorityAndReusedByABandThatComesBack) {
  EXPECT_EQ(tracker.cachedSlotOf(high), nullptr);
  const std::uint32_t h = tracker.slotOf(&high, *policy, leases);
  const std::uint32_t l = tracker.slotOf(&low, *policy, leases);
  EXPECT_NE(h, l);
  EXPECT_EQ(tracker.slots().size(), 2u);
  EXPECT_EQ(leases.bandCapacity(), 2u);  // room for every slot's leases
  ASSERT_NE(tracker.cachedSlotOf(high), nullptr);
  EXPECT_EQ(tracker.cachedSlotOf(high)->prio, 10);
  // A new band of priority 10 (the old one was removed): the same slot, found and cached.
  Band again{10, 0, 0, nullptr, nullptr};
  EXPECT_EQ(tracker.cachedSlotOf(again), nullptr);
  EXPECT_EQ(tracker.slotOf(&again, *policy, leases), h);
  EXPECT_EQ(again.demand_slot, h);
  EXPECT_EQ(tracker.slots().size(), 2u);
  // A stale cache (another priority's slot) is not trusted.
  again.demand_slot = l;
  EXPECT_EQ(tracker.cachedSlotOf(again), nullptr);
  EXPECT_EQ(tracker.slotOf(&again, *policy, leases), h);
}

TEST_F(DemandTrackerTest, FirstUpdateCountsOnlyAndKeepsTheArrivalsForTheNext) {
  for (int i = 0; i < 4; ++i) tracker.arrived(&high, *policy, leases);
  high.queued_requests = 4;
  DemandEstimator expected(policy->demandSmoothing());
  tracker.update(t0, bands, bands, *policy, leases);
  expected.update(0.0, 4.0, 0.0, 4.0);
  EXPECT_EQ(tracker.view()[0].arrivalRate, 0.0);
  EXPECT_EQ(tracker.view()[0].queued, 4.0);
  EXPECT_EQ(tracker.slots()[high.demand_slot].arrivals, 4.0);  // kept
  tracker.update(t0, bands, bands, *policy, leases);           // the clock did not move
  EXPECT_EQ(tracker.slots()[high.demand_slot].arrivals, 4.0);
  tracker.update(t0 + 200ms, bands, bands, *policy, leases);
  expected.update(0.2, 4.0, 0.0, 4.0);
  EXPECT_EQ(tracker.slots()[high.demand_slot].arrivals, 0.0);
  EXPECT_EQ(tracker.view()[0].arrivalRate, expected.demand().arrivalRate);
  EXPECT_GT(tracker.view()[0].arrivalRate, 0.0);
  EXPECT_EQ(tracker.view()[0].occupancy, expected.demand().occupancy);
}

TEST_F(DemandTrackerTest, ViewFollowsTheDomainAndCountsInFlightLeases) {
  const std::uint32_t l = tracker.slotOf(&low, *policy, leases);
  ASSERT_TRUE(leases.add(7, l, low.prio, t0));
  ASSERT_TRUE(leases.add(8, l, low.prio, t0));
  low.queued_requests = 1;
  const std::vector<Band*> domain{&low};  // 10 left the domain
  tracker.update(t0, bands, domain, *policy, leases);
  ASSERT_EQ(tracker.view().size(), 1u);
  EXPECT_EQ(tracker.view()[0].inFlight, 2.0);
  EXPECT_EQ(tracker.view()[0].queued, 1.0);
  EXPECT_EQ(tracker.slots().size(), 2u);  // every band of `all` has its slot
}

TEST_F(DemandTrackerTest, NewSmoothingRestartsOnlyTheEstimatorsThatDiffer) {
  const std::uint32_t h = tracker.slotOf(&high, *policy, leases);
  tracker.completed(h, 2s);
  EXPECT_EQ(tracker.slots()[h].estimator.demand().holdingTime, 2.0);
  tracker.resmooth(policy->demandSmoothing());  // the same constants: kept
  EXPECT_EQ(tracker.slots()[h].estimator.demand().holdingTime, 2.0);
  DemandSmoothing other = policy->demandSmoothing();
  other.decay = 2s;
  tracker.resmooth(other);
  EXPECT_EQ(tracker.slots()[h].estimator.demand().holdingTime, 0.0);
  EXPECT_EQ(tracker.slots()[h].estimator.smoothing().decay, 2s);
  tracker.completed(99, 1s);  // an unknown slot is ignored
}

}  // namespace
}  // namespace holdback
