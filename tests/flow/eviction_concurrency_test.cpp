// In-flight eviction under concurrency (run under ThreadSanitizer by scripts/test.sh): enqueue,
// cancel, dispatch, natural completion, revocation, confirmation, timeouts, reconfigure and
// shutdown interleave freely; every request ends with exactly one outcome, every lease ends
// exactly once, and every revocation is issued once and ends confirmed or timed out.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flow_test_support.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

TEST(EvictionConcurrencyTest, EveryRequestLeaseAndRevocationEndsOnce) {
  constexpr int kRequests = 3000;
  std::atomic<std::int64_t> clock_ticks{0};  // logical time: 100 us per call
  const TimePoint t0 = TimePoint{} + 1h;
  auto tick = [&] { return t0 + std::chrono::microseconds(100 * clock_ticks.fetch_add(1)); };

  std::mutex mu;
  std::unordered_map<RequestId, int> outcomes;     // id -> outcomes delivered
  std::unordered_map<RequestId, Priority> bandOf;  // dispatched id -> band
  std::unordered_map<RequestId, int> evicts;       // id -> evict calls
  std::vector<RequestId> running;                  // dispatched, not yet released by us
  std::vector<RequestId> toConfirm;                // revoked, awaiting the host's confirmation
  std::atomic<std::uint64_t> releasedTrue{0};
  std::atomic<std::uint64_t> confirmedByUs{0};
  std::atomic<bool> stop{false};

  auto detector = std::make_shared<testing::FakeDetector>(0.3);
  auto make_options = [&](int variant) {
    FlowControllerOptions o;
    o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = 1.0})).value();
    o.detector = detector;
    o.bands = {{.priority = 10}, {.priority = 0}, {.priority = -1}};
    o.leaseTimeout = std::chrono::hours(1);
    o.eviction.enabled = variant != 3;
    o.eviction.confirmationGrace = std::chrono::microseconds(100 * (variant % 3));
    o.eviction.confirmationTimeout = 200ms;
    o.eviction.maxRevocationsPerDecision = 1 + static_cast<std::size_t>(variant % 3);
    o.eviction.waitForReleases = {.enabled = variant == 1, .tolerance = 5ms};
    o.eviction.footprintAware = variant == 2;
    // Reserve restoration (any cycle, not only a blocked one): with upstream's trigger, and alone.
    o.eviction.restoreReserve = {.enabled = variant == 1 || variant == 2, .leadTime = 5ms};
    o.eviction.revokeOnBlock = variant != 2;
    return o;
  };
  FlowControllerOptions o = make_options(0);
  o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
  o.onOutcome = [&](Completion&& c) {
    std::lock_guard lock(mu);
    outcomes[c.id] += 1;
    if (c.outcome.dispatched()) {
      bandOf[c.id] = c.bandPriority;
      running.push_back(c.id);
    }
  };
  o.eviction.evict = [&](const Revocation& r) {
    std::lock_guard lock(mu);
    // Never before the request's own dispatch outcome has been delivered.
    EXPECT_EQ(bandOf.count(r.id), 1u) << "evict before dispatch of " << r.id;
    evicts[r.id] += 1;
    if (r.id % 4 != 0) toConfirm.push_back(r.id);  // a quarter are never confirmed: time out
  };
  auto fc = std::move(FlowController::create(std::move(o))).value();

  std::atomic<bool> enough{false};
  std::atomic<int> enqueued{0};
  std::thread producer([&] {
    std::mt19937 rng(1);
    // At least kRequests, and on until the run has seen revocations (or a minute passed).
    for (int i = 0; i < kRequests || !enough.load(); ++i) {
      enqueued.fetch_add(1);
      if (i % 8 == 0) std::this_thread::sleep_for(20us);
      const int kind = static_cast<int>(rng() % 10);
      FlowRequest r;
      r.priority = kind < 6 ? -1 : (kind < 8 ? 0 : 10);
      r.flowId = "f" + std::to_string(r.priority) + "-" + std::to_string(kind % 2);
      Ticket t = fc->enqueue(std::move(r), tick());
      if (kind == 9 && i % 3 == 0) t.cancel();
    }
  });
  std::thread saturation([&] {
    std::mt19937 rng(2);
    while (!stop.load()) {
      detector->set(rng() % 3 == 0 ? 0.3 : 1.0 + 0.1 * static_cast<double>(rng() % 5));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> dispatchers;
  for (int d = 0; d < 2; ++d) {
    dispatchers.emplace_back([&, d] {
      for (int i = 0; !stop.load(); ++i) {
        fc->dispatchCycle(tick());
        if (i % 64 == d) fc->expire(tick());
      }
    });
  }
  std::thread host([&] {  // natural completions, updateLease, confirmations
    std::mt19937 rng(3);
    while (!stop.load()) {
      RequestId done = 0;
      RequestId confirm = 0;
      {
        std::lock_guard lock(mu);
        if (!running.empty() && rng() % 2 == 0) {
          const std::size_t k = rng() % running.size();
          done = running[k];
          running[k] = running.back();
          running.pop_back();
        }
        if (!toConfirm.empty()) {
          confirm = toConfirm.back();
          toConfirm.pop_back();
        }
      }
      if (done != 0) {
        fc->ticket(done).updateLease(100 + done % 7, done % 5);
        if (fc->release(done, tick())) releasedTrue.fetch_add(1);
        EXPECT_FALSE(fc->release(done, tick()));  // at most once
      }
      if (confirm != 0 && fc->release(confirm, tick())) {
        confirmedByUs.fetch_add(1);
        releasedTrue.fetch_add(1);
      }
      if (done == 0 && confirm == 0) std::this_thread::yield();
    }
  });
  std::thread reconfigurer([&] {
    for (int v = 1; !stop.load(); ++v) {
      EXPECT_FALSE(fc->reconfigure(make_options(v % 4)).hasErrors());
      (void)fc->stats();
      std::this_thread::sleep_for(200us);
    }
  });

  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    const EvictionStats e = fc->stats().eviction;
    if (e.confirmed >= 10 && e.timedOut >= 3) break;
    std::this_thread::sleep_for(1ms);
  }
  enough.store(true);
  producer.join();
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (fc->stats().queuedRequests > 0 && std::chrono::steady_clock::now() < give_up) {
    detector->set(0.3);
    std::this_thread::sleep_for(1ms);
  }
  std::thread closer([&] { fc->shutdown(tick()); });  // races the last cycles
  std::this_thread::sleep_for(2ms);
  stop.store(true);
  closer.join();
  for (auto& t : dispatchers) t.join();
  saturation.join();
  host.join();
  reconfigurer.join();

  // Quiesce: the host ends every lease it still holds, then time runs past every timeout.
  std::vector<RequestId> rest;
  {
    std::lock_guard lock(mu);
    rest = running;
    rest.insert(rest.end(), toConfirm.begin(), toConfirm.end());
  }
  const TimePoint late = t0 + 24h;
  for (RequestId id : rest) {
    if (fc->release(id, late)) releasedTrue.fetch_add(1);
  }
  fc->expire(late + 1h);  // stopped: expire is a no-op, stats must already add up

  std::lock_guard lock(mu);
  EXPECT_EQ(outcomes.size(), static_cast<std::size_t>(enqueued.load()));
  for (const auto& [id, n] : outcomes) EXPECT_EQ(n, 1) << "request " << id;
  for (const auto& [id, n] : evicts) {
    EXPECT_EQ(n, 1) << "lease " << id;
    ASSERT_TRUE(bandOf.count(id)) << "revoked a request that was never dispatched: " << id;
    EXPECT_LT(bandOf[id], 0) << "revoked a non-sheddable request: " << id;
  }
  const FlowControllerStats st = fc->stats();
  const EvictionStats& e = st.eviction;
  EXPECT_EQ(e.issued, evicts.size());
  std::uint64_t ended = 0;
  for (std::uint64_t n : e.leaseEnds) ended += n;
  EXPECT_EQ(e.leasesStarted, ended + e.leases);
  EXPECT_EQ(e.leases, 0u);  // every lease released (or its revocation timed out)
  EXPECT_EQ(e.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReleased)] +
                e.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)],
            releasedTrue.load());
  EXPECT_EQ(e.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedTimedOut)], e.timedOut);
  EXPECT_EQ(e.confirmed + e.timedOut + e.outstanding, e.issued);
  EXPECT_EQ(e.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)], e.confirmed);
  std::uint64_t byPriority = 0;
  for (const auto& [p, n] : e.issuedByPriority) {
    EXPECT_LT(p, 0);
    byPriority += n;
  }
  EXPECT_EQ(byPriority, e.issued);
  // The run exercised what it claims to.
  EXPECT_GT(e.issued, 0u);
  EXPECT_GT(e.confirmed, 0u);
  ::testing::Test::RecordProperty("revocations_issued", static_cast<int>(e.issued));
  ::testing::Test::RecordProperty("revocations_timed_out", static_cast<int>(e.timedOut));
}

}  // namespace
}  // namespace holdback
