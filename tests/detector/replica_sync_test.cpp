// Replica sync: DispatchLedger::localPending / setPeerPending and ReplicaSyncer over an in-memory
// store: the other replicas' pending work replaces the `replicas` share in fill, a failed
// exchange falls back to the share (times the replicas last seen), a dead replica's share goes,
// a sync round allocates nothing, and with ranked replicas the free room a scrape shows is split
// among them (their dispatches after it never exceed it).
#include "holdback/detector/replica_sync.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
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
  std::vector<ReplicaRestoreFigures> figures;
  std::vector<bool> live;
  bool down = false;
  bool ranked = false;  // rank(): replica r is rank r
};

class MemoryReplicaSync final : public ReplicaSync {
 public:
  MemoryReplicaSync(MemoryStore& store, std::size_t self) : store_(store), self_(self) {}
  std::int64_t exchange(std::span<const InFlightLoad> mine, std::span<InFlightLoad> othersSum,
                        const ReplicaRestoreFigures& mineFigures,
                        ReplicaRestoreFigures& othersFigures) noexcept override {
    if (store_.down) return -1;
    std::copy(mine.begin(), mine.end(), store_.published[self_].begin());
    store_.figures[self_] = mineFigures;
    std::int64_t others = 0;
    for (std::size_t r = 0; r < store_.published.size(); ++r) {
      if (r == self_ || !store_.live[r]) continue;
      ++others;
      for (std::size_t k = 0; k < othersSum.size(); ++k) {
        othersSum[k].requests += store_.published[r][k].requests;
        othersSum[k].tokens += store_.published[r][k].tokens;
      }
      othersFigures += store_.figures[r];
    }
    return others;
  }
  [[nodiscard]] std::int64_t rank() const noexcept override {
    return store_.ranked ? static_cast<std::int64_t>(self_) : -1;
  }
  [[nodiscard]] Duration clockOffset() const noexcept override { return offset; }
  Duration offset{0};  // the shared clock less this replica's host clock

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
  store.figures.assign(kReplicas, ReplicaRestoreFigures{});
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
  // Every replica counts what was really sent (9 on 8 slots), where the share would count 0
  // (replica 2), 9 (replica 1: 3 x 3) and 18 (replica 0: 6 x 3).
  for (std::size_t r = 0; r < kReplicas; ++r) {
    const Endpoint e = syncFilled(*ledgers[r], ids[r]);
    EXPECT_DOUBLE_EQ(e.runningRequests + e.waitingQueueSize, 9.0) << "replica " << r;
    EXPECT_DOUBLE_EQ(e.waitingQueueSize, 1.0) << "replica " << r;
    EXPECT_EQ(syncers[r]->replicasSeen(), 3);
  }
  // A dispatch after the sync stands for one by each other replica too (not in their figures
  // yet): 9 + 1 + 2.
  ASSERT_TRUE(ledgers[0]->recordDispatch(ids[0], 100));
  const Endpoint busy = syncFilled(*ledgers[0], ids[0]);
  EXPECT_DOUBLE_EQ(busy.runningRequests + busy.waitingQueueSize, 12.0);
  EXPECT_DOUBLE_EQ(busy.kvCacheUsage, 0.0);  // no KV capacity registered: tokens not counted
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

TEST(ReplicaSyncTest, SyncerSharesRestorationFiguresOnlyWithARank) {
  MemoryStore store;
  store.published.assign(3, std::vector<InFlightLoad>(1));
  store.live.assign(3, true);
  store.figures.assign(3, ReplicaRestoreFigures{});
  std::vector<std::unique_ptr<DispatchLedger>> ledgers;
  std::vector<std::unique_ptr<MemoryReplicaSync>> syncs;
  std::vector<std::unique_ptr<ReplicaSyncer>> syncers;
  for (std::size_t r = 0; r < 3; ++r) {
    ledgers.push_back(std::make_unique<DispatchLedger>(syncOptions(1)));
    const EndpointId id = ledgers[r]->registerEndpoint("a", EndpointCapacity{});
    syncs.push_back(std::make_unique<MemoryReplicaSync>(store, r));
    syncers.push_back(
        std::make_unique<ReplicaSyncer>(*ledgers[r], *syncs[r], std::vector<EndpointId>{id}));
  }
  const auto figures = [](double x) { return ReplicaRestoreFigures{x, 2 * x, 3 * x, 4 * x}; };
  // Without a rank the replicas cannot split a decision: no share.
  for (std::size_t r = 0; r < 3; ++r) ASSERT_TRUE(syncers[r]->syncOnce(figures(double(r + 1))));
  EXPECT_FALSE(syncers[0]->share().has_value());
  store.ranked = true;
  for (std::size_t r = 0; r < 3; ++r) ASSERT_TRUE(syncers[r]->syncOnce(figures(double(r + 1))));
  const std::optional<ReplicaShare> share = syncers[1]->share();
  ASSERT_TRUE(share.has_value());
  EXPECT_EQ(share->replicas, 3);
  EXPECT_EQ(share->rank, 1);
  // The others' figures summed: replicas 0 and 2 published 1 and 3.
  EXPECT_DOUBLE_EQ(share->others.protectedArrivalRate, 4.0);
  EXPECT_DOUBLE_EQ(share->others.completionRate, 8.0);
  EXPECT_DOUBLE_EQ(share->others.pendingRevocations, 12.0);
  EXPECT_DOUBLE_EQ(share->others.leases, 16.0);
  // A failed exchange: no share (the replica restores alone).
  store.down = true;
  EXPECT_FALSE(syncers[1]->syncOnce(figures(2.0)));
  EXPECT_FALSE(syncers[1]->share().has_value());
}

// The victim lists: each replica's youngest victims' dispatch times, youngest first; summing two
// figures merges them, keeping the kVictims youngest, whatever a peer published.
TEST(ReplicaSyncTest, VictimListsMergeKeepingTheYoungestInOrder) {
  constexpr std::size_t kMax = ReplicaRestoreFigures::kVictims;
  ReplicaRestoreFigures a;
  for (const double at : {97.0, 99.0, 98.0}) a.addVictim(at);
  ASSERT_EQ(a.victimCount, 3u);
  EXPECT_EQ(a.victimDispatchTimes[0], 99.0);
  EXPECT_EQ(a.victimDispatchTimes[1], 98.0);
  EXPECT_EQ(a.victimDispatchTimes[2], 97.0);
  ReplicaRestoreFigures b;
  b.victimLists = 1.0;
  for (std::size_t k = 0; k < kMax + 4; ++k) b.addVictim(90.0 - static_cast<double>(k));
  ASSERT_EQ(b.victimCount, kMax);  // the kMax youngest: 90 down to 90 - (kMax - 1)
  EXPECT_EQ(b.victimDispatchTimes[kMax - 1], 90.0 - static_cast<double>(kMax - 1));
  b.addVictim(99.5);  // younger than all: the oldest drops out
  EXPECT_EQ(b.victimDispatchTimes[0], 99.5);
  EXPECT_EQ(b.victimDispatchTimes[kMax - 1], 90.0 - static_cast<double>(kMax - 2));
  b.addVictim(-1e9);  // older than all of a full list: not kept
  EXPECT_EQ(b.victimDispatchTimes[kMax - 1], 90.0 - static_cast<double>(kMax - 2));

  ReplicaRestoreFigures sum;
  sum += a;
  sum += b;
  EXPECT_EQ(sum.victimLists, 1.0);
  ASSERT_EQ(sum.victimCount, kMax);
  const std::vector<double> first(sum.victimDispatchTimes.begin(),
                                  sum.victimDispatchTimes.begin() + 5);
  EXPECT_EQ(first, (std::vector<double>{99.5, 99.0, 98.0, 97.0, 90.0}));
  EXPECT_TRUE(std::is_sorted(sum.victimDispatchTimes.rbegin(), sum.victimDispatchTimes.rend()));

  // Hostile publications: a NaN or infinite time counts as the oldest possible; a count beyond
  // the list as the whole list.
  ReplicaRestoreFigures bad;
  bad.victimCount = 1000;
  bad.victimDispatchTimes.fill(std::numeric_limits<double>::quiet_NaN());
  bad.victimDispatchTimes[1] = std::numeric_limits<double>::infinity();
  ReplicaRestoreFigures merged = a;
  merged += bad;
  ASSERT_EQ(merged.victimCount, kMax);
  EXPECT_EQ(merged.victimDispatchTimes[0], 99.0);  // a's come first: the others are "oldest"
  EXPECT_EQ(merged.victimDispatchTimes[2], 97.0);
  for (std::size_t k = 0; k < merged.victimCount; ++k) {
    EXPECT_TRUE(std::isfinite(merged.victimDispatchTimes[k])) << k;
  }
  ReplicaRestoreFigures c;
  c.addVictim(std::numeric_limits<double>::quiet_NaN());
  ASSERT_EQ(c.victimCount, 1u);
  EXPECT_TRUE(std::isfinite(c.victimDispatchTimes[0]));
}

TEST(ReplicaSyncTest, QueueHeadsMergeKeepingTheOldestPerBand) {
  ReplicaRestoreFigures a;
  a.addHead(-1, 50.0);
  a.addHead(100, 70.0);
  a.addHead(-1, 60.0);  // the same band again: the older head stays
  ASSERT_EQ(a.headsUsed(), 2u);
  EXPECT_EQ(a.headOf(-1), std::optional<double>(50.0));
  ReplicaRestoreFigures b;
  b.addHead(-1, 40.0);
  b.addHead(0, 45.0);
  ReplicaRestoreFigures sum;
  sum += a;
  sum += b;
  EXPECT_EQ(sum.headsUsed(), 3u);
  EXPECT_EQ(sum.headOf(-1), std::optional<double>(40.0));  // b's, older
  EXPECT_EQ(sum.headOf(0), std::optional<double>(45.0));
  EXPECT_EQ(sum.headOf(100), std::optional<double>(70.0));
  EXPECT_FALSE(sum.headOf(7).has_value());
  // Full: a higher priority displaces the lowest; a lower one is not kept.
  ReplicaRestoreFigures full;
  for (int p = 0; p < static_cast<int>(ReplicaRestoreFigures::kHeads); ++p) full.addHead(p, 1.0);
  full.addHead(1000, 2.0);
  full.addHead(-5, 2.0);
  EXPECT_EQ(full.headsUsed(), ReplicaRestoreFigures::kHeads);
  EXPECT_TRUE(full.headOf(1000).has_value());
  EXPECT_FALSE(full.headOf(0).has_value());
  EXPECT_FALSE(full.headOf(-5).has_value());
  // Hostile: a non-finite time is dropped, a count beyond the arrays reads kHeads at most.
  ReplicaRestoreFigures bad;
  bad.addHead(3, std::numeric_limits<double>::quiet_NaN());
  bad.addHead(4, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(bad.headsUsed(), 0u);
  bad.headCount = 1000;
  EXPECT_EQ(bad.headsUsed(), ReplicaRestoreFigures::kHeads);
  ReplicaRestoreFigures merged = a;
  merged += bad;  // eight entries of priority 0 at time 0
  EXPECT_EQ(merged.headOf(0), std::optional<double>(0.0));
  EXPECT_EQ(merged.headOf(-1), std::optional<double>(50.0));
}

TEST(ReplicaSyncTest, SyncRoundAndFillDoNotAllocate) {
  MemoryStore store;
  store.published.assign(2, std::vector<InFlightLoad>(1));
  store.live.assign(2, true);
  store.figures.assign(2, ReplicaRestoreFigures{});
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

// Ranked replicas over one endpoint of `slots` slots, each with its own ledger, syncer and the
// same scrapes.
struct RankedReplicas {
  RankedReplicas(std::size_t replicas, std::int64_t slots, std::int64_t sharedRoomSlots = 0) {
    store.published.assign(replicas, std::vector<InFlightLoad>(1));
    store.live.assign(replicas, true);
    store.figures.assign(replicas, ReplicaRestoreFigures{});
    store.ranked = true;
    for (std::size_t r = 0; r < replicas; ++r) {
      DispatchLedgerOptions o = syncOptions(1);
      o.sharedRoomSlots = sharedRoomSlots;
      ledgers.push_back(std::make_unique<DispatchLedger>(o));
      ids.push_back(
          ledgers[r]->registerEndpoint("a", EndpointCapacity{.maxRunningRequests = slots}));
      syncs.push_back(std::make_unique<MemoryReplicaSync>(store, r));
      syncers.push_back(
          std::make_unique<ReplicaSyncer>(*ledgers[r], *syncs[r], std::vector<EndpointId>{ids[r]}));
    }
  }
  // Replica r's host clock runs `behind` the replicas' shared clock (its store reports it).
  void hostClock(std::size_t r, Duration behind) { syncs[r]->offset = behind; }
  // The same scrape to every replica, stamped on each one's host clock; each scrape 100 ms after
  // the previous one (the turn's step).
  void scrape(double running) {
    const auto at = kSyncNow + std::chrono::milliseconds(100) * scrapes++;
    for (std::size_t r = 0; r < ledgers.size(); ++r) {
      Scrape s = syncScrape(0, running);
      s.updateTime = at - syncs[r]->offset;
      ASSERT_TRUE(ledgers[r]->installScrape(ids[r], s, ledgers[r]->mark(ids[r])));
    }
  }
  void sync() {
    for (auto& s : syncers) ASSERT_TRUE(s->syncOnce());
  }
  // Whether replica r's view shows a free slot (what the slot-term detector admits on).
  [[nodiscard]] bool hasRoom(std::size_t r, std::int64_t slots) const {
    const Endpoint e = syncFilled(*ledgers[r], ids[r]);
    return e.waitingQueueSize == 0.0 && e.runningRequests < static_cast<double>(slots);
  }
  // Replica r dispatches while its view shows a free slot; how many it sent.
  int dispatchWhileRoom(std::size_t r, std::int64_t slots) {
    int sent = 0;
    while (sent < 100 && hasRoom(r, slots)) {
      if (!ledgers[r]->recordDispatch(ids[r])) break;
      ++sent;
    }
    return sent;
  }
  int scrapes = 0;
  MemoryStore store;
  std::vector<std::unique_ptr<DispatchLedger>> ledgers;
  std::vector<EndpointId> ids;
  std::vector<std::unique_ptr<MemoryReplicaSync>> syncs;
  std::vector<std::unique_ptr<ReplicaSyncer>> syncers;
};

TEST(ReplicaSyncTest, RankedReplicasSplitAScrapesFreeSlots) {
  RankedReplicas pool(3, 4);
  pool.scrape(3.0);  // one free slot
  pool.sync();       // ranks known: the split applies from here on
  // Exactly one replica sees the free slot (without the split all three would take it).
  int seeing = 0;
  for (std::size_t r = 0; r < 3; ++r) seeing += pool.hasRoom(r, 4) ? 1 : 0;
  EXPECT_EQ(seeing, 1);
  // A scrape with four free slots: the replicas, one after the other in the same instant, take
  // 4 in all, 2 + 1 + 1, never more.
  pool.scrape(0.0);
  std::vector<int> sent;
  for (std::size_t r = 0; r < 3; ++r) sent.push_back(pool.dispatchWhileRoom(r, 4));
  std::sort(sent.begin(), sent.end());
  EXPECT_EQ(sent, (std::vector<int>{1, 1, 2}));
  pool.sync();  // every part claimed: nothing left to split
  for (std::size_t r = 0; r < 3; ++r) EXPECT_FALSE(pool.hasRoom(r, 4)) << "replica " << r;
  // The single free slot of successive scrapes goes to each replica in turn (the rotation).
  std::vector<int> got(3, 0);
  for (int k = 0; k < 6; ++k) {
    pool.scrape(3.0);
    pool.sync();  // twice: every replica reads the others' figures since this scrape (a report
    pool.sync();  // from before it counts until then: conservative for one sync interval)
    for (std::size_t r = 0; r < 3; ++r) got[r] += pool.dispatchWhileRoom(r, 4);
  }
  EXPECT_EQ(got, (std::vector<int>{2, 2, 2}));
}

TEST(ReplicaSyncTest, ReplicasWhoseHostClocksDifferSplitAFreeSlotOnTheSharedClock) {
  // Three replicas on hosts whose steady clocks differ (0, 100 ms and 1 h 200 ms behind the
  // clock they share): each reads a scrape of the same instant stamped on its own clock. On the
  // hosts' own clocks all three would hold the same turn; on the shared one exactly one replica
  // sees the lone free slot, and each in turn.
  RankedReplicas pool(3, 4);
  pool.hostClock(1, std::chrono::milliseconds(100));
  pool.hostClock(2, std::chrono::hours(1) + std::chrono::milliseconds(200));
  pool.sync();
  std::vector<int> got(3, 0);
  for (int k = 0; k < 6; ++k) {
    pool.scrape(3.0);
    pool.sync();
    pool.sync();
    int seeing = 0;
    for (std::size_t r = 0; r < 3; ++r) seeing += pool.hasRoom(r, 4) ? 1 : 0;
    EXPECT_EQ(seeing, 1) << "scrape " << k;
    for (std::size_t r = 0; r < 3; ++r) got[r] += pool.dispatchWhileRoom(r, 4);
  }
  EXPECT_EQ(got, (std::vector<int>{2, 2, 2}));
}

TEST(ReplicaSyncTest, RoomAReplicaLeavesUnusedIsSplitAgainAtTheNextScrape) {
  RankedReplicas pool(2, 8);
  pool.sync();
  pool.scrape(0.0);  // 8 free: 4 each
  EXPECT_EQ(pool.dispatchWhileRoom(0, 8), 4);
  EXPECT_FALSE(pool.hasRoom(0, 8));
  pool.sync();  // replica 1 sent nothing, but its part stays its own until the next scrape
  EXPECT_FALSE(pool.hasRoom(0, 8));
  pool.scrape(4.0);  // the server runs replica 0's 4: the 4 left are split again, 2 each
  EXPECT_EQ(pool.dispatchWhileRoom(0, 8), 2);
  // A replica that sent more than its part (a scrape it did not share): the others count what
  // it reported, not its part.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.ledgers[0]->recordDispatch(pool.ids[0]));
  pool.sync();
  pool.sync();
  EXPECT_FALSE(pool.hasRoom(1, 8));  // 5 reported + 4 running on 8 slots
  // The store goes down: the share applies again (own x 2 for a replica that sent 5).
  pool.store.down = true;
  EXPECT_FALSE(pool.syncers[0]->syncOnce());
  const Endpoint e = syncFilled(*pool.ledgers[0], pool.ids[0]);
  EXPECT_DOUBLE_EQ(e.runningRequests + e.waitingQueueSize, 14.0);
}

TEST(ReplicaSyncTest, SharedRoomSlotsStayVisibleToEveryReplica) {
  // 3 free slots, none shared: the two replicas send 3 in all (parts 2 and 1).
  RankedReplicas split(2, 8);
  split.sync();
  split.scrape(5.0);
  EXPECT_EQ(split.dispatchWhileRoom(0, 8) + split.dispatchWhileRoom(1, 8), 3);
  // The same with the first 2 shared (a reservation policy's reserve, which the policy keeps its
  // lower bands out of): 1 slot split, and each replica also sees the 2.
  RankedReplicas pool(2, 8, 2);
  pool.sync();
  pool.scrape(5.0);
  EXPECT_EQ(pool.dispatchWhileRoom(0, 8), 2);
  EXPECT_EQ(pool.dispatchWhileRoom(1, 8), 2);
  // Fewer free slots than the shared ones: nothing to split, every replica sees them all.
  pool.scrape(7.0);
  pool.sync();
  for (std::size_t r = 0; r < 2; ++r) EXPECT_TRUE(pool.hasRoom(r, 8)) << "replica " << r;
  // Bad input: a negative count is reported, and sanitized to 0.
  DispatchLedgerOptions bad;
  bad.sharedRoomSlots = -1;
  Diagnostics d;
  DispatchLedger::validate(bad, "/ledger", d);
  ASSERT_EQ(d.errors().size(), 1U);
  EXPECT_NE(d.errors()[0].message.find("-1 is negative"), std::string::npos);
  EXPECT_EQ(DispatchLedger(bad).options().sharedRoomSlots, 0);
}

TEST(ReplicaSyncTest, TheFeedCountsTheOtherReplicasWorkAsOneLedgerWould) {
  // Two replicas, each with its own ledger, their feed delivering each one's events to the other
  // (here by hand). 4 slots and 1000 KV tokens per endpoint.
  const EndpointCapacity cap{.maxRunningRequests = 4, .kvCapacityTokens = 1000};
  DispatchLedger a(syncOptions(2));
  DispatchLedger b(syncOptions(2));
  const EndpointId ida = a.registerEndpoint("x", cap);
  const EndpointId idb = b.registerEndpoint("x", cap);
  a.setPeerFeed(true);
  b.setPeerFeed(true);
  EXPECT_TRUE(a.peerFeed());
  // b's request before a's scrape: in the scrape, and in a's baseline (its mark counts it).
  ASSERT_TRUE(b.recordDispatch(idb, 100));
  ASSERT_TRUE(a.recordPeerDispatch(ida, 100));
  EXPECT_EQ(a.mark(ida).peerDispatchedRequests, 1U);
  EXPECT_EQ(a.mark(ida).peerDispatchedTokens, 100U);
  Scrape scrape = syncScrape(0, 1);
  scrape.kvCacheUsage = 0.1;
  ASSERT_TRUE(a.installScrape(ida, scrape, a.mark(ida)));
  // After it: a sends 1 request (50 tokens), b 2 (200 tokens): 1 + 3 on 4 slots.
  ASSERT_TRUE(a.recordDispatch(ida, 50));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a.recordPeerDispatch(ida, 100));
  Endpoint e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 0.0);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 0.1 + 250.0 / 1000.0);
  // The pool's requests in flight: this replica's 1 and the 3 the feed reported.
  EXPECT_EQ(e.inFlightRequests, 4);
  EXPECT_EQ(e.inFlightTokens, 50 + 300);
  // One more from b: it queues.
  ASSERT_TRUE(a.recordPeerDispatch(ida, 10));
  e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 1.0);
  // b's first request ends: a completion since the scrape offsets a dispatch, as in one ledger.
  ASSERT_TRUE(a.recordPeerCompletion(ida, 100));
  e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 0.0);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 0.1 + 160.0 / 1000.0);
  // The others' summed figures do not count while the feed is live...
  ASSERT_TRUE(a.setPeerPending(ida, InFlightLoad{10, 0}, 2, 0));
  EXPECT_DOUBLE_EQ(syncFilled(a, ida).waitingQueueSize, 0.0);
  // ...and with the feed down they do, without the feed's counts (own 1 + 10 on 4 slots).
  a.setPeerFeed(false);
  e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 8.0);
  EXPECT_EQ(e.inFlightRequests, 1);  // only this replica's own
  // No sums either: the `replicas` share, own 1 x 2.
  ASSERT_TRUE(a.setPeerPending(ida, std::nullopt, 2));
  e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.runningRequests, 3.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 0.0);
  // The next scrape takes a baseline past every event so far: nothing pending.
  a.setPeerFeed(true);
  ASSERT_TRUE(a.installScrape(ida, syncScrape(0, 4), a.mark(ida)));
  e = syncFilled(a, ida);
  EXPECT_DOUBLE_EQ(e.runningRequests, 4.0);
  EXPECT_DOUBLE_EQ(e.waitingQueueSize, 0.0);
  // A completion the feed delivered without its dispatch (lost) lowers nothing below the scrape,
  // and a stale id is refused.
  ASSERT_TRUE(a.recordPeerCompletion(ida, 5));
  EXPECT_DOUBLE_EQ(syncFilled(a, ida).runningRequests, 4.0);
  EXPECT_FALSE(a.recordPeerDispatch(EndpointId{}, 1));
  EXPECT_FALSE(a.recordPeerCompletion(EndpointId{}, 1));
}

}  // namespace
}  // namespace holdback
