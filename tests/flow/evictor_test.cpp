// detail::Evictor on its own, over a lease table, a demand tracker and two hand-made bands: the
// sizing and victims of a head-of-line decision, stop-and-wait, confirmation and its grace,
// timeouts, reaping, pipelined reserve restoration, and the delivery of a batch after the lock.
// detail/ headers are not self-contained in header-only mode (band_table.hpp reaches
// flow_controller.hpp, whose -inl includes the detail -inl files): enter through the public header.
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/evictor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/eviction.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using detail::Band;
using detail::Evictor;
using detail::LeaseTable;
using detail::RevocationBatch;

std::size_t leaseEnds(const EvictionStats& s, LeaseEnd end) {
  return static_cast<std::size_t>(s.leaseEnds[static_cast<std::size_t>(end)]);
}

class EvictorTest : public ::testing::Test {
 protected:
  EvictorTest() {
    options.filter = std::make_shared<SheddableEvictionFilter>();
    options.order = std::make_shared<PriorityThenTimeEvictionOrder>();
    options.confirmationGrace = 100ms;
    options.confirmationTimeout = 5s;
  }
  // Leases `n` requests of band `band` (ids from `first`, 1 ms apart from `at`), delivered.
  void lease(Band& band, RequestId first, std::size_t n, TimePoint at) {
    const std::uint32_t slot = demand.slotOf(&band, *policy, leases);
    for (std::size_t i = 0; i < n; ++i) {
      const RequestId id = first + i;
      ASSERT_TRUE(leases.add(id, slot, band.prio, at + std::chrono::milliseconds(i)));
      leases.markDelivered(id);
      evictor.leaseStarted(band.prio, options);
    }
  }
  // The protected band's arrivals into `d`: 1000 over one second (to t0 + 1 s).
  void protectedArrivals(detail::DemandTracker& d, LeaseTable& l) {
    for (int i = 0; i < 1000; ++i) d.arrived(&high, *policy, l);
    d.update(t0, bands, bands, *policy, l);
    d.update(t0 + 1s, bands, bands, *policy, l);
  }
  Evictor::Cycle cycle(TimePoint now, double s) {
    return {options, leases, demand, bands, ceilings, now, s};
  }

  std::shared_ptr<UsageLimitPolicy> policy = testing::staticPolicy();
  EvictionOptions options;
  LeaseTable leases;
  detail::DemandTracker demand;
  Evictor evictor;
  Band high{10, 0, 0, nullptr, nullptr};
  Band low{-1, 0, 0, nullptr, nullptr};
  std::vector<Band*> bands{&high, &low};
  std::vector<double> ceilings{0.5, 0.5};
  TimePoint t0 = TimePoint{} + std::chrono::hours(1);
};

TEST_F(EvictorTest, BlockRevokesTheNewestSheddableLeasesTheDeficitNeeds) {
  lease(high, 1, 1, t0);
  lease(low, 11, 3, t0);
  high.queued_requests = 1;
  RevocationBatch out;
  // s = 0.9, ceiling 0.5: target 0.4; credit 0.9 / 4 leases = 0.225: ceil(0.4 / 0.225) = 2.
  evictor.reclaim(cycle(t0 + 1s, 0.9), 0, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.at(0).id, 13u);  // the most recently dispatched first
  EXPECT_EQ(out.at(1).id, 12u);
  EXPECT_EQ(out.at(0).priority, -1);
  EXPECT_EQ(out.at(0).demandPriority, 10);
  EXPECT_EQ(out.at(0).issuedAt, t0 + 1s);
  EXPECT_DOUBLE_EQ(out.at(0).credit, 0.225);
  EXPECT_TRUE(leases.find(13)->revoked);
  EXPECT_FALSE(leases.find(11)->revoked);
  const EvictionStats s = evictor.stats();
  EXPECT_EQ(s.issued, 2u);
  EXPECT_EQ(s.outstanding, 2u);
  EXPECT_DOUBLE_EQ(s.pendingReclaim, 0.45);
  EXPECT_DOUBLE_EQ(s.reclaimTarget, 0.4);
  ASSERT_EQ(s.issuedByPriority.size(), 1u);
  EXPECT_EQ(s.issuedByPriority[0].first, -1);
  EXPECT_EQ(s.issuedByPriority[0].second, 2u);
  EXPECT_EQ(s.leasesStarted, 4u);

  RevocationBatch again;  // stop-and-wait: nothing while revocations are outstanding
  evictor.reclaim(cycle(t0 + 2s, 0.9), 0, again);
  EXPECT_EQ(again.size(), 0u);
}

TEST_F(EvictorTest, NoDecisionWithoutQueuedDemandOrBelowTheCeiling) {
  lease(low, 11, 3, t0);
  RevocationBatch out;
  evictor.reclaim(cycle(t0, 0.9), 0, out);  // nothing queued at 10
  high.queued_requests = 1;
  evictor.reclaim(cycle(t0, 0.4), 0, out);  // not gated
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(evictor.stats().issued, 0u);
}

TEST_F(EvictorTest, ConfirmationCoolsForTheGraceThenTheDebitExpires) {
  lease(low, 11, 3, t0);
  high.queued_requests = 1;
  RevocationBatch out;
  evictor.reclaim(cycle(t0, 0.9), 0, out);  // credit 0.3: ceil(0.4 / 0.3) = 2
  ASSERT_EQ(out.size(), 2u);
  const std::optional<LeaseTable::Lease> ended = leases.remove(out.at(0).id);
  ASSERT_TRUE(ended);
  evictor.leaseReleased(*ended, t0 + 50ms, options);
  EvictionStats s = evictor.stats();
  EXPECT_EQ(s.confirmed, 1u);
  EXPECT_EQ(s.outstanding, 1u);
  EXPECT_EQ(s.cooling, 1u);
  EXPECT_DOUBLE_EQ(s.confirmationSumSeconds, 0.05);
  EXPECT_EQ(leaseEnds(s, LeaseEnd::kRevokedConfirmed), 1u);
  evictor.retireRevocations(t0 + 149ms, options, leases);
  EXPECT_EQ(evictor.stats().cooling, 1u);
  evictor.retireRevocations(t0 + 150ms, options, leases);  // 50 ms + the 100 ms grace
  s = evictor.stats();
  EXPECT_EQ(s.cooling, 0u);
  EXPECT_DOUBLE_EQ(s.pendingReclaim, 0.3);  // the outstanding one's debit
  // A release of a lease never revoked counts as released.
  const std::optional<LeaseTable::Lease> plain = leases.remove(11);
  ASSERT_TRUE(plain);
  ASSERT_FALSE(plain->revoked);
  evictor.leaseReleased(*plain, t0 + 1s, options);
  EXPECT_EQ(leaseEnds(evictor.stats(), LeaseEnd::kReleased), 1u);
}

TEST_F(EvictorTest, UnconfirmedRevocationsTimeOutAndTheirLeasesEnd) {
  lease(low, 11, 3, t0);
  high.queued_requests = 1;
  RevocationBatch out;
  evictor.reclaim(cycle(t0, 0.9), 0, out);
  ASSERT_EQ(out.size(), 2u);
  evictor.retireRevocations(t0 + 5s, options, leases);  // not yet beyond the timeout
  EXPECT_EQ(evictor.stats().outstanding, 2u);
  evictor.retireRevocations(t0 + 5s + 1ms, options, leases);
  const EvictionStats s = evictor.stats();
  EXPECT_EQ(s.timedOut, 2u);
  EXPECT_EQ(s.outstanding, 0u);
  EXPECT_EQ(s.cooling, 2u);
  EXPECT_EQ(leaseEnds(s, LeaseEnd::kRevokedTimedOut), 2u);
  EXPECT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases.find(out.at(0).id), nullptr);
}

TEST_F(EvictorTest, ReapEndsLeasesHeldPastTheLeaseTimeout) {
  lease(low, 11, 1, t0);
  lease(low, 12, 1, t0 + 5s);
  lease(high, 21, 1, t0);
  evictor.reapLeases(leases, t0 + 10s, 10s, options);
  EXPECT_EQ(leases.size(), 1u);
  ASSERT_NE(leases.find(12), nullptr);
  EXPECT_EQ(leaseEnds(evictor.stats(), LeaseEnd::kReaped), 2u);
}

TEST_F(EvictorTest, RestorationIsPipelinedAndDebitsWhatIsPending) {
  options.maxRevocationsPerDecision = 8;
  options.restoreReserve.enabled = true;
  options.restoreReserve.leadTime = 1s;
  ceilings = {1.0, 0.25};
  lease(low, 11, 3, t0);
  // The protected band's arrivals: 1000 over one second.
  protectedArrivals(demand, leases);
  ASSERT_GT(demand.cachedSlotOf(high)->estimator.demand().arrivalRate, 100.0);
  // s = 0.75 over 3 leases: a request is 0.25; the victim band is (0.75 - 0.25) / 0.25 = 2
  // requests over its ceiling, fewer than the reserve wanted: 2 revocations, before any block.
  RevocationBatch out;
  evictor.restoreReserve(cycle(t0 + 1s, 0.75), out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.at(0).demandPriority, 10);  // made for the top band
  const EvictionStats s = evictor.stats();
  EXPECT_EQ(s.restored, 2u);
  EXPECT_EQ(s.issued, 2u);
  EXPECT_DOUBLE_EQ(s.reclaimTarget, 0.5);
  RevocationBatch again;  // the sensor does not show them yet: the two pending are debited
  evictor.restoreReserve(cycle(t0 + 1s, 0.75), again);
  EXPECT_EQ(again.size(), 0u);
}

TEST_F(EvictorTest, AcrossReplicasEachRevokesItsPartOfThePoolDeficit) {
  options.maxRevocationsPerDecision = 8;
  options.restoreReserve.enabled = true;
  options.restoreReserve.leadTime = 1s;
  ceilings = {1.0, 0.25};
  lease(low, 11, 3, t0);
  protectedArrivals(demand, leases);
  // Four replicas; this one holds 3 leases, the others 9: s = 0.75 over 12 leases, a request is
  // 0.0625, the victim band (0.75 - 0.25) / 0.0625 = 8 requests over its ceiling; the others
  // have 2 revocations pending: 6 for the pool, 6 / 4 = 1 each plus one more for the two
  // replicas whose turn holds the remainder.
  ReplicaShare share;
  share.replicas = 4;
  share.others.leases = 9.0;
  share.others.pendingRevocations = 2.0;
  std::size_t total = 0;
  std::size_t twos = 0;
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    LeaseTable replicaLeases;
    detail::DemandTracker replicaDemand;
    Evictor replica;
    const std::uint32_t slot = replicaDemand.slotOf(&low, *policy, replicaLeases);
    for (RequestId id = 11; id < 14; ++id) {
      ASSERT_TRUE(replicaLeases.add(id, slot, low.prio, t0));
      replicaLeases.markDelivered(id);
    }
    protectedArrivals(replicaDemand, replicaLeases);
    share.rank = rank;
    detail::ReplicaCoordinator coordinator;
    (void)coordinator.install(share);
    RevocationBatch out;
    replica.restoreReserve(
        Evictor::Cycle{options, replicaLeases, replicaDemand, bands, ceilings, t0 + 1s, 0.75,
                       nullptr, &coordinator, &coordinator.published()},
        out);
    EXPECT_GE(out.size(), 1u) << "rank " << rank;
    EXPECT_LE(out.size(), 2u) << "rank " << rank;
    total += out.size();
    twos += out.size() == 2 ? 1 : 0;
    // What it publishes for the others: its own figures.
    EXPECT_EQ(coordinator.published().leases, 3.0);
    EXPECT_GT(coordinator.published().protectedArrivalRate, 100.0);
  }
  EXPECT_EQ(total, 6u);
  EXPECT_EQ(twos, 2u);
  // A share with a rank outside [0, replicas) counts as none: alone, 3 leases make a request
  // 0.25 and the victim band 2 requests over its ceiling.
  share.rank = 4;
  detail::ReplicaCoordinator outside;
  (void)outside.install(share);
  EXPECT_FALSE(outside.shared());
  Evictor::Cycle c = cycle(t0 + 1s, 0.75);
  c.replicas = &outside;
  RevocationBatch alone;
  evictor.restoreReserve(c, alone);
  EXPECT_EQ(alone.size(), 2u);
}

// The protected band's arrivals into the demand tracker, `perStep` every 100 ms for `steps` steps
// from `from`, following bursts with significance `z`; returns the time of the last step.
TimePoint steadyArrivals(detail::DemandTracker& d, LeaseTable& l, Band& band,
                         std::span<Band* const> bands, const UsageLimitPolicy& policy,
                         TimePoint from, int steps, int perStep, double z) {
  TimePoint at = from;
  for (int i = 0; i < steps; ++i) {
    at = from + i * 100ms;
    for (int k = 0; k < perStep; ++k) d.arrived(&band, policy, l);
    d.update(at, bands, bands, policy, l, z);
  }
  return at;
}

TEST_F(EvictorTest, TheBurstTriggerRestoresOnlyInAProtectedBurst) {
  options.maxRevocationsPerDecision = 8;
  options.restoreReserve.enabled = true;
  options.restoreReserve.leadTime = 1s;
  ceilings = {1.0, 0.25};
  lease(low, 11, 3, t0);
  // 100 req/s for 1500 s: the start from nothing is a burst until the base (an average over 60
  // decay times: 300 s with the default 5 s) has followed it; then a steady rate is none.
  TimePoint now = steadyArrivals(demand, leases, high, bands, *policy, t0, 15'000, 10, 3.0);
  ASSERT_FALSE(demand.cachedSlotOf(high)->estimator.inBurst());
  // As in RestorationIsPipelinedAndDebitsWhatIsPending, the victim band is 2 requests over its
  // ceiling, short of what 100 req/s need: restoration at any time revokes 2, the burst trigger
  // none while the rate is steady.
  options.restoreReserve.burstSignificance = 3.0;
  RevocationBatch steady;
  evictor.restoreReserve(cycle(now, 0.75), steady);
  EXPECT_EQ(steady.size(), 0u);
  options.restoreReserve.burstSignificance = 0.0;
  Evictor anyTime;
  RevocationBatch restored;
  anyTime.restoreReserve(cycle(now, 0.75), restored);
  EXPECT_EQ(restored.size(), 2u);
  // Ten times the rate: a burst, and the trigger restores.
  options.restoreReserve.burstSignificance = 3.0;
  now = steadyArrivals(demand, leases, high, bands, *policy, now + 100ms, 5, 100, 3.0);
  ASSERT_TRUE(demand.cachedSlotOf(high)->estimator.inBurst());
  RevocationBatch burst;
  evictor.restoreReserve(cycle(now, 0.75), burst);
  EXPECT_GE(burst.size(), 1u);
  EXPECT_EQ(evictor.stats().restored, burst.size());
}

TEST_F(EvictorTest, WithTheBurstTriggerTheHeadOfLineTriggerActsForTheTopBandOnly) {
  Band mid{0, 0, 0, nullptr, nullptr};
  bands = {&high, &mid, &low};
  ceilings = {0.8, 0.5, 0.25};
  lease(low, 11, 3, t0);
  mid.queued_requests = 1;  // the middle band blocked at its ceiling
  options.restoreReserve.enabled = true;
  options.restoreReserve.burstSignificance = 3.0;
  RevocationBatch middle;
  evictor.reclaim(cycle(t0 + 1s, 0.9), 1, middle);
  EXPECT_EQ(middle.size(), 0u);
  high.queued_requests = 1;  // the top band blocked: revokes
  RevocationBatch top;
  evictor.reclaim(cycle(t0 + 1s, 0.9), 0, top);
  EXPECT_GE(top.size(), 1u);
  // Without the trigger the middle band's block revokes too.
  options.restoreReserve.burstSignificance = 0.0;
  high.queued_requests = 0;
  Evictor plain;
  RevocationBatch without;
  plain.reclaim(cycle(t0 + 1s, 0.9), 1, without);
  EXPECT_GE(without.size(), 1u);
}

TEST_F(EvictorTest, NothingIsRestoredWhenNoBandIsProtected) {
  options.restoreReserve.enabled = true;
  options.restoreReserve.leadTime = 1s;
  bands = {&low};  // every band of the domain sheddable
  ceilings = {0.25};
  lease(low, 11, 4, t0);
  RevocationBatch out;
  evictor.restoreReserve(cycle(t0, 0.9), out);
  EXPECT_EQ(out.size(), 0u);
}

TEST(EvictorDeliveryTest, DeliversEveryRevocationInOrderPastAThrowingCallback) {
  RevocationBatch batch;
  batch.add().id = 1;
  batch.add().id = 2;
  std::vector<RequestId> seen;
  detail::deliverRevocations(batch, [&](const Revocation& r) {
    seen.push_back(r.id);
#if defined(__cpp_exceptions)
    if (r.id == 1) throw std::runtime_error("host failure");
#endif
  });
  EXPECT_EQ(seen, (std::vector<RequestId>{1, 2}));
}

}  // namespace
}  // namespace holdback
