// DispatchLedger under contention: dispatchers, a scraper installing scrapes, a reader filling
// snapshots and a thread registering and removing an endpoint with work in flight, all at once.
// Built with the concurrency tests, so it also runs under ThreadSanitizer (build/tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"

namespace holdback {
namespace {

TEST(DispatchLedgerConcurrencyTest, CountsBalanceAndFiguresStayInRange) {
  DispatchLedger ledger({.dispatchBudget = true});
  constexpr int kEndpoints = 4;
  constexpr int kWorkers = 4;
  constexpr int kRequests = 3000;
  std::vector<EndpointId> ids;
  for (int i = 0; i < kEndpoints; ++i) {
    ids.push_back(ledger.registerEndpoint("e" + std::to_string(i), EndpointCapacity{4, 1000}));
  }
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};

  std::thread scraper([&] {
    std::int64_t t = 0;
    while (!done.load()) {
      for (const EndpointId id : ids) {
        const ScrapeMark mark = ledger.mark(id);
        const Scrape s{TimePoint(Duration(++t)), 1.0, 2.0, 0.5};
        if (t % 2 == 0) {
          ledger.installScrape(id, s, mark);
        } else {
          ledger.installScrape(id, s);
        }
      }
      std::this_thread::yield();
    }
  });

  std::thread reader([&] {
    std::vector<Endpoint> endpoints(ids.size());
    auto detector = std::move(UtilizationDetector::create({})).value();
    while (!done.load()) {
      ledger.fill(endpoints, ids);
      for (const Endpoint& e : endpoints) {
        // Each worker holds at most 2 requests (of 3 tokens) at a time.
        if (e.inFlightRequests < 0 || e.inFlightRequests > 2 * kWorkers || e.inFlightTokens < 0 ||
            e.inFlightTokens > 6 * kWorkers) {
          bad.fetch_add(1);
        }
        if (e.updateTime && (e.waitingQueueSize < 1.0 || e.runningRequests < 2.0 ||
                             e.kvCacheUsage < 0.5 || e.kvCacheUsage > 1.0)) {
          bad.fetch_add(1);
        }
      }
      const double s = detector->saturation(endpoints, TimePoint{});
      if (!(s >= 0.0 && s <= 1.0)) bad.fetch_add(1);
    }
  });

  // An endpoint that comes and goes while requests to it are in flight.
  std::thread flapper([&] {
    for (int i = 0; i < 500; ++i) {
      const EndpointId id = ledger.registerEndpoint("flappy");
      DispatchHandle h = ledger.dispatch(id, 3);
      ledger.installScrape(id, {TimePoint{}, 0, 0, 0});
      ledger.removeEndpoint(id);
      if (ledger.dispatch(id).active()) bad.fetch_add(1);  // a removed id counts nothing
    }
  });

  std::vector<std::thread> workers;
  workers.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < kRequests; ++i) {
        const EndpointId id = ids[static_cast<std::size_t>(i + w) % ids.size()];
        DispatchHandle first = ledger.dispatch(id, 3);
        if (i % 5 == 0) {
          ledger.recordDispatch(id, 3);
          ledger.recordCompletion(id, 3);
        } else {
          DispatchHandle second = ledger.dispatch(id, 3);
          if (i % 2 == 0) second.releaseTokens();
        }
        DispatchHandle moved = std::move(first);
      }
    });
  }
  for (auto& t : workers) t.join();
  flapper.join();
  done.store(true);
  scraper.join();
  reader.join();

  EXPECT_EQ(bad.load(), 0);
  for (const EndpointId id : ids) {
    EXPECT_EQ(ledger.load(id).requests, 0);
    EXPECT_EQ(ledger.load(id).tokens, 0);
  }
  EXPECT_FALSE(ledger.find("flappy"));
}

// The replica feed under contention: a feed thread records another replica's dispatches and
// completions while this replica's workers dispatch, a scraper installs scrapes, the feed is
// switched on and off, and a reader marks and fills: a mark never shows more completions than
// dispatches, the figures stay in range, and once everything has completed the pool's in-flight
// counts are back at zero.
TEST(DispatchLedgerConcurrencyTest, PeerFeedCountsStayInRangeUnderContention) {
  DispatchLedger ledger({.replicas = 2});
  constexpr int kWorkers = 2;
  constexpr int kRequests = 3000;
  const EndpointId id = ledger.registerEndpoint("e", EndpointCapacity{4, 1000});
  ledger.setPeerFeed(true);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread scraper([&] {
    std::int64_t t = 0;
    while (!done.load()) {
      const ScrapeMark mark = ledger.mark(id);
      ledger.installScrape(id, Scrape{TimePoint(Duration(++t)), 0.0, 1.0, 0.25}, mark);
      if (t % 64 == 0) ledger.setPeerFeed(t % 128 == 0);
      std::this_thread::yield();
    }
  });
  std::thread reader([&] {
    std::vector<Endpoint> endpoints(1);
    const EndpointId ids[] = {id};
    while (!done.load()) {
      // The feed's counters are read completions first: however the threads interleave, a mark
      // never shows more of the feed's completions than of its dispatches.
      const ScrapeMark m = ledger.mark(id);
      if (m.peerCompletedRequests > m.peerDispatchedRequests ||
          m.peerCompletedTokens > m.peerDispatchedTokens) {
        bad.fetch_add(1);
      }
      ledger.fill(endpoints, ids);
      const Endpoint& e = endpoints[0];
      // (A reader descheduled between those reads sees the feed's dispatches since: its counts
      // err high for that read, never below zero.)
      if (e.inFlightRequests < 0 || e.inFlightTokens < 0) bad.fetch_add(1);
      if (e.updateTime &&
          (e.runningRequests < 1.0 || e.runningRequests > 4.0 || e.waitingQueueSize < 0.0 ||
           e.kvCacheUsage < 0.25 || e.kvCacheUsage > 1.0)) {
        bad.fetch_add(1);
      }
    }
  });
  std::thread feed([&] {
    for (int i = 0; i < kRequests; ++i) {
      if (!ledger.recordPeerDispatch(id, 5) || !ledger.recordPeerDispatch(id, 5)) bad.fetch_add(1);
      if (!ledger.recordPeerCompletion(id, 5) || !ledger.recordPeerCompletion(id, 5)) {
        bad.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) DispatchHandle h = ledger.dispatch(id, 3);
    });
  }
  for (auto& t : workers) t.join();
  feed.join();
  done.store(true);
  scraper.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  ledger.setPeerFeed(true);
  std::vector<Endpoint> endpoints(1);
  const EndpointId ids[] = {id};
  ledger.fill(endpoints, ids);
  EXPECT_EQ(endpoints[0].inFlightRequests, 0);
  EXPECT_EQ(endpoints[0].inFlightTokens, 0);
}

// The observed slot count (no configured one) learnt by a scraper while workers dispatch and a
// reader fills: whatever the interleaving, the count stays within what the scrapes showed, and
// the corrected running figure never exceeds the larger of the scraped one and that count.
TEST(DispatchLedgerConcurrencyTest, ObservedSlotCountStaysWithinWhatScrapesShowed) {
  DispatchLedger ledger;
  const EndpointId id = ledger.registerEndpoint("e");
  constexpr double kMaxShown = 6.0;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread scraper([&] {
    std::int64_t t = 0;
    while (!done.load()) {
      ++t;
      // Running 2..6; every third scrape shows a queue (restarting the count).
      const Scrape s{TimePoint(Duration(t)), t % 3 == 0 ? 1.0 : 0.0,
                     2.0 + static_cast<double>(t % 5), 0.2};
      ledger.installScrape(id, s, ledger.mark(id));
      std::this_thread::yield();
    }
  });
  std::thread reader([&] {
    std::vector<Endpoint> endpoints(1);
    const EndpointId ids[] = {id};
    while (!done.load()) {
      const std::int64_t slots = ledger.slotCount(id);
      if (slots < 0 || slots > static_cast<std::int64_t>(kMaxShown)) bad.fetch_add(1);
      ledger.fill(endpoints, ids);
      const Endpoint& e = endpoints[0];
      if (e.updateTime &&
          (e.runningRequests < 2.0 || e.runningRequests > kMaxShown || e.waitingQueueSize < 0.0)) {
        bad.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < 3000; ++i) {
        DispatchHandle a = ledger.dispatch(id, 1);
        DispatchHandle b = ledger.dispatch(id, 1);
      }
    });
  }
  for (auto& t : workers) t.join();
  done.store(true);
  scraper.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(ledger.slotCount(id), 6);
  EXPECT_EQ(ledger.load(id).requests, 0);
}

// Requests in flight by priority (DispatchLedgerOptions::priorityLevels): workers dispatch and
// release at three priorities (handles and handle-free events) while a reader reads
// inFlightAtOrAbove; the counts stay within what is held and end at zero.
TEST(DispatchLedgerConcurrencyTest, PriorityCountsBalanceUnderContention) {
  DispatchLedgerOptions options;
  options.priorityLevels = {-1, 0, 10};
  DispatchLedger ledger(options);
  const std::vector<EndpointId> ids{ledger.registerEndpoint("a"), ledger.registerEndpoint("b")};
  constexpr int kWorkers = 4;
  constexpr int kRequests = 3000;
  constexpr Priority kPriorities[] = {-1, 0, 10};
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    std::vector<std::int64_t> out(ids.size());
    while (!done.load()) {
      for (const Priority p : kPriorities) {
        ledger.inFlightAtOrAbove(ids, p, out);
        for (const std::int64_t n : out) {
          if (n < 0 || n > 2 * kWorkers) bad.fetch_add(1);  // each worker holds at most 2
        }
      }
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < kRequests; ++i) {
        const EndpointId id = ids[static_cast<std::size_t>((i + w) % 2)];
        const Priority p = kPriorities[(i * 7 + w) % 3];
        DispatchHandle h = ledger.dispatch(id, 3, p);
        if (ledger.recordDispatch(id, 3, p)) (void)ledger.recordCompletion(id, 3, p);
        h.release();
      }
    });
  }
  for (std::thread& t : workers) t.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  std::vector<std::int64_t> out(ids.size(), -1);
  ledger.inFlightAtOrAbove(ids, -1, out);
  EXPECT_EQ(out, (std::vector<std::int64_t>{0, 0}));
}

}  // namespace
}  // namespace holdback
