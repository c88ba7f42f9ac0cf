// SaturationDetector::room: each endpoint's free slots and KV tokens before the detector's
// limits (detector/detectors.hpp), and the capacity DispatchLedger::fill writes for it.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <memory>
#include <vector>

#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using test_support::kInf;
const TimePoint kRoomNow = TimePoint{} + 1h;

Endpoint roomTelemetry(double waiting, double running, double kv, std::int64_t slots = 0,
                       std::int64_t kvTokens = 0) {
  Endpoint e;
  e.updateTime = kRoomNow;
  e.waitingQueueSize = waiting;
  e.runningRequests = running;
  e.kvCacheUsage = kv;
  e.maxRunningRequests = slots;
  e.kvCapacityTokens = kvTokens;
  return e;
}

std::vector<EndpointRoom> roomsOf(const SaturationDetector& d, const std::vector<Endpoint>& pool) {
  std::vector<EndpointRoom> out(pool.size(), EndpointRoom{-1.0, -1.0});
  EXPECT_TRUE(d.room(pool, kRoomNow, out));
  return out;
}

TEST(DetectorRoomTest, UtilizationCountsFreeSlotsAndKvBeforeItsThreshold) {
  auto d = UtilizationDetector::create().value();  // kvCacheUtilThreshold 0.8, no slot term
  const auto room = roomsOf(*d, {roomTelemetry(0, 10, 0.5, 16, 32768),  // 6 slots, 0.3 x 32768 KV
                                 roomTelemetry(1, 10, 0.5, 16, 32768),  // a request waits: no slot
                                 roomTelemetry(0, 10, 0.9, 16, 32768),  // KV above the threshold
                                 roomTelemetry(0, 3, 0.5),              // capacities unknown
                                 roomTelemetry(0, 3, 0.85)});  // unknown, KV past threshold
  EXPECT_EQ(room[0].slots, 6.0);
  EXPECT_NEAR(room[0].kvTokens, 0.3 * 32768, 1e-6);
  EXPECT_EQ(room[1].slots, 0.0);
  EXPECT_NEAR(room[1].kvTokens, 0.3 * 32768, 1e-6);
  EXPECT_EQ(room[2].kvTokens, 0.0);
  EXPECT_EQ(room[3].slots, kInf);
  EXPECT_EQ(room[3].kvTokens, kInf);
  EXPECT_EQ(room[4].kvTokens, 0.0);
  // The whole cache's rest, where the capacity is known (a request may start below the
  // threshold and run past it: core/capacity.hpp); none where it is not.
  EXPECT_NEAR(room[0].kvCapacityLeft, 0.5 * 32768, 1e-6);
  EXPECT_NEAR(room[2].kvCapacityLeft, 0.1 * 32768, 1e-6);
  EXPECT_EQ(room[3].kvCapacityLeft, 0.0);
  EXPECT_EQ(roomsOf(*d, {roomTelemetry(0, 10, 1.0, 16, 32768)})[0].kvCapacityLeft, 0.0);
  // Off (several gateway replicas): none, the footprint must fit below the threshold.
  auto whole = UtilizationDetector::create({.kvStartPastThreshold = false}).value();
  const auto off = roomsOf(*whole, {roomTelemetry(0, 10, 0.5, 16, 32768)});
  EXPECT_NEAR(off[0].kvTokens, 0.3 * 32768, 1e-6);
  EXPECT_EQ(off[0].kvCapacityLeft, 0.0);
}

TEST(DetectorRoomTest, UtilizationFallsBackToItsSlotTermAndGivesStaleEndpointsNoRoom) {
  auto d = UtilizationDetector::create({.maxRunningRequests = 8}).value();
  Endpoint stale = roomTelemetry(0, 0, 0.0, 16, 32768);
  stale.updateTime.reset();
  Endpoint invalid = roomTelemetry(0, 0, 1.5, 16, 32768);  // KV above 1: invalid (strict)
  Endpoint broken = roomTelemetry(0, 3, 0.25, -4, -1);     // negative capacities: unknown
  const auto room = roomsOf(*d, {roomTelemetry(0, 3, 0.25), stale, invalid, broken});
  EXPECT_EQ(room[0].slots, 5.0);  // the slot term's 8
  EXPECT_EQ(room[0].kvTokens, kInf);
  EXPECT_EQ(room[1].slots, 0.0);
  EXPECT_EQ(room[1].kvTokens, 0.0);
  EXPECT_EQ(room[2].slots, 0.0);
  EXPECT_EQ(room[2].kvTokens, 0.0);
  EXPECT_EQ(room[3].slots, 5.0);
  EXPECT_EQ(room[3].kvTokens, kInf);
  // More running than slots: no room, never negative.
  EXPECT_EQ(roomsOf(*d, {roomTelemetry(0, 12, 0.25)})[0].slots, 0.0);
}

TEST(DetectorRoomTest, ConcurrencyCountsWhatItsModeCounts) {
  Endpoint e;
  e.inFlightRequests = 10;
  e.inFlightTokens = 30000;
  Endpoint bad;
  bad.inFlightRequests = -1;
  const std::vector<Endpoint> pool{e, bad};
  auto requests = ConcurrencyDetector::create({.maxConcurrency = 16}).value();
  auto tokens =
      ConcurrencyDetector::create({.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 32768})
          .value();
  auto hybrid =
      ConcurrencyDetector::create(
          {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 16, .maxTokenConcurrency = 32768})
          .value();
  const auto r = roomsOf(*requests, pool);
  EXPECT_EQ(r[0].slots, 6.0);
  EXPECT_EQ(r[0].kvTokens, kInf);
  const auto t = roomsOf(*tokens, pool);
  EXPECT_EQ(t[0].slots, kInf);
  EXPECT_EQ(t[0].kvTokens, 2768.0);
  const auto h = roomsOf(*hybrid, pool);
  EXPECT_EQ(h[0].slots, 6.0);
  EXPECT_EQ(h[0].kvTokens, 2768.0);
  for (const auto& room : {r, t, h}) {
    EXPECT_EQ(room[1].slots, 0.0);
    EXPECT_EQ(room[1].kvTokens, 0.0);
  }
  // Over capacity: no room, never negative.
  e.inFlightTokens = 40000;
  EXPECT_EQ(roomsOf(*hybrid, {e})[0].kvTokens, 0.0);
}

TEST(DetectorRoomTest, RoomWritesAtMostTheOutputSpan) {
  auto d = ConcurrencyDetector::create({.maxConcurrency = 4}).value();
  const std::vector<Endpoint> pool(3);
  std::vector<EndpointRoom> out(2, EndpointRoom{-1.0, -1.0});
  EXPECT_TRUE(d->room(pool, kRoomNow, out));
  EXPECT_EQ(out[1].slots, 4.0);
  EXPECT_TRUE(d->room({}, kRoomNow, {}));
}

TEST(DetectorRoomTest, TheLedgerFillsTheCapacityItKnows) {
  DispatchLedger ledger;
  const EndpointId configured = ledger.registerEndpoint(
      "a", EndpointCapacity{.maxRunningRequests = 16, .kvCapacityTokens = 32768});
  const EndpointId learnt = ledger.registerEndpoint("b");
  ASSERT_TRUE(ledger.installScrape(
      learnt, Scrape{.updateTime = kRoomNow, .waitingQueueSize = 0, .runningRequests = 5}));
  std::vector<Endpoint> pool(2);
  const std::vector<EndpointId> ids{configured, learnt};
  ledger.fill(pool, ids);
  EXPECT_EQ(pool[0].maxRunningRequests, 16);
  EXPECT_EQ(pool[0].kvCapacityTokens, 32768);
  EXPECT_EQ(pool[1].maxRunningRequests, 5);  // the observed slot count
  EXPECT_EQ(pool[1].kvCapacityTokens, 0);    // unknown
  ASSERT_TRUE(ledger.removeEndpoint(configured));
  ledger.fill(pool, ids);
  EXPECT_EQ(pool[0].maxRunningRequests, 0);
  EXPECT_EQ(pool[0].kvCapacityTokens, 0);
}

}  // namespace
}  // namespace holdback
