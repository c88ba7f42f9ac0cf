#include "pool.hpp"

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "holdback/detector/detectors.hpp"
#include "replica_reserve.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

Pool makePool(std::size_t n, DispatchLedgerOptions ledger = {}) {
  std::vector<std::string> urls;
  std::vector<HostPort> hosts;
  for (std::size_t i = 0; i < n; ++i) {
    urls.push_back("http://127.0.0.1:" + std::to_string(8001 + i));
    hosts.push_back({"127.0.0.1", int(8001 + i)});
  }
  return Pool(std::move(urls), std::move(hosts), ledger);
}

std::unique_ptr<UtilizationDetector> detector() {
  return std::move(UtilizationDetector::create({.queueDepthThreshold = 4,
                                                .kvCacheUtilThreshold = 0.8,
                                                .metricsStalenessThreshold = 1s}))
      .value();
}

const TimePoint t0 = TimePoint{} + 100s;

TEST(Pool, NoMetricsYetMeansNoUpdateTime) {
  Pool pool = makePool(2);
  const auto view = pool.endpoints(t0);
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0].name, "http://127.0.0.1:8001");
  EXPECT_FALSE(view[0].updateTime.has_value());
  EXPECT_EQ(detector()->saturation(view, t0), 1.0);  // stale = saturated (fail closed)
}

TEST(Pool, ScrapeSetsTelemetryAndAFailedScrapeKeepsTheOldTimestamp) {
  Pool pool = makePool(1);
  pool.recordScrape(0, {.waiting = 2, .running = 3, .kvCacheUsage = 0.4}, t0, {}, 1);
  auto view = pool.endpoints(t0);
  EXPECT_EQ(view[0].updateTime, t0);
  EXPECT_EQ(view[0].waitingQueueSize, 2.0);
  EXPECT_EQ(view[0].runningRequests, 3.0);
  EXPECT_EQ(view[0].kvCacheUsage, 0.4);
  pool.recordScrapeFailure(0);
  view = pool.endpoints(t0 + 2s);
  EXPECT_EQ(view[0].updateTime, t0);  // ages into staleness
  EXPECT_EQ(detector()->observe(view[0], t0 + 2s), UtilizationDetector::Observation::kStale);
  const Pool::Counters c = pool.counters(0);
  EXPECT_EQ(c.scrapes, 2u);
  EXPECT_EQ(c.scrapeErrors, 1u);
  EXPECT_EQ(c.skippedLines, 1u);
  EXPECT_FALSE(c.up);
}

TEST(Pool, PicksThroughTheLibraryPickerAndHoldsALedgerHandlePerDispatch) {
  Pool pool = makePool(3);
  auto d = detector();
  pool.recordScrape(0, {.waiting = 1, .kvCacheUsage = 0.1}, t0, {}, 0);
  pool.recordScrape(1, {.waiting = 0, .kvCacheUsage = 0.1}, t0, {}, 0);
  pool.recordScrape(2, {.waiting = 9, .kvCacheUsage = 0.1}, t0, {}, 0);  // filtered out (>= 4)
  // EndpointPicker: in flight first, then (ledger-corrected) waiting: 1 (0 waiting), then 0,
  // then 1 and 0 alternate; never 2.
  std::vector<Pool::Dispatch> held;
  std::vector<std::size_t> picks;
  for (int i = 0; i < 4; ++i) {
    held.push_back(*pool.pick(*d, t0));
    picks.push_back(held.back().endpoint);
    EXPECT_TRUE(held.back().handle.active());
  }
  EXPECT_EQ(picks, (std::vector<std::size_t>{1, 0, 1, 0}));
  EXPECT_EQ(pool.endpoints(t0)[1].inFlightRequests, 2);
  EXPECT_EQ(pool.inFlight(1), 2);
  held[0].handle.release();  // the two dispatches to endpoint 1 end
  held[2].handle.release();
  EXPECT_EQ(pool.inFlight(1), 0);
  EXPECT_EQ(pool.endpoints(t0)[1].inFlightRequests, 0);
  EXPECT_EQ(pool.pick(*d, t0)->endpoint, 1u);  // its handle is destroyed at once: released
  EXPECT_EQ(pool.inFlight(1), 0);
  EXPECT_EQ(pool.counters(1).dispatches, 3u);
  EXPECT_EQ(pool.counters(2).dispatches, 0u);
}

TEST(Pool, FailOpenPrefersEndpointsWhoseLastScrapeSucceeded) {
  Pool pool = makePool(2);
  auto d = detector();
  // Both over the queue threshold: the filter keeps nothing and fails open.
  pool.recordScrape(0, {.waiting = 8}, t0, {}, 0);
  pool.recordScrape(1, {.waiting = 8}, t0, {}, 0);
  pool.recordScrapeFailure(0);  // endpoint 0 stopped answering
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool.pick(*d, t0)->endpoint, 1u);
}

TEST(Pool, AFailedScrapeStillCountsItsSkippedLinesAndUpReflectsTheLastScrape) {
  // A server serving garbage: every line skipped, the gauges missing, so the scrape fails; the
  // skipped lines must still show (they say why).
  Pool pool = makePool(2);
  EXPECT_FALSE(pool.anyUp());
  pool.recordScrapeFailure(0, 7);
  EXPECT_EQ(pool.counters(0).skippedLines, 7u);
  EXPECT_FALSE(pool.up(0));
  EXPECT_FALSE(pool.anyUp());
  pool.recordScrape(1, VllmTelemetry{}, TimePoint{} + 1s, {}, 0);
  EXPECT_TRUE(pool.up(1));
  EXPECT_TRUE(pool.anyUp());
}

TEST(Pool, TheLedgerCountsDispatchesSinceTheScrapesMarkUntilTheyComplete) {
  Pool pool = makePool(1);
  auto d = detector();
  pool.recordScrape(0, {.waiting = 0}, t0, pool.mark(0), 0);
  auto a = pool.pick(*d, t0);
  const ScrapeMark mark = pool.mark(0);  // a scrape sent after the first dispatch...
  auto b = pool.pick(*d, t0);
  // ...without a known slot count (none configured, and no scrape has shown running work yet),
  // each dispatch not yet completed counts as waiting.
  EXPECT_EQ(pool.endpoints(t0)[0].waitingQueueSize, 2.0);
  // The scrape saw `a` (1 waiting); only `b` is added to it.
  pool.recordScrape(0, {.waiting = 1}, t0 + 50ms, mark, 0);
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].waitingQueueSize, 2.0);
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].inFlightRequests, 2);
  // Completions offset the dispatches but never lower the scraped figure.
  a->handle.release();
  b.reset();  // a request abandoned (client gone): destroying its handle completes it
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].waitingQueueSize, 1.0);
  EXPECT_EQ(pool.inFlight(0), 0);
  pool.recordScrape(0, {.waiting = 0}, t0 + 100ms, pool.mark(0), 0);
  EXPECT_EQ(pool.endpoints(t0 + 100ms)[0].waitingQueueSize, 0.0);
}

TEST(Pool, ClosedLoopTrafficBetweenTwoScrapesDoesNotAccumulate) {
  // The old scrape-lag credit counted every dispatch since the scrape as waiting, completed or
  // not, which capped the gateway at ~60 req/s over an idle server. The ledger nets
  // completions: one request in flight at a time reads as one, however many went through.
  Pool pool = makePool(1);
  auto d = detector();
  pool.recordScrape(0, {.waiting = 0}, t0, pool.mark(0), 0);
  for (int i = 0; i < 100; ++i) {
    auto dispatch = pool.pick(*d, t0);
    ASSERT_TRUE(dispatch.has_value());
    EXPECT_LE(pool.endpoints(t0)[0].waitingQueueSize, 1.0);
  }
  EXPECT_EQ(pool.endpoints(t0)[0].waitingQueueSize, 0.0);
  EXPECT_LT(d->saturation(pool.endpoints(t0), t0), 1.0);
  EXPECT_EQ(pool.counters(0).dispatches, 100u);
}

TEST(Pool, TheLargestRunningFigureAScrapeShowedIsTheSlotCount) {
  // The built-in config configures no slot count: the ledger learns it from the scrapes. A
  // server that ran 8 at once has 8 slots; with 2 running, 6 dispatches take free slots.
  Pool pool = makePool(1);
  auto d = detector();  // queueDepthThreshold 4
  pool.recordScrape(0, {.waiting = 0, .running = 8}, t0, pool.mark(0), 0);
  pool.recordScrape(0, {.waiting = 0, .running = 2}, t0 + 50ms, pool.mark(0), 0);
  std::vector<Pool::Dispatch> held;
  for (int i = 0; i < 6; ++i) held.push_back(*pool.pick(*d, t0 + 50ms));
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].waitingQueueSize, 0.0);
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].runningRequests, 8.0);
  EXPECT_LT(d->saturation(pool.endpoints(t0 + 50ms), t0 + 50ms), 1.0);
  held.push_back(*pool.pick(*d, t0 + 50ms));  // the seventh queues
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].waitingQueueSize, 1.0);
  // With the learning off, all seven count as waiting.
  Pool off = makePool(1, {.slotCountFromScrapes = false});
  off.recordScrape(0, {.waiting = 0, .running = 8}, t0, off.mark(0), 0);
  off.recordScrape(0, {.waiting = 0, .running = 2}, t0 + 50ms, off.mark(0), 0);
  std::vector<Pool::Dispatch> held_off;
  for (int i = 0; i < 7; ++i) held_off.push_back(*off.pick(*d, t0 + 50ms));
  EXPECT_EQ(off.endpoints(t0 + 50ms)[0].waitingQueueSize, 7.0);
}

TEST(Pool, LedgerCorrectionCanBeTurnedOff) {
  Pool pool = makePool(1, {.correction = false});
  auto d = detector();
  pool.recordScrape(0, {.waiting = 0}, t0, pool.mark(0), 0);
  auto a = pool.pick(*d, t0);
  EXPECT_EQ(pool.endpoints(t0)[0].waitingQueueSize, 0.0);
  EXPECT_EQ(pool.endpoints(t0)[0].inFlightRequests, 1);
}

// While Redis fails, a replica keeps to its share: R replicas' shares together leave the pool's
// fixed reserve free, each keeps at least one slot to make progress, and an unknown slot count
// bounds nothing.
// flowControl.routing: priority (the gateway passes the bands as the ledger's levels): an
// interactive request goes to the server with no interactive request in flight, though it has the
// most requests in flight (batch, which a server preempting by priority preempts for it). Routed
// by the requests in flight, it goes to the other one.
Pool priorityPool(bool routing) {
  std::vector<std::string> urls{"http://127.0.0.1:8001", "http://127.0.0.1:8002"};
  std::vector<HostPort> hosts{{"127.0.0.1", 8001}, {"127.0.0.1", 8002}};
  DispatchLedgerOptions ledger;
  ledger.priorityLevels = {0, -1, 10};
  return Pool(std::move(urls), std::move(hosts), ledger, {.maxRunningRequests = 8}, {}, {}, 0,
              routing);
}

TEST(Pool, PriorityRoutingSendsAnInteractiveRequestWhereNoneOfItsPriorityRuns) {
  auto d = detector();
  for (const bool routing : {false, true}) {
    Pool pool = priorityPool(routing);
    pool.recordScrape(0, {.kvCacheUsage = 0.1}, t0, pool.mark(0), 0);
    pool.recordScrape(1, {.kvCacheUsage = 0.1}, t0, pool.mark(1), 0);
    std::vector<Pool::Dispatch> held;
    for (int i = 0; i < 3; ++i) held.push_back(pool.dispatchTo(0, 0, -1));
    held.push_back(pool.dispatchTo(1, 0, 10));
    EXPECT_EQ(pool.inFlightAtOrAbove(0, 10), 0);
    EXPECT_EQ(pool.inFlightAtOrAbove(1, 10), 1);
    EXPECT_EQ(pool.inFlightAtOrAbove(0, -1), 3);
    const auto interactive = pool.pick(*d, t0, 0, 10);
    ASSERT_TRUE(interactive.has_value());
    EXPECT_EQ(interactive->endpoint, routing ? 0u : 1u) << "routing " << routing;
    held.push_back(std::move(*pool.pick(*d, t0, 0, -1)));  // batch: every request counts
    EXPECT_EQ(held.back().endpoint, 1u) << "routing " << routing;
  }
}

TEST(FallbackShareTest, SharesSumToThePoolLessItsReserve) {
  EXPECT_EQ(fallbackShare(8, 1, 3), 2);  // 2 x 4 slots, reserve 1, three replicas: 6 of 8
  EXPECT_EQ(fallbackShare(8, 0, 1), 8);
  EXPECT_EQ(fallbackShare(8, 1, 1), 7);
  for (std::int64_t slots = 1; slots <= 64; ++slots) {
    for (std::int64_t keep = 0; keep < 4; ++keep) {
      for (std::int64_t r = 1; r <= 8; ++r) {
        const std::int64_t share = fallbackShare(slots, keep, r);
        EXPECT_GE(share, 1);
        if (share > 1) {
          EXPECT_LE(share * r, slots - keep) << slots << " " << keep << " " << r;
        }
      }
    }
  }
  EXPECT_EQ(fallbackShare(2, 1, 3), 1);   // at least one
  EXPECT_EQ(fallbackShare(8, 1, 0), 7);   // no sync round yet: one replica
  EXPECT_EQ(fallbackShare(8, -3, 2), 4);  // a negative reserve counts as none
  EXPECT_EQ(fallbackShare(0, 1, 3), -1);  // a server's slots unknown: no bound
}

}  // namespace
}  // namespace holdback::gateway
