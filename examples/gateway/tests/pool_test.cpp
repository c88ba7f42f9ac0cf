#include "pool.hpp"

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "holdback/detector/detectors.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

Pool makePool(std::size_t n, bool lagCredit) {
  std::vector<std::string> urls;
  std::vector<HostPort> hosts;
  for (std::size_t i = 0; i < n; ++i) {
    urls.push_back("http://127.0.0.1:" + std::to_string(8001 + i));
    hosts.push_back({"127.0.0.1", int(8001 + i)});
  }
  return Pool(std::move(urls), std::move(hosts), lagCredit);
}

std::unique_ptr<UtilizationDetector> detector() {
  return std::move(UtilizationDetector::create({.queueDepthThreshold = 4,
                                                .kvCacheUtilThreshold = 0.8,
                                                .metricsStalenessThreshold = 1s}))
      .value();
}

const TimePoint t0 = TimePoint{} + 100s;

TEST(Pool, NoMetricsYetMeansNoUpdateTime) {
  Pool pool = makePool(2, true);
  const auto view = pool.endpoints(t0);
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0].name, "http://127.0.0.1:8001");
  EXPECT_FALSE(view[0].updateTime.has_value());
  EXPECT_EQ(detector()->saturation(view, t0), 1.0);  // stale = saturated (fail closed)
}

TEST(Pool, ScrapeSetsTelemetryAndAFailedScrapeKeepsTheOldTimestamp) {
  Pool pool = makePool(1, true);
  pool.recordScrape(0, {.waiting = 2, .running = 3, .kvCacheUsage = 0.4}, t0, 0, 1);
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

TEST(Pool, PicksTheLeastLoadedKeptEndpointAndCountsItInFlight) {
  Pool pool = makePool(3, false);
  auto d = detector();
  pool.recordScrape(0, {.waiting = 1, .kvCacheUsage = 0.1}, t0, 0, 0);
  pool.recordScrape(1, {.waiting = 0, .kvCacheUsage = 0.1}, t0, 0, 0);
  pool.recordScrape(2, {.waiting = 9, .kvCacheUsage = 0.1}, t0, 0, 0);  // filtered out (>= 4)
  // In-flight first, then waiting: 1 (0 waiting), then 0, then 1 and 0 alternate; never 2.
  std::vector<std::size_t> picks;
  picks.reserve(4);
  for (int i = 0; i < 4; ++i) picks.push_back(*pool.pick(*d, t0));
  EXPECT_EQ(picks, (std::vector<std::size_t>{1, 0, 1, 0}));
  EXPECT_EQ(pool.endpoints(t0)[1].inFlightRequests, 2);
  pool.release(1);
  pool.release(1);
  EXPECT_EQ(*pool.pick(*d, t0), 1u);
  EXPECT_EQ(pool.counters(1).dispatches, 3u);
  EXPECT_EQ(pool.counters(2).dispatches, 0u);
}

TEST(Pool, FailOpenPrefersEndpointsWhoseLastScrapeSucceeded) {
  Pool pool = makePool(2, false);
  auto d = detector();
  // Both over the queue threshold: the filter keeps nothing and fails open.
  pool.recordScrape(0, {.waiting = 8}, t0, 0, 0);
  pool.recordScrape(1, {.waiting = 8}, t0, 0, 0);
  pool.recordScrapeFailure(0);  // endpoint 0 stopped answering
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*pool.pick(*d, t0), 1u);
}

TEST(Pool, AFailedScrapeStillCountsItsSkippedLinesAndUpReflectsTheLastScrape) {
  // A server serving garbage: every line skipped, the gauges missing, so the scrape fails; the
  // skipped lines must still show (they say why).
  Pool pool = makePool(2, false);
  EXPECT_FALSE(pool.anyUp());
  pool.recordScrapeFailure(0, 7);
  EXPECT_EQ(pool.counters(0).skippedLines, 7u);
  EXPECT_FALSE(pool.up(0));
  EXPECT_FALSE(pool.anyUp());
  pool.recordScrape(1, VllmTelemetry{}, TimePoint{} + 1s, 0, 0);
  EXPECT_TRUE(pool.up(1));
  EXPECT_TRUE(pool.anyUp());
}

TEST(Pool, ScrapeLagCreditCountsDispatchesTheLastScrapeCannotHaveSeen) {
  Pool pool = makePool(1, true);
  auto d = detector();
  pool.recordScrape(0, {.waiting = 0}, t0, 0, 0);
  (void)pool.pick(*d, t0);
  (void)pool.pick(*d, t0);
  EXPECT_EQ(pool.endpoints(t0)[0].waitingQueueSize, 2.0);
  // A scrape that started after the first dispatch and before the second saw only the first.
  pool.recordScrape(0, {.waiting = 1}, t0 + 50ms, 1, 0);
  EXPECT_EQ(pool.endpoints(t0 + 50ms)[0].waitingQueueSize, 2.0);  // 1 scraped + 1 credit
  pool.recordScrape(0, {.waiting = 0}, t0 + 100ms, pool.dispatchCount(0), 0);
  EXPECT_EQ(pool.endpoints(t0 + 100ms)[0].waitingQueueSize, 0.0);

  Pool no_credit = makePool(1, false);
  no_credit.recordScrape(0, {.waiting = 0}, t0, 0, 0);
  (void)no_credit.pick(*d, t0);
  EXPECT_EQ(no_credit.endpoints(t0)[0].waitingQueueSize, 0.0);
}

}  // namespace
}  // namespace holdback::gateway
