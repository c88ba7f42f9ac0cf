// Restoration per endpoint (detail::Evictor with the room per endpoint its Cycle's sampler
// keeps): victims come from the endpoint where a protected request waits or would fit after one
// revocation; leases without a known endpoint, an endpoint id the pool does not have and an
// endpoint removed since keep the pool-wide choice; Ticket::setEndpoint's answers.
// detail/ headers are not self-contained in header-only mode: enter through the public header.
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/evictor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/pool_pressure.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using detail::Band;
using detail::Evictor;
using detail::LeaseTable;
using detail::RevocationBatch;

// Each endpoint has 8 slots and 4000 KV tokens (hybrid concurrency: room = capacity less the
// in-flight counts the test sets).
std::vector<Endpoint> endpointsWithKvUsed(const std::vector<std::int64_t>& used) {
  std::vector<Endpoint> out = VectorEndpointSource::named(used.size());
  for (std::size_t i = 0; i < used.size(); ++i) {
    out[i].inFlightRequests = 2;
    out[i].inFlightTokens = used[i];
  }
  return out;
}

class EvictorEndpointsTest : public ::testing::Test {
 protected:
  EvictorEndpointsTest() {
    options.filter = std::make_shared<SheddableEvictionFilter>();
    options.order = std::make_shared<PriorityThenTimeEvictionOrder>();
    options.confirmationGrace = 100ms;
    options.confirmationTimeout = 5s;
    options.maxRevocationsPerDecision = 8;
    options.restoreReserve.enabled = true;
    options.restoreReserve.leadTime = 1s;
    sampler.keepEndpointRoom(true);
  }
  // A delivered lease of `band` on `endpoint` (kNoEndpoint: none reported) holding `kv` tokens.
  void lease(Band& band, RequestId id, std::uint32_t endpoint, std::uint64_t kv, TimePoint at) {
    const std::uint32_t slot = demand.slotOf(&band, *policy, leases);
    ASSERT_TRUE(leases.add(id, slot, band.prio, at, 0, kv));
    leases.markDelivered(id);
    if (endpoint != LeaseTable::kNoEndpoint) {
      ASSERT_TRUE(leases.setEndpoint(id, endpoint));
    }
    evictor.leaseStarted(band.prio, options);
  }
  // The protected band: 1000 arrivals over a second, each declaring 1000 KV tokens.
  void protectedDemand() {
    for (int i = 0; i < 1000; ++i) demand.arrived(&high, *policy, leases, 1000);
    demand.update(t0, bands, bands, *policy, leases);
    demand.update(t0 + 1s, bands, bands, *policy, leases);
  }
  // Six low leases of 800 tokens, two per endpoint, the newest on endpoint 2; two protected
  // leases on endpoint 0. s = 1.0 over 8 leases (a request is 0.125) with the victim band's
  // ceiling 0.75: two requests over it, so restoration revokes two.
  void sixLowTwoHigh(bool endpoints) {
    const auto at = [&](std::uint32_t e) { return endpoints ? e : LeaseTable::kNoEndpoint; };
    lease(low, 11, at(0), 800, t0);
    lease(low, 12, at(0), 800, t0 + 1ms);
    lease(low, 13, at(1), 800, t0 + 2ms);
    lease(low, 14, at(1), 800, t0 + 3ms);
    lease(low, 15, at(2), 800, t0 + 4ms);
    lease(low, 16, at(2), 800, t0 + 5ms);
    lease(high, 21, at(0), 1000, t0 + 6ms);
    lease(high, 22, at(0), 1000, t0 + 7ms);
    protectedDemand();
  }
  std::vector<RequestId> restore(const PoolPressureSampler* from) {
    RevocationBatch out;
    evictor.restoreReserve({options, leases, demand, bands, ceilings, t0 + 1s, 1.0, from}, out);
    std::vector<RequestId> ids;
    for (std::size_t i = 0; i < out.size(); ++i) ids.push_back(out.at(i).id);
    return ids;
  }

  std::shared_ptr<UsageLimitPolicy> policy = testing::staticPolicy();
  // Room per endpoint: KV 4000 less what is in flight; endpoint 0 has 100 tokens free, 1 has
  // 300, 2 has 3000 (a protected request of 1000 fits there already).
  std::shared_ptr<VectorEndpointSource> source =
      std::make_shared<VectorEndpointSource>(endpointsWithKvUsed({3900, 3700, 1000}));
  std::shared_ptr<ConcurrencyDetector> detector =
      std::move(
          ConcurrencyDetector::create(
              {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 8, .maxTokenConcurrency = 4000}))
          .value();
  PoolPressureSampler sampler{source, detector};
  EvictionOptions options;
  LeaseTable leases;
  detail::DemandTracker demand;
  Evictor evictor;
  Band high{10, 0, 0, nullptr, nullptr};
  Band low{-1, 0, 0, nullptr, nullptr};
  std::vector<Band*> bands{&high, &low};
  std::vector<double> ceilings{1.0, 0.75};
  TimePoint t0 = TimePoint{} + std::chrono::hours(1);
};

TEST_F(EvictorEndpointsTest, PoolWideChoiceIsTheNewestLeases) {
  sixLowTwoHigh(/*endpoints=*/false);
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // No endpoint known: the order policy's newest two, both on endpoint 2.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{16, 15}));
}

TEST_F(EvictorEndpointsTest, VictimsComeFromWhereOneRevocationMakesTheProtectedRequestFit) {
  sixLowTwoHigh(/*endpoints=*/true);
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // A protected request needs 1000 tokens. Endpoint 0: 100 free + 800 from one revocation is not
  // enough; endpoint 1: 300 + 800 fits after one; endpoint 2 fits already. The first victim is
  // endpoint 1's newest; then endpoint 1 fits too, and the newest among the endpoints that fit
  // goes next (endpoint 2's), before endpoint 0's, where one revocation does not make it fit.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{14, 16}));
}

TEST_F(EvictorEndpointsTest, TheEndpointWhereAProtectedRequestWaitsComesFirst) {
  source->set(endpointsWithKvUsed({3700, 3700, 1000}));  // endpoints 0 and 1: 300 free each
  sixLowTwoHigh(/*endpoints=*/true);
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // Both fit after one revocation; endpoint 0 holds the protected lease: its newest goes first,
  // then endpoint 1's newest.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{12, 14}));
}

TEST_F(EvictorEndpointsTest, WithoutRoomPerEndpointTheChoiceIsPoolWide) {
  sixLowTwoHigh(/*endpoints=*/true);
  // No sampler in the cycle, or one that kept no room (no sample yet): the pool-wide choice.
  EXPECT_EQ(restore(nullptr), (std::vector<RequestId>{16, 15}));
}

TEST_F(EvictorEndpointsTest, NoSampleYetKeepsThePoolWideChoice) {
  sixLowTwoHigh(/*endpoints=*/true);
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{16, 15}));
}

TEST_F(EvictorEndpointsTest, AnEndpointIdThePoolDoesNotHaveCountsAsUnknown) {
  lease(low, 11, 7, 800, t0);  // endpoint 7 of a pool of 3
  lease(low, 12, 99, 800, t0 + 1ms);
  lease(low, 13, 1, 800, t0 + 2ms);
  lease(low, 14, 42, 800, t0 + 3ms);
  lease(low, 15, 7, 800, t0 + 4ms);
  lease(low, 16, 5, 800, t0 + 5ms);
  lease(high, 21, 0, 1000, t0 + 6ms);
  lease(high, 22, 0, 1000, t0 + 7ms);
  protectedDemand();
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // Only 13 is known (endpoint 1, fits after one): it goes first; then the newest unknown.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{13, 16}));
}

TEST_F(EvictorEndpointsTest, AnEndpointRemovedSinceCountsAsUnknown) {
  sixLowTwoHigh(/*endpoints=*/true);
  // The pool shrinks to endpoints 0 and 2 of before; the host reported positions in the old
  // list: position 2 no longer exists, position 1 is now the former endpoint 2 (3000 free).
  source->set(endpointsWithKvUsed({3900, 1000}));
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // Endpoint 1 (13, 14) fits already; 0 (11, 12) not even after one; 15 and 16 are unknown:
  // fitting-already ranks above unknown, so 14 and 13 go first.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{14, 13}));
}

TEST_F(EvictorEndpointsTest, RevokesOnceWhereAProtectedRequestWaits) {
  std::vector<Endpoint> endpoints = endpointsWithKvUsed({3900, 3700, 1000});
  endpoints[1].waitingQueueSize = 1.0;  // a request waits on endpoint 1
  source->set(endpoints);
  sixLowTwoHigh(/*endpoints=*/true);
  lease(high, 23, 1, 1000, t0 + 8ms);  // a protected lease there
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // One revocation on endpoint 1 (its newest, which makes a protected request fit: 300 + 800),
  // none on endpoint 0 (protected leases, nothing waiting) before the pool-wide deficit.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{14}));
  // Outstanding there now: the next decision does not revoke on endpoint 1 again for it.
  const std::vector<RequestId> next = restore(&sampler);
  EXPECT_EQ(std::count(next.begin(), next.end(), 13), 0);
}

TEST_F(EvictorEndpointsTest, AProtectedLeaseThatStartedIsNotTheOneWaiting) {
  std::vector<Endpoint> endpoints = endpointsWithKvUsed({3900, 3700, 1000});
  endpoints[1].waitingQueueSize = 1.0;  // a request waits on endpoint 1
  source->set(endpoints);
  sixLowTwoHigh(/*endpoints=*/true);
  lease(high, 23, 1, 1000, t0 + 8ms);  // a protected lease there, which the host saw start
  ASSERT_TRUE(leases.markStarted(23));
  EXPECT_FALSE(leases.markStarted(999));  // unknown
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  // What waits there is not it: not the one revocation on endpoint 1 a waiting protected
  // request gets (14 alone), but the pool-wide deficit's two, as without the lease.
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{14, 16}));
}

TEST_F(EvictorEndpointsTest, AWaitingEndpointWithoutProtectedLeaseTriggersNothing) {
  std::vector<Endpoint> endpoints = endpointsWithKvUsed({3900, 3700, 1000});
  endpoints[2].waitingQueueSize = 3.0;
  source->set(endpoints);
  sixLowTwoHigh(/*endpoints=*/true);
  ASSERT_TRUE(sampler.sample(t0 + 1s).has_value());
  EXPECT_EQ(restore(&sampler), (std::vector<RequestId>{14, 16}));  // as without the wait
}

TEST_F(EvictorEndpointsTest, SamplerKeepsRoomOnlyWhileAsked) {
  std::vector<EndpointRoom> room;
  std::vector<std::uint8_t> waits;
  ASSERT_TRUE(sampler.sample(t0).has_value());
  ASSERT_TRUE(sampler.copyEndpointRoom(room, waits));
  ASSERT_EQ(room.size(), 3u);
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_DOUBLE_EQ(room[0].kvTokens, 100.0);
  EXPECT_DOUBLE_EQ(room[2].slots, 6.0);
  EXPECT_FALSE(sampler.endpointWaits());
  sampler.keepEndpointRoom(false);
  ASSERT_TRUE(sampler.sample(t0).has_value());
  EXPECT_TRUE(sampler.copyEndpointRoom(room, waits));  // the last kept one stays
  sampler.keepEndpointRoom(true);
  source->set({});
  ASSERT_TRUE(sampler.sample(t0).has_value());
  EXPECT_FALSE(sampler.copyEndpointRoom(room, waits));  // an empty pool keeps nothing
  EXPECT_TRUE(room.empty());
  EXPECT_TRUE(waits.empty());
}

TEST_F(EvictorEndpointsTest, UncountedKvIsCapacityLessInFlightAndOvercommitWaits) {
  // A detector counting requests only (KV +infinity): the kept KV room comes from the
  // endpoint's capacity and the gateway's in-flight tokens; more in flight than fits waits.
  std::vector<Endpoint> endpoints = endpointsWithKvUsed({3000, 5000});
  for (Endpoint& e : endpoints) e.kvCapacityTokens = 4000;
  auto source2 = std::make_shared<VectorEndpointSource>(endpoints);
  auto requests = std::move(ConcurrencyDetector::create({.maxConcurrency = 8})).value();
  PoolPressureSampler requestsOnly{source2, std::move(requests)};
  requestsOnly.keepEndpointRoom(true);
  ASSERT_TRUE(requestsOnly.sample(t0).has_value());
  std::vector<EndpointRoom> room;
  std::vector<std::uint8_t> waits;
  ASSERT_TRUE(requestsOnly.copyEndpointRoom(room, waits));
  EXPECT_DOUBLE_EQ(room[0].kvTokens, 1000.0);
  EXPECT_DOUBLE_EQ(room[1].kvTokens, 0.0);
  EXPECT_EQ(waits, (std::vector<std::uint8_t>{0, 1}));
  EXPECT_TRUE(requestsOnly.endpointWaits());
}

class SetLeaseEndpointTest : public testing::FlowControllerTest {
 protected:
  // A controller with eviction on and one request of flow "f" (100 KV tokens) enqueued at t0.
  std::unique_ptr<FlowController> withOneRequest(Ticket& ticket) {
    FlowControllerOptions o = options();
    o.eviction.enabled = true;
    o.eviction.evict = [](const Revocation&) {};
    auto fc = make(std::move(o));
    if (fc == nullptr) return nullptr;  // make() has reported it
    FlowRequest r;
    r.flowId = "f";
    r.kvTokens = 100;
    ticket = fc->enqueue(std::move(r), t0);
    return fc;
  }
};

TEST_F(SetLeaseEndpointTest, KnownLeasesOnlyAndAnyPosition) {
  Ticket t;
  auto fc = withOneRequest(t);
  ASSERT_NE(fc, nullptr);
  ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  EXPECT_TRUE(t.setEndpoint(1));
  // Any position is recorded; one the pool does not have counts as unknown when restoring.
  EXPECT_TRUE(t.setEndpoint(1'000'000));
  EXPECT_TRUE(t.setEndpoint(static_cast<std::size_t>(-1)));
  EXPECT_FALSE(fc->ticket(t.id() + 1000).setEndpoint(0));  // no lease
  ASSERT_TRUE(t.release(t0 + 1s));
  EXPECT_FALSE(t.setEndpoint(0));  // released
}

TEST_F(SetLeaseEndpointTest, MarkLeaseStartedKnownLeasesOnly) {
  Ticket t;
  auto fc = withOneRequest(t);
  ASSERT_NE(fc, nullptr);
  EXPECT_FALSE(t.markStarted());  // queued: no lease yet
  ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  EXPECT_TRUE(t.markStarted());
  EXPECT_TRUE(t.markStarted());  // again: still held
  ASSERT_TRUE(fc->release(t.id(), t0 + 1s));
  EXPECT_FALSE(t.markStarted());  // released
}

// The ticket's lease annotations answer false, and do nothing, on an empty ticket and once the
// controller is gone; a ticket made from the id (FlowController::ticket) is the same request's.
TEST_F(SetLeaseEndpointTest, TicketAnnotationsWithoutALeaseOrAController) {
  Ticket t;
  auto fc = withOneRequest(t);
  ASSERT_NE(fc, nullptr);
  ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  Ticket empty;
  EXPECT_FALSE(empty.updateLease(1, 1));
  EXPECT_FALSE(empty.setEndpoint(0));
  EXPECT_FALSE(empty.markStarted());
  Ticket same = fc->ticket(t.id());
  EXPECT_EQ(same.id(), t.id());
  EXPECT_TRUE(same.updateLease(100, 5));
  EXPECT_TRUE(same.setEndpoint(0));
  EXPECT_TRUE(same.markStarted());
  EXPECT_TRUE(same.release(t0 + 1s));
  EXPECT_FALSE(t.updateLease(100, 5));  // released through the other ticket
  EXPECT_FALSE(t.release(t0 + 2s));
  Ticket orphan = fc->ticket(t.id());
  fc.reset();
  EXPECT_FALSE(orphan.updateLease(100, 5));
  EXPECT_FALSE(orphan.setEndpoint(0));
  EXPECT_FALSE(orphan.markStarted());
}

// The deprecated id-based methods still forward (CHANGELOG.md): the same answers as the ticket's.
TEST_F(SetLeaseEndpointTest, DeprecatedIdMethodsForwardToTheLease) {
  Ticket t;
  auto fc = withOneRequest(t);
  ASSERT_NE(fc, nullptr);
  EXPECT_FALSE(fc->updateLease(t.id(), 100, 5));  // queued: no lease yet
  EXPECT_FALSE(fc->setLeaseEndpoint(t.id(), 0));
  EXPECT_FALSE(fc->markLeaseStarted(t.id()));
  ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  EXPECT_TRUE(fc->updateLease(t.id(), 100, 5));
  EXPECT_TRUE(fc->setLeaseEndpoint(t.id(), 0));
  EXPECT_TRUE(fc->markLeaseStarted(t.id()));
  fc->recordPeerArrival(0, 10);
  fc->setReplicaShare(std::nullopt);
  EXPECT_EQ(fc->replicaRestoreFigures().headsUsed(), 0u);  // nothing queued
  ASSERT_TRUE(fc->release(t.id(), t0 + 1s));
  EXPECT_FALSE(fc->updateLease(t.id(), 100, 5));
}

}  // namespace
}  // namespace holdback
