// DispatchLedger: counters, scrape baselines and the corrected figures fill() writes, the
// dispatch budget, the bad-input rules of the header, and no allocation in steady state.
#include "holdback/detector/dispatch_ledger.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/detector/detectors.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

using std::chrono::milliseconds;
const TimePoint kLedgerNow = TimePoint{} + std::chrono::hours(10);
using test_support::kInf;
using test_support::kNaN;

Scrape scrape(double waiting, double running, double kv, TimePoint at = kLedgerNow) {
  return {.updateTime = at,
          .waitingQueueSize = waiting,
          .runningRequests = running,
          .kvCacheUsage = kv};
}

Endpoint filled(const DispatchLedger& ledger, EndpointId id) {
  std::vector<Endpoint> e(1);
  e[0].name = "x";
  e[0].inFlightRequests = 99;
  const EndpointId ids[] = {id};
  ledger.fill(e, ids);
  return e[0];
}

TEST(DispatchLedgerTest, CountsInFlightThroughHandles) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(ledger.registerEndpoint("a"), a);  // idempotent
  EXPECT_EQ(ledger.find("a"), a);
  EXPECT_FALSE(ledger.find("b"));
  DispatchHandle h1 = ledger.dispatch(a, 10);
  DispatchHandle h2 = ledger.dispatch(a, 5);
  EXPECT_EQ(ledger.load(a).requests, 2);
  EXPECT_EQ(ledger.load(a).tokens, 15);
  h1.releaseTokens();
  EXPECT_EQ(ledger.load(a).requests, 2);
  EXPECT_EQ(ledger.load(a).tokens, 5);
  h1.release();
  h1.release();
  EXPECT_EQ(ledger.load("a").requests, 1);
  { DispatchHandle moved = std::move(h2); }
  EXPECT_EQ(ledger.load(a).requests, 0);
  EXPECT_EQ(ledger.load(a).tokens, 0);
}

TEST(DispatchLedgerTest, NoScrapeMeansNoMetrics) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  DispatchHandle h = ledger.dispatch(a, 3);
  const Endpoint e = filled(ledger, a);
  EXPECT_FALSE(e.updateTime);
  EXPECT_EQ(e.waitingQueueSize, 0.0);
  EXPECT_EQ(e.inFlightRequests, 1);
  EXPECT_EQ(e.inFlightTokens, 3);
}

// The conservative rule: without a slot count every pending dispatch counts as waiting (and
// running). With slotCountFromScrapes off it holds after any scrape; on, until a scrape has shown
// a running figure without a queue (ObservedSlotCount... below).
TEST(DispatchLedgerTest, UnknownMaxRunningCountsPendingAsWaiting) {
  DispatchLedger ledger({.slotCountFromScrapes = false});
  const EndpointId a = ledger.registerEndpoint("a");
  DispatchHandle before = ledger.dispatch(a);  // seen by the scrape (it reports 1 running)
  ASSERT_TRUE(ledger.installScrape(a, scrape(2, 1, 0.25)));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.updateTime, kLedgerNow);
  EXPECT_EQ(e.waitingQueueSize, 2.0);  // nothing since the scrape
  EXPECT_EQ(e.runningRequests, 1.0);
  EXPECT_EQ(e.kvCacheUsage, 0.25);
  std::vector<DispatchHandle> after;
  for (int i = 0; i < 3; ++i) after.push_back(ledger.dispatch(a, 100));
  e = filled(ledger, a);
  EXPECT_EQ(e.waitingQueueSize, 5.0);  // 2 + 3
  EXPECT_EQ(e.runningRequests, 4.0);
  EXPECT_EQ(e.kvCacheUsage, 0.25);  // no KV capacity known
  EXPECT_EQ(e.inFlightRequests, 4);
  // A completion since the scrape offsets one dispatch since the scrape ...
  before.release();
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 4.0);
  // ... but never lowers the scraped figures.
  after.clear();
  e = filled(ledger, a);
  EXPECT_EQ(e.waitingQueueSize, 2.0);
  EXPECT_EQ(e.runningRequests, 1.0);
}

// creditCompletions: completions beyond the dispatches since the scrape lower its figures at once,
// the server's queue first (it refills its slots from it), then running, never below 0; while
// dispatches since the scrape outnumber completions the usual correction applies.
TEST(DispatchLedgerTest, CreditCompletionsLowersTheScrapedFiguresQueueFirst) {
  for (const bool credit : {false, true}) {
    SCOPED_TRACE(credit ? "credit" : "no credit");
    // Reconciliation off: the scrape below shows fewer requests than are in flight by design.
    DispatchLedger ledger({.creditCompletions = credit, .reconcileInFlight = false});
    const EndpointId a = ledger.registerEndpoint(
        "a", EndpointCapacity{.maxRunningRequests = 8, .kvCapacityTokens = 1000});
    // Dispatched before the scrape, which shows 10 of them (2 ended unreported before it).
    std::vector<DispatchHandle> seen;
    for (int i = 0; i < 12; ++i) seen.push_back(ledger.dispatch(a, 10));
    ASSERT_TRUE(ledger.installScrape(a, scrape(2, 8, 0.5)));
    // One dispatch since the scrape, three completions of requests it showed: 2 freed.
    DispatchHandle after = ledger.dispatch(a, 10);
    for (int i = 0; i < 3; ++i) seen[i].release();
    Endpoint e = filled(ledger, a);
    EXPECT_EQ(e.waitingQueueSize, credit ? 0.0 : 2.0);
    EXPECT_EQ(e.runningRequests, 8.0);
    EXPECT_EQ(e.kvCacheUsage, 0.5);  // KV is never credited
    // Four more: 6 freed of the 10 the scrape showed.
    for (int i = 3; i < 7; ++i) seen[i].release();
    e = filled(ledger, a);
    EXPECT_EQ(e.waitingQueueSize, credit ? 0.0 : 2.0);
    EXPECT_EQ(e.runningRequests, credit ? 4.0 : 8.0);
    // More completions than the scrape showed (13 against 1 dispatch since): never below 0.
    for (int i = 7; i < 12; ++i) seen[i].release();
    after.release();
    e = filled(ledger, a);
    EXPECT_EQ(e.waitingQueueSize, credit ? 0.0 : 2.0);
    EXPECT_EQ(e.runningRequests, credit ? 0.0 : 8.0);
    // Dispatches outnumbering completions since the scrape: the usual correction.
    std::vector<DispatchHandle> more;
    for (int i = 0; i < 15; ++i) more.push_back(ledger.dispatch(a, 10));
    e = filled(ledger, a);  // pending = 1 + 15 - 13 = 3
    EXPECT_EQ(e.runningRequests, 8.0);
    EXPECT_EQ(e.waitingQueueSize, 5.0);  // 2 + (8 + 3 - 8)
  }
}

TEST(DispatchLedgerTest, KnownMaxRunningFillsFreeSlotsFirst) {
  DispatchLedger ledger({.reconcileInFlight = false});  // the scrapes show no dispatch as seen
  const EndpointId a = ledger.registerEndpoint(
      "a", EndpointCapacity{.maxRunningRequests = 4, .kvCapacityTokens = 1000});
  ledger.installScrape(a, scrape(0, 2, 0.5));
  std::vector<DispatchHandle> hs;
  hs.push_back(ledger.dispatch(a, 100));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 3.0);
  EXPECT_EQ(e.waitingQueueSize, 0.0);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 0.6);
  for (int i = 0; i < 4; ++i) hs.push_back(ledger.dispatch(a, 100));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 4.0);      // full
  EXPECT_EQ(e.waitingQueueSize, 3.0);     // 2 + 5 - 4
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 1.0);  // 0.5 + 500/1000, capped at 1
  for (int i = 0; i < 10; ++i) hs.push_back(ledger.dispatch(a, 100));
  EXPECT_EQ(filled(ledger, a).kvCacheUsage, 1.0);  // never above 1 (which would read invalid)
  // A server reporting more running than maxRunning: nothing is subtracted.
  ledger.installScrape(a, scrape(1, 6, 0.5));
  hs.push_back(ledger.dispatch(a));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 6.0);
  EXPECT_EQ(e.waitingQueueSize, 4.0);  // 1 + (6 + 1 - 4)
}

// M not configured: the largest running figure a scrape showed is the slot count (a slow start).
TEST(DispatchLedgerTest, ObservedSlotCountGrowsWithTheRunningFiguresScrapesShow) {
  DispatchLedger ledger;  // slotCountFromScrapes is on by default
  EXPECT_TRUE(ledger.options().slotCountFromScrapes);
  const EndpointId a = ledger.registerEndpoint("a");
  EXPECT_EQ(ledger.slotCount(a), 0);
  // Before any scrape showed running work: the conservative rule (all pending is waiting).
  ledger.installScrape(a, scrape(0, 0, 0.1));
  EXPECT_EQ(ledger.slotCount(a), 0);
  std::vector<DispatchHandle> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(ledger.dispatch(a));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.waitingQueueSize, 3.0);
  EXPECT_EQ(e.runningRequests, 3.0);
  // A scrape shows the 3 running: the server has at least 3 slots; none of them is free.
  ledger.installScrape(a, scrape(0, 3, 0.1));
  EXPECT_EQ(ledger.slotCount(a), 3);
  hs.push_back(ledger.dispatch(a));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 3.0);
  EXPECT_EQ(e.waitingQueueSize, 1.0);  // 3 + 1 - 3
  // 4 run at once (fractional figures count down): 4 slots; after 2 completions 2 are free.
  ledger.installScrape(a, scrape(0, 4.9, 0.1));
  EXPECT_EQ(ledger.slotCount(a), 4);
  hs.resize(2);
  ledger.installScrape(a, scrape(0, 2, 0.1));
  EXPECT_EQ(ledger.slotCount(a), 4);  // a lower figure does not lower it
  for (int i = 0; i < 3; ++i) hs.push_back(ledger.dispatch(a));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 4.0);   // 2 + the 2 free slots
  EXPECT_EQ(e.waitingQueueSize, 1.0);  // 2 + 3 - 4: the third queues
  EXPECT_EQ(e.inFlightRequests, 5);
  // A completion since the scrape offsets a dispatch, as with a configured slot count.
  hs.pop_back();
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 0.0);
  // A configured maxRunningRequests takes precedence; 0 returns to the observed figure.
  ASSERT_TRUE(ledger.setCapacity(a, {.maxRunningRequests = 10}));
  EXPECT_EQ(ledger.slotCount(a), 10);
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 0.0);
  ASSERT_TRUE(ledger.setCapacity(a, {}));
  EXPECT_EQ(ledger.slotCount(a), 4);
}

// A scrape that shows a queue shows the server taking no more work than it runs: the observed
// slot count restarts from that running figure (a server restarted with fewer slots, a full KV
// cache), and grows again with later scrapes.
TEST(DispatchLedgerTest, ObservedSlotCountRestartsFromAScrapeShowingAQueue) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(0, 16, 0.5));
  EXPECT_EQ(ledger.slotCount(a), 16);
  ledger.installScrape(a, scrape(2, 8, 0.5));  // restarted with 8 slots: 8 run, 2 wait
  EXPECT_EQ(ledger.slotCount(a), 8);
  DispatchHandle h = ledger.dispatch(a);
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 8.0);
  EXPECT_EQ(e.waitingQueueSize, 3.0);  // 2 + (8 + 1 - 8)
  ledger.installScrape(a, scrape(0, 10, 0.5));
  EXPECT_EQ(ledger.slotCount(a), 10);
  ledger.installScrape(a, scrape(0.5, 0, 0.5));  // any queue counts, even a fractional one
  EXPECT_EQ(ledger.slotCount(a), 0);
}

// Invalid or uncorrectable scrapes teach nothing; absurd figures count only up to the cap.
TEST(DispatchLedgerTest, ObservedSlotCountIgnoresInvalidScrapesAndIsCapped) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(0, 5, 0.1));
  for (const Scrape& s : {scrape(0, kNaN, 0.1), scrape(0, -20, 0.1), scrape(0, kInf, 0.1),
                          scrape(0, 1e301, 0.1), scrape(kNaN, 0, 0.1), scrape(-1, 0, 0.1),
                          scrape(kInf, 0, 0.1), scrape(0, 9, 1.5) /* KV invalid */}) {
    ledger.installScrape(a, s);
    EXPECT_EQ(ledger.slotCount(a), 5) << s.waitingQueueSize << " " << s.runningRequests;
  }
  ledger.installScrape(a, scrape(0, 1e200, 0.1));
  EXPECT_EQ(ledger.slotCount(a), DispatchLedger::kMaxObservedSlots);
  ledger.installScrape(a, scrape(0, 1e6, 0.1));
  EXPECT_EQ(ledger.slotCount(a), DispatchLedger::kMaxObservedSlots);
  // A configured slot count beyond 2^32 - 1 is stored as that.
  ASSERT_TRUE(ledger.setCapacity(a, {.maxRunningRequests = std::int64_t{1} << 50}));
  EXPECT_EQ(ledger.slotCount(a), DispatchLedger::kMaxConfiguredSlots);
  // Off: nothing is learnt.
  DispatchLedger off({.slotCountFromScrapes = false});
  const EndpointId b = off.registerEndpoint("b");
  off.installScrape(b, scrape(0, 7, 0.1));
  EXPECT_EQ(off.slotCount(b), 0);
  EXPECT_EQ(off.slotCount(EndpointId{}), 0);
}

// A removed and re-registered endpoint (a new server under the old name) starts from nothing;
// registering a live name again keeps what was learnt.
TEST(DispatchLedgerTest, ObservedSlotCountResetsOnReRegistration) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(0, 12, 0.1));
  EXPECT_EQ(ledger.registerEndpoint("a"), a);
  EXPECT_EQ(ledger.slotCount(a), 12);
  ASSERT_TRUE(ledger.removeEndpoint(a));
  EXPECT_EQ(ledger.slotCount(a), 0);                      // stale id
  const EndpointId again = ledger.registerEndpoint("a");  // reuses the drained slot
  EXPECT_EQ(again.index, a.index);
  EXPECT_EQ(ledger.slotCount(again), 0);
  ledger.installScrape(again, scrape(0, 0, 0.1));
  DispatchHandle h = ledger.dispatch(again);
  EXPECT_EQ(filled(ledger, again).waitingQueueSize, 1.0);  // conservative again
}

// The dispatch budget counts the observed free slots as it counts configured ones; with R
// replicas each gets its share.
TEST(DispatchLedgerTest, ObservedSlotCountFeedsTheBudget) {
  DispatchLedger ledger({.dispatchBudget = true, .budgetQueueDepth = 4});
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(1, 0, 0.1));
  EXPECT_EQ(ledger.budgetState(a)->budget, 3);  // free queue only
  ledger.installScrape(a, scrape(0, 10, 0.1));
  ledger.installScrape(a, scrape(0, 6, 0.1));
  EXPECT_EQ(ledger.budgetState(a)->budget, 8);  // 10 - 6 free slots + 4 free queue
  DispatchLedger replicated({.dispatchBudget = true, .budgetQueueDepth = 4, .replicas = 3});
  const EndpointId b = replicated.registerEndpoint("b");
  replicated.installScrape(b, scrape(0, 10, 0.1));
  replicated.installScrape(b, scrape(0, 6, 0.1));
  EXPECT_EQ(replicated.budgetState(b)->budget, 3);  // ceil(8 / 3)
  std::vector<DispatchHandle> hs;
  hs.push_back(replicated.dispatch(b));
  Endpoint e = filled(replicated, b);
  EXPECT_EQ(e.runningRequests, 9.0);  // 6 + 1 x 3 into the 4 free slots
  EXPECT_EQ(e.waitingQueueSize, 0.0);
  hs.push_back(replicated.dispatch(b));
  EXPECT_EQ(filled(replicated, b).waitingQueueSize, 2.0);  // 6 + 6 - 10
}

TEST(DispatchLedgerTest, CorrectionCanBeTurnedOff) {
  DispatchLedger ledger({.correction = false});
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(1, 1, 0.1));
  DispatchHandle h = ledger.dispatch(a);
  const Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.waitingQueueSize, 1.0);
  EXPECT_EQ(e.inFlightRequests, 1);
}

TEST(DispatchLedgerTest, MarkTakenBeforeTheScrapeIsTheBaseline) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  const ScrapeMark mark = ledger.mark(a);         // scrape request sent
  DispatchHandle onTheWire = ledger.dispatch(a);  // dispatched while the scrape was in flight
  ledger.installScrape(a, scrape(0, 0, 0), mark);
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 1.0);  // still counted: the scrape may miss it
  // Without the mark the install time is the baseline: the request would be lost, but the scrape
  // shows none of the one in flight, so reconciliation counts it still.
  ledger.installScrape(a, scrape(0, 0, 0));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 1.0);
  DispatchLedger off({.reconcileInFlight = false});
  const EndpointId b = off.registerEndpoint("b");
  DispatchHandle lost = off.dispatch(b);
  off.installScrape(b, scrape(0, 0, 0));
  EXPECT_EQ(filled(off, b).waitingQueueSize, 0.0);
}

// A dispatch before the scrape's mark that had not reached the server when it sampled (the
// scrape shows fewer requests than were in flight at the mark) stays pending until the next
// scrape; a completion the host records later offsets it (the server had finished it).
TEST(DispatchLedgerTest, ReconciliationKeepsRequestsTheScrapeDidNotShowPending) {
  DispatchLedger ledger;
  EXPECT_TRUE(ledger.options().reconcileInFlight);
  const EndpointId a = ledger.registerEndpoint(
      "a", EndpointCapacity{.maxRunningRequests = 4, .kvCapacityTokens = 1000});
  std::vector<DispatchHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(ledger.dispatch(a, 100));
  // The server had received 3 of the 4 when it sampled (300 KV tokens of 1000).
  ledger.installScrape(a, scrape(0, 3, 0.3), ledger.mark(a));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 4.0);  // full: no free slot to hand out
  EXPECT_EQ(e.waitingQueueSize, 0.0);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 0.4);  // the unseen request's tokens (pro rata) too
  hs.push_back(ledger.dispatch(a, 100));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 4.0);
  EXPECT_EQ(e.waitingQueueSize, 1.0);  // the fifth queues
  // Running + waiting counts the server's whole intake: 2 running + 1 waiting of 4 in flight.
  hs.pop_back();
  ledger.installScrape(a, scrape(1, 2, 0.3), ledger.mark(a));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 3.0);
  EXPECT_EQ(e.waitingQueueSize, 1.0);
  // The server finished one before it sampled; the host records that completion afterwards: it
  // offsets the request counted as unseen, the scrape's own figures stay.
  hs.back().release();
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 2.0);
  EXPECT_EQ(e.waitingQueueSize, 1.0);
  // A scrape showing as many as (or more than) are in flight (other clients): nothing unseen.
  ledger.installScrape(a, scrape(2, 4, 0.3), ledger.mark(a));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 4.0);
  EXPECT_EQ(e.waitingQueueSize, 2.0);
  // Fractional figures count whole requests only (floor), so 2.9 shown leaves 1 of 3 unseen.
  ledger.installScrape(a, scrape(0, 2.9, 0.3), ledger.mark(a));
  EXPECT_DOUBLE_EQ(filled(ledger, a).runningRequests, 3.9);
  // Invalid telemetry is not reconciled (nor corrected).
  ledger.installScrape(a, scrape(kNaN, 0, 0.3), ledger.mark(a));
  EXPECT_EQ(filled(ledger, a).runningRequests, 0.0);
}

// Completions the host never records (a leak) are an excess that lasts: once it has shown in
// every scrape of four stretches of 250 ms of scrape time (the last one still filling) it is
// taken as an offset, not as requests on their way; what exceeds it still counts. The budget
// counts dispatches since the scrape's own mark.
TEST(DispatchLedgerTest, ReconciliationTakesALastingExcessForLostCompletions) {
  DispatchLedger ledger({.dispatchBudget = true, .budgetQueueDepth = 5});
  const EndpointId a = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 8});
  std::vector<DispatchHandle> hs;  // 3 ended at the server but never released by the host + 2
  for (int i = 0; i < 5; ++i) hs.push_back(ledger.dispatch(a));
  std::vector<double> running;
  TimePoint at = kLedgerNow;
  for (int k = 0; k < 6; ++k) {  // scrapes 300 ms apart: each opens a stretch
    ledger.installScrape(a, scrape(0, 2, 0, at), ledger.mark(a));  // excess 5 - 2 = 3
    running.push_back(filled(ledger, a).runningRequests);
    at += std::chrono::milliseconds(300);
  }
  EXPECT_EQ(running, (std::vector<double>{5, 5, 5, 2, 2, 2}));
  // One more dispatched before the mark and not yet shown: excess 4 over the lasting 3.
  hs.push_back(ledger.dispatch(a));
  ledger.installScrape(a, scrape(0, 2, 0, at), ledger.mark(a));  // budget 6 + 5 (+ 1 unseen)
  EXPECT_EQ(filled(ledger, a).runningRequests, 3.0);
  std::vector<DispatchHandle> after;
  for (int i = 0; i < 10; ++i) after.push_back(ledger.dispatch(a));
  for (int i = 0; i < 3; ++i) after[i].release();
  Endpoint e = filled(ledger, a);  // pending 1 + 10 - 3 = 8
  EXPECT_EQ(e.runningRequests, 8.0);
  EXPECT_EQ(e.waitingQueueSize, 2.0);  // 10 dispatches since the mark: the budget (11) is open
  after.push_back(ledger.dispatch(a));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 5.0);  // 11: spent, the queue reads full
}

// A completion the host records late (the server ended the request, the host's teardown of the
// exchange lags: an aborted upstream request on a loaded gateway) is an excess too, but a passing
// one: held for five scrapes 25 ms apart it must not be taken for a leak, or the next request
// still on its way reads as seen and its slot is handed out again (the CI failure of
// tests/e2e GatewayEviction in the sixth session). The window is about a second of scrape time.
TEST(DispatchLedgerTest, ReconciliationDoesNotTakeALateCompletionForALeak) {
  DispatchLedger ledger({.dispatchBudget = true, .budgetQueueDepth = 1});
  const EndpointId a = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 4});
  std::vector<DispatchHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(ledger.dispatch(a));
  // The server has ended hs[0] (it shows 3 running); the host has not recorded it yet.
  TimePoint at = kLedgerNow;
  for (int k = 0; k < 8; ++k) {  // 200 ms of scrapes, 25 ms apart: excess 1 in each
    ledger.installScrape(a, scrape(0, 3, 0, at), ledger.mark(a));
    EXPECT_EQ(filled(ledger, a).runningRequests, 4.0) << k;  // the late one still counts
    at += std::chrono::milliseconds(25);
  }
  hs[0].release();             // recorded at last
  hs[0] = ledger.dispatch(a);  // the free slot, taken: on its way at the next scrape
  ledger.installScrape(a, scrape(0, 3, 0, at), ledger.mark(a));
  // 4 in flight, 3 shown: the new request is on its way, the server is full.
  EXPECT_EQ(filled(ledger, a).runningRequests, 4.0);
  hs.push_back(ledger.dispatch(a));  // a fifth now would queue at the server
  EXPECT_GE(filled(ledger, a).waitingQueueSize, 1.0);
}

TEST(DispatchLedgerTest, MarginKeepsTheLastDispatchesPending) {
  DispatchLedger ledger({.scrapeMarginRequests = 2});
  const EndpointId a = ledger.registerEndpoint("a");
  std::vector<DispatchHandle> hs;
  for (int i = 0; i < 5; ++i) hs.push_back(ledger.dispatch(a, 10));
  ledger.installScrape(a, scrape(0, 3, 0));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.waitingQueueSize, 2.0);  // the last 2 are assumed unseen
  // The margin applies at every install: again the last 2 dispatches.
  hs.push_back(ledger.dispatch(a, 10));
  ledger.installScrape(a, scrape(0, 6, 0));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 2.0);
  // Never further back than the previous baseline: 1 dispatch since it, margin 5 -> 1.
  DispatchLedger wide({.scrapeMarginRequests = 5});
  const EndpointId w = wide.registerEndpoint("w");
  std::vector<DispatchHandle> ws;  // released before `wide` is destroyed
  ws.push_back(wide.dispatch(w, 10));
  ws.push_back(wide.dispatch(w, 10));
  wide.installScrape(w, scrape(0, 0, 0));
  EXPECT_EQ(filled(wide, w).waitingQueueSize, 2.0);  // back to the start, not beyond
  ws.push_back(wide.dispatch(w, 10));
  wide.installScrape(w, scrape(0, 3, 0));
  EXPECT_EQ(filled(wide, w).waitingQueueSize, 3.0);  // the previous baseline (0) bounds it
  DispatchLedger invalid({.scrapeMarginRequests = -4, .budgetQueueDepth = 0});
  EXPECT_EQ(invalid.options().scrapeMarginRequests, 0);
  EXPECT_EQ(invalid.options().budgetQueueDepth, 1);
  Diagnostics d;
  DispatchLedger::validate({.scrapeMarginRequests = -4, .budgetQueueDepth = 0}, "/l", d);
  ASSERT_EQ(d.errors().size(), 2u);
  EXPECT_EQ(d.errors()[0].toString(),
            "/l/scrapeMarginRequests: -4 is negative; expected an integer >= 0");
}

// R replicas, each with its own ledger over the same scrapes: each counts its own pending work R
// times and gets ceil(budget / R) of the budget.
TEST(DispatchLedgerTest, ReplicasScalePendingWorkAndSplitTheBudget) {
  DispatchLedger ledger(
      {.dispatchBudget = true, .budgetQueueDepth = 5, .reconcileInFlight = false, .replicas = 4});
  const EndpointId a = ledger.registerEndpoint(
      "a", EndpointCapacity{.maxRunningRequests = 16, .kvCapacityTokens = 1000});
  ledger.installScrape(a, scrape(0, 10, 0.5));  // budget 6 free slots + 5 free queue = 11
  std::vector<DispatchHandle> hs;
  hs.push_back(ledger.dispatch(a, 50));
  Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 14.0);  // 10 + 1 x 4
  EXPECT_EQ(e.waitingQueueSize, 0.0);
  EXPECT_DOUBLE_EQ(e.kvCacheUsage, 0.7);  // 0.5 + 4 x 50 / 1000
  hs.push_back(ledger.dispatch(a, 50));
  e = filled(ledger, a);
  EXPECT_EQ(e.runningRequests, 16.0);
  EXPECT_EQ(e.waitingQueueSize, 2.0);    // 10 + 8 - 16
  hs.push_back(ledger.dispatch(a, 50));  // 3 = ceil(11 / 4): this replica's share is spent
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 6.0);  // 10 + 12 - 16 (already >= 5)
  ledger.installScrape(a, scrape(0, 0, 0.0));          // budget 16 + 5 = 21, share 6
  for (int i = 0; i < 5; ++i) hs.push_back(ledger.dispatch(a));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 4.0);  // 0 + 20 - 16: open
  hs.push_back(ledger.dispatch(a));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 8.0);  // 24 - 16, spent as well
  // Out of range: sanitized by the constructor, reported by validate().
  EXPECT_EQ(DispatchLedger({.replicas = 0}).options().replicas, 1);
  EXPECT_EQ(DispatchLedger({.replicas = 5000}).options().replicas, 1024);
  Diagnostics d;
  DispatchLedger::validate({.replicas = 0}, "/l", d);
  ASSERT_EQ(d.errors().size(), 1u);
  EXPECT_EQ(d.errors()[0].toString(),
            "/l/replicas: 0 is out of range; expected an integer in [1, 1024]");
}

TEST(DispatchLedgerTest, BudgetClosesTheEndpointUntilTheNextScrape) {
  DispatchLedger ledger({.dispatchBudget = true, .budgetQueueDepth = 5});
  const EndpointId a = ledger.registerEndpoint("a", EndpointCapacity{.maxRunningRequests = 4});
  ledger.installScrape(a, scrape(3, 2, 0.1));  // 2 free slots + 2 free queue places
  ASSERT_TRUE(ledger.budgetState(a));
  EXPECT_EQ(ledger.budgetState(a)->budget, 4);
  std::vector<DispatchHandle> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(ledger.dispatch(a));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 4.0);  // 3 + (2 + 3 - 4): open
  // The host "forgets" a completion twice over: completions do not refill the budget.
  hs.clear();
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 3.0);
  hs.push_back(ledger.dispatch(a));
  EXPECT_EQ(ledger.budgetState(a)->dispatchedSinceScrape, 4);
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 5.0);  // spent: reads the queue depth
  auto d = std::move(UtilizationDetector::create({.queueDepthThreshold = 5})).value();
  std::vector<Endpoint> e{filled(ledger, a)};
  EXPECT_GE(d->saturation(e, kLedgerNow), 1.0);
  // The next scrape resets it.
  ledger.installScrape(a, scrape(0, 1, 0.1));
  EXPECT_EQ(filled(ledger, a).waitingQueueSize, 0.0);
  // Without maxRunning, and a scrape showing a queue (the observed slot count is then the
  // running figure: no free slot), the budget is the free queue only; invalid telemetry gives 0.
  const EndpointId b = ledger.registerEndpoint("b");
  ledger.installScrape(b, scrape(1, 50, 0.1));
  EXPECT_EQ(ledger.budgetState(b)->budget, 4);
  ledger.installScrape(b, scrape(kNaN, 50, 0.1));
  EXPECT_EQ(ledger.budgetState(b)->budget, 0);
}

TEST(DispatchLedgerTest, InvalidTelemetryIsPassedThroughUncorrected) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  DispatchHandle h = ledger.dispatch(a, 10);
  for (const Scrape& s : {scrape(-3, 0, 0.1), scrape(kNaN, 0, 0.1), scrape(0, -1, 0.1),
                          scrape(0, 0, 50.0), scrape(0, 0, -0.5)}) {
    ledger.installScrape(a, s);
    DispatchHandle more = ledger.dispatch(a);
    const Endpoint e = filled(ledger, a);
    EXPECT_TRUE(e.waitingQueueSize == s.waitingQueueSize ||
                (std::isnan(e.waitingQueueSize) && std::isnan(s.waitingQueueSize)));
    EXPECT_EQ(e.kvCacheUsage, s.kvCacheUsage);
    EXPECT_EQ(e.runningRequests, s.runningRequests);
  }
}

TEST(DispatchLedgerTest, FutureScrapeTimestampIsStoredForTheDetectorToJudge) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(0, 0, 0, kLedgerNow + std::chrono::hours(1)));
  const Endpoint e = filled(ledger, a);
  EXPECT_EQ(e.updateTime, kLedgerNow + std::chrono::hours(1));
  auto d = std::move(UtilizationDetector::create({})).value();
  EXPECT_EQ(d->observe(e, kLedgerNow), UtilizationDetector::Observation::kInvalid);
  // The last installed scrape wins, even an older one.
  ledger.installScrape(a, scrape(0, 0, 0, kLedgerNow));
  EXPECT_EQ(filled(ledger, a).updateTime, kLedgerNow);
}

TEST(DispatchLedgerTest, BadCountersNeverUnderflow) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  // Completions without dispatches are dropped.
  EXPECT_FALSE(ledger.recordCompletion(a, 5));
  EXPECT_EQ(ledger.load(a).requests, 0);
  EXPECT_TRUE(ledger.recordDispatch(a, 10));
  EXPECT_TRUE(ledger.recordCompletion(a, 1000));  // tokens capped at those dispatched
  EXPECT_FALSE(ledger.recordCompletion(a));
  EXPECT_EQ(ledger.load(a).requests, 0);
  EXPECT_EQ(ledger.load(a).tokens, 0);
  EXPECT_TRUE(ledger.recordDispatch(a, 10));
  EXPECT_EQ(ledger.load(a).tokens, 10);
  // Negative tokens count as 0, huge ones as kMaxTokensPerRequest, and nothing wraps.
  DispatchHandle neg = ledger.dispatch(a, -7);
  EXPECT_EQ(neg.tokens(), 0);
  std::vector<DispatchHandle> huge;
  for (int i = 0; i < 3; ++i)
    huge.push_back(ledger.dispatch(a, std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(huge[0].tokens(), DispatchLedger::kMaxTokensPerRequest);
  EXPECT_EQ(ledger.load(a).tokens, 10 + 3 * DispatchLedger::kMaxTokensPerRequest);
  huge.clear();
  EXPECT_EQ(ledger.load(a).tokens, 10);
  // Invalid and stale ids.
  const EndpointId none;
  EXPECT_FALSE(ledger.dispatch(none).active());
  EXPECT_FALSE(ledger.recordDispatch(EndpointId{12345, 1}));
  EXPECT_FALSE(ledger.installScrape(EndpointId{7, 0}, scrape(0, 0, 0)));
  EXPECT_EQ(ledger.load(none).requests, 0);
  EXPECT_FALSE(ledger.budgetState(none));
  const Endpoint e = filled(ledger, none);
  EXPECT_FALSE(e.updateTime);
  EXPECT_EQ(e.inFlightRequests, 0);
}

TEST(DispatchLedgerTest, EndpointRemovedWithWorkInFlight) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(1, 1, 0.1));
  DispatchHandle old = ledger.dispatch(a, 10);
  EXPECT_TRUE(ledger.removeEndpoint(a));
  EXPECT_FALSE(ledger.removeEndpoint(a));
  EXPECT_FALSE(ledger.removeEndpoint("a"));
  EXPECT_FALSE(ledger.find("a"));
  EXPECT_FALSE(ledger.dispatch(a).active());
  EXPECT_FALSE(ledger.installScrape(a, scrape(0, 0, 0)));
  Endpoint e = filled(ledger, a);
  EXPECT_FALSE(e.updateTime);
  EXPECT_EQ(e.inFlightRequests, 0);
  // Re-registered while the old request is still out: a fresh slot at zero.
  const EndpointId again = ledger.registerEndpoint("a");
  EXPECT_NE(again, a);
  EXPECT_EQ(ledger.load(again).requests, 0);
  old.release();  // completes into the retired slot
  EXPECT_EQ(ledger.load(again).requests, 0);
  EXPECT_FALSE(filled(ledger, again).updateTime);  // the old scrape does not come back
  // A drained retired slot is reused, under a new generation.
  ledger.removeEndpoint(again);
  const EndpointId b = ledger.registerEndpoint("b");
  EXPECT_TRUE(b.index == a.index || b.index == again.index);
  EXPECT_NE(b, a);
  EXPECT_NE(b, again);
  EXPECT_EQ(ledger.load(b).requests, 0);
}

TEST(DispatchLedgerTest, FillByNameAndInFlightOnly) {
  DispatchLedger ledger;
  const EndpointId a = ledger.registerEndpoint("a");
  ledger.installScrape(a, scrape(2, 0, 0.3));
  DispatchHandle h = ledger.dispatch(a, 4);
  std::vector<Endpoint> e(2);
  e[0].name = "a";
  e[1].name = "unknown";
  e[1].updateTime = kLedgerNow;
  e[1].inFlightRequests = 5;
  ledger.fill(e);
  EXPECT_EQ(e[0].updateTime, kLedgerNow);
  EXPECT_EQ(e[0].waitingQueueSize, 3.0);
  EXPECT_EQ(e[0].inFlightTokens, 4);
  EXPECT_FALSE(e[1].updateTime);
  EXPECT_EQ(e[1].inFlightRequests, 0);
  std::vector<Endpoint> only(1);
  only[0].name = "a";
  only[0].waitingQueueSize = 42;
  ledger.fillInFlight(only);
  EXPECT_EQ(only[0].waitingQueueSize, 42);
  EXPECT_EQ(only[0].inFlightRequests, 1);
}

TEST(DispatchLedgerTest, SteadyStateDoesNotAllocate) {
  DispatchLedger ledger({.dispatchBudget = true});
  std::vector<EndpointId> ids;
  std::vector<Endpoint> endpoints(100);
  for (int i = 0; i < 100; ++i) {
    endpoints[i].name = "e" + std::to_string(i);
    ids.push_back(ledger.registerEndpoint(endpoints[i].name, EndpointCapacity{8, 1000}));
  }
  testing::AllocationCounter counter;
  for (int round = 0; round < 10; ++round) {
    for (const EndpointId id : ids) {
      const ScrapeMark m = ledger.mark(id);
      DispatchHandle h = ledger.dispatch(id, 5);
      ledger.installScrape(id, scrape(1, 2, 0.3), m);
      ledger.installScrape(id, scrape(1, 2, 0.3));
      ledger.recordDispatch(id, 1);
      ledger.recordCompletion(id, 1);
    }
    ledger.fill(endpoints, ids);
    ledger.fill(endpoints);
  }
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
