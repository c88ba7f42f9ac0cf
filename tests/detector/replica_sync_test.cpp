// Replica sync: DispatchLedger::localPending / setPeerPending and ReplicaSyncer over an in-memory
// store: the other replicas' pending work replaces the `replicas` share in fill, a failed
// exchange falls back to the share (times the replicas last seen), a dead replica's share goes,
// and a sync round allocates nothing.
#include "holdback/detector/replica_sync.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "alloc_counter.hpp"

namespace holdback {
namespace {

const TimePoint kSyncNow = TimePoint{} + std::chrono::hours(3);

Scrape syncScrape(double waiting, double running) {
  return {.updateTime = kSyncNow, .waitingQueueSize = waiting, .runningRequests = running};
}

Endpoint syncFilled(const DispatchLedger& ledger, EndpointId id) {
  std::vector<Endpoint> e(1);
  e[0].name = "x";
  const EndpointId ids[] = {id};
  ledger.fill(e, ids);
  return e[0];
}

// An in-memory store shared by the replicas of one test: replica r's last publication, and
// whether it is still live (a dead replica's key has expired).
struct MemoryStore {
  std::vector<std::vector<InFlightLoad>> published;
  std::vector<bool> live;
  bool down = false;
};

class MemoryReplicaSync final : public ReplicaSync {
 public:
  MemoryReplicaSync(MemoryStore& store, std::size_t self) : store_(store), self_(self) {}
  std::int64_t exchange(std::span<const InFlightLoad> mine,
                        std::span<InFlightLoad> othersSum) noexcept override {
    if (store_.down) return -1;
    std::copy(mine.begin(), mine.end(), store_.published[self_].begin());
    std::int64_t others = 0;
    for (std::size_t r = 0; r < store_.published.size(); ++r) {
      if (r == self_ || !store_.live[r]) continue;
      ++others;
      for (std::size_t k = 0; k < othersSum.size(); ++k) {
        othersSum[k].requests += store_.published[r][k].requests;
        othersSum[k].tokens += store_.published[r][k].tokens;
      }
    }
    return others;
  }

 private:
  MemoryStore& store_;
  std::size_t self_;
};

DispatchLedgerOptions syncOptions(std::int64_t replicas) {
  DispatchLedgerOptions o;
  o.replicas = replicas;
  o.reconcileInFlight = false;
  return o;
}

TEST(ReplicaSyncTest, LocalPendingCountsDispatchesSinceTheBaseline) {
  DispatchLedger ledger(syncOptions(1));
  const EndpointId id = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 4});
  EXPECT_EQ(ledger.localPending(id).requests, 0);  // no scrape yet
  ASSERT_TRUE(ledger.recordDispatch(id, 10));
  ASSERT_TRUE(ledger.installScrape(id, syncScrape(0, 1), ledger.mark(id)));
  ASSERT_TRUE(ledger.recordDispatch(id, 7));
  ASSERT_TRUE(ledger.recordDispatch(id, 5));
  EXPECT_EQ(ledger.localPending(id).requests, 2);
  EXPECT_EQ(ledger.localPending(id).tokens, 12);
  ASSERT_TRUE(ledger.recordCompletion(id, 5));
  ASSERT_TRUE(ledger.recordCompletion(id, 10));
  ASSERT_TRUE(ledger.recordCompletion(id, 7));
  EXPECT_EQ(ledger.localPending(id).requests, 0);  // floored, never negative
  EXPECT_EQ(ledger.localPending(EndpointId{}).requests, 0);
  EXPECT_FALSE(ledger.setPeerPending(EndpointId{}, InFlightLoad{1, 1}));
}

TEST(ReplicaSyncTest, PeersReplaceTheReplicaShareAndFailureFallsBack) {
  // Three replicas configured; this one dispatched 1 since the scrape, the others 4 in all.
  DispatchLedger ledger(syncOptions(3));
  const EndpointId id = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 4});
  ASSERT_TRUE(ledger.installScrape(id, syncScrape(0, 0), ledger.mark(id)));
  ASSERT_TRUE(ledger.recordDispatch(id));
  Endpoint e = syncFilled(ledger, id);
  EXPECT_DOUBLE_EQ(e.runningRequests, 3.0);  // the share: 1 x 3
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 0.0);

  ASSERT_TRUE(ledger.setPeerPending(id, InFlightLoad{4, 0}, 3));
  e = syncFilled(ledger, id);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);  // 1 + 4 = 5 on 4 slots
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 1.0);

  // The store went away, with five replicas last seen: the share, times 5 (more than the 3
  // configured).
  ASSERT_TRUE(ledger.setPeerPending(id, std::nullopt, 5));
  e = syncFilled(ledger, id);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 1.0);  // 1 x 5 on 4 slots
  ASSERT_TRUE(ledger.setPeerPending(id, std::nullopt, 0));
  EXPECT_DOUBLE_EQ(syncFilled(ledger, id).runningRequests, 3.0);  // back to the configured 3
}

TEST(ReplicaSyncTest, SyncerSharesPendingWorkAndADeadReplicaDropsOut) {
  constexpr std::size_t kReplicas = 3;
  MemoryStore store;
  store.published.assign(kReplicas, std::vector<InFlightLoad>(1));
  store.live.assign(kReplicas, true);
  std::vector<std::unique_ptr<DispatchLedger>> ledgers;
  std::vector<std::unique_ptr<MemoryReplicaSync>> syncs;
  std::vector<std::unique_ptr<ReplicaSyncer>> syncers;
  std::vector<EndpointId> ids;
  for (std::size_t r = 0; r < kReplicas; ++r) {
    ledgers.push_back(std::make_unique<DispatchLedger>(syncOptions(1)));
    ids.push_back(ledgers[r]->registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 8}));
    ASSERT_TRUE(ledgers[r]->installScrape(ids[r], syncScrape(0, 0), ledgers[r]->mark(ids[r])));
    syncs.push_back(std::make_unique<MemoryReplicaSync>(store, r));
    syncers.push_back(
        std::make_unique<ReplicaSyncer>(*ledgers[r], *syncs[r], std::vector<EndpointId>{ids[r]}));
  }
  // Uneven arrivals: replica 0 sends 6, replica 1 sends 3, replica 2 none.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(ledgers[0]->recordDispatch(ids[0], 100));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ledgers[1]->recordDispatch(ids[1], 100));
  for (auto& s : syncers) ASSERT_TRUE(s->syncOnce());
  for (auto& s : syncers) ASSERT_TRUE(s->syncOnce());  // everyone has read everyone's latest
  // The quiet replicas count what was really sent (9 on 8 slots), where the share would count 0
  // (replica 2) and 9 (replica 1: 3 x 3); the busy one never less than its share (6 x 3 = 18).
  for (std::size_t r = 1; r < kReplicas; ++r) {
    const Endpoint e = syncFilled(*ledgers[r], ids[r]);
    EXPECT_DOUBLE_EQ(e.runningRequests + e.waitingQueueSize, 9.0) << "replica " << r;
    EXPECT_DOUBLE_EQ(e.waitingQueueSize, 1.0) << "replica " << r;
    EXPECT_EQ(syncers[r]->replicasSeen(), 3);
  }
  const Endpoint busy = syncFilled(*ledgers[0], ids[0]);
  EXPECT_DOUBLE_EQ(busy.runningRequests + busy.waitingQueueSize, 18.0);
  // Replica 0 dies (its key expires): the others stop counting its 6.
  store.live[0] = false;
  for (std::size_t r = 1; r < kReplicas; ++r) ASSERT_TRUE(syncers[r]->syncOnce());
  EXPECT_DOUBLE_EQ(syncFilled(*ledgers[2], ids[2]).runningRequests, 3.0);
  EXPECT_EQ(syncers[2]->replicasSeen(), 2);
  // The store goes down: a failed round, and the share (1 replica configured, 2 last seen).
  store.down = true;
  EXPECT_FALSE(syncers[1]->syncOnce());
  EXPECT_EQ(syncers[1]->failures(), 1U);
  EXPECT_DOUBLE_EQ(syncFilled(*ledgers[1], ids[1]).runningRequests, 6.0);  // 3 x 2
}

TEST(ReplicaSyncTest, SyncRoundAndFillDoNotAllocate) {
  MemoryStore store;
  store.published.assign(2, std::vector<InFlightLoad>(1));
  store.live.assign(2, true);
  DispatchLedger ledger(syncOptions(2));
  const EndpointId id = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 8});
  ASSERT_TRUE(ledger.installScrape(id, syncScrape(0, 0), ledger.mark(id)));
  MemoryReplicaSync sync(store, 0);
  ReplicaSyncer syncer(ledger, sync, {id});
  std::vector<Endpoint> e(1);
  const EndpointId ids[] = {id};
  testing::AllocationCounter counter;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(ledger.recordDispatch(id, 1));
    ASSERT_TRUE(syncer.syncOnce());
    ledger.fill(e, ids);
  }
  EXPECT_EQ(counter.count(), 0U);
}

}  // namespace
}  // namespace holdback
