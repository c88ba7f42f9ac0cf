// InFlightTracker under contention; run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "holdback/detector/detectors.hpp"
#include "holdback/detector/in_flight_tracker.hpp"

namespace holdback {
namespace {

TEST(InFlightTrackerConcurrencyTest, CountsBalanceUnderContention) {
  InFlightTracker tracker;
  auto detector = std::move(ConcurrencyDetector::create({.maxConcurrency = 8})).value();
  const std::vector<std::string> names{"a", "b", "c"};
  constexpr int kWorkers = 4;
  constexpr int kRequests = 2000;
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0};

  // A reader fills snapshots and runs the detector while the workers dispatch and release.
  std::thread reader([&] {
    std::vector<Endpoint> endpoints(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) endpoints[i].name = names[i];
    std::vector<std::size_t> out(names.size());
    while (!done.load()) {
      tracker.fill(endpoints);
      for (const Endpoint& e : endpoints) {
        // Each worker holds at most 2 requests of 3 tokens per endpoint at any time.
        if (e.inFlightRequests < 0 || e.inFlightRequests > std::int64_t{2} * kWorkers ||
            e.inFlightTokens < 0 || e.inFlightTokens > std::int64_t{6} * kWorkers) {
          bad_reads.fetch_add(1);
        }
      }
      const double s = detector->saturation(endpoints, TimePoint{});
      if (!(s >= 0.0 && s <= 1.0)) bad_reads.fetch_add(1);
      (void)detector->filter(endpoints, TimePoint{}, out);
    }
  });

  std::vector<std::thread> workers;
  workers.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string& name = names[static_cast<std::size_t>(i + w) % names.size()];
        InFlightHandle first = tracker.dispatch(name, 3);
        InFlightHandle second = tracker.dispatch(name, 3);
        if (i % 2 == 0) second.releaseTokens();
        InFlightHandle moved = std::move(first);  // released by its destructor
        if (i % 3 == 0) second.release();
      }
    });
  }
  for (auto& t : workers) t.join();
  done.store(true);
  reader.join();

  EXPECT_EQ(bad_reads.load(), 0);
  for (const std::string& name : names) {
    EXPECT_EQ(tracker.load(name).requests, 0) << name;
    EXPECT_EQ(tracker.load(name).tokens, 0) << name;
  }
}

TEST(InFlightTrackerConcurrencyTest, RemovalRacesWithDispatchAndRelease) {
  InFlightTracker tracker;
  constexpr int kWorkers = 3;
  std::vector<std::thread> threads;
  threads.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3000; ++i) {
        InFlightHandle h = tracker.dispatch("flappy", 2);
        const InFlightLoad l = tracker.load("flappy");
        EXPECT_GE(l.requests, 0);
        EXPECT_GE(l.tokens, 0);
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 3000; ++i) tracker.removeEndpoint("flappy");
  });
  for (auto& t : threads) t.join();
  // Whatever the interleaving, every handle has been released into the counters it claimed.
  EXPECT_EQ(tracker.load("flappy").requests, 0);
  EXPECT_EQ(tracker.load("flappy").tokens, 0);
}

}  // namespace
}  // namespace holdback
