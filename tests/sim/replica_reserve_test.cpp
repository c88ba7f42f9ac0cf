// Reserve mode in the simulator (pool.replicaMode: reserve; docs/design/replicas.md): the
// scenario keys and their errors, the gateway's sync and feed defaults, determinism, and the
// property the mode exists for: no endpoint ever holds more requests than its slots (no request
// waits on a server behind another), where share mode's replicas overfill it; the pool's reserve
// and each band's room kept at the table, freed slots seen at the gate and booked before the next
// scrape, and no parked request revoked.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "sim/arm_lookup.hpp"
#include "sim/replica_reserve.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {
namespace {

Scenario reserveScenario(ReplicaMode mode) {
  Scenario s = defaultScenario();
  s.detector = DetectorKind::kUtilization;
  s.pool.gatewayReplicas = 4;
  s.pool.replicaSyncIntervalMs = 20.0;
  s.pool.replicaFeed = true;
  s.pool.replicaMode = mode;
  s.durationSeconds = 30.0;
  s.drainSeconds = 5.0;
  s.seed = 2;
  return s;
}

TEST(ReplicaReserveSimTest, KeysParseWithTheGatewayDefaults) {
  auto doc = config::parseDocument(
      "pool: {gatewayReplicas: 4, replicaMode: reserve, replicaReserveRttMs: 0.5, "
      "replicaReserveRetryMs: 2}");
  ASSERT_TRUE(doc.ok()) << doc.diagnostics().toString();
  const auto s = parseScenario(doc->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_EQ(s->pool.replicaMode, ReplicaMode::kReserve);
  EXPECT_EQ(s->pool.replicaReserveRttMs, 0.5);
  EXPECT_EQ(s->pool.replicaReserveRetryMs, 2.0);
  EXPECT_EQ(s->pool.replicaSyncIntervalMs, kGatewayReplicaSyncMs);  // not set: the gateway's
  EXPECT_TRUE(s->pool.replicaFeed);
  // Share stays the default, and leaves the sync and feed as they were.
  auto share = config::parseDocument("pool: {gatewayReplicas: 4, replicaMode: share}");
  ASSERT_TRUE(share.ok());
  const auto shared = parseScenario(share->json);
  ASSERT_TRUE(shared.ok()) << shared.diagnostics().toString();
  EXPECT_EQ(shared->pool.replicaMode, ReplicaMode::kShare);
  EXPECT_EQ(shared->pool.replicaSyncIntervalMs, 0.0);
  EXPECT_FALSE(shared->pool.replicaFeed);
  EXPECT_EQ(defaultScenario().pool.replicaMode, ReplicaMode::kShare);
  // An explicit sync interval is kept.
  auto synced = config::parseDocument("pool: {replicaMode: reserve, replicaSyncIntervalMs: 5}");
  ASSERT_TRUE(synced.ok());
  EXPECT_EQ(parseScenario(synced->json)->pool.replicaSyncIntervalMs, 5.0);
}

TEST(ReplicaReserveSimTest, BadValuesNameThePathTheValueAndWhatIsAllowed) {
  auto bad = config::parseDocument(
      R"({"pool": {"replicaMode": "lock", "replicaReserveRttMs": -1, "replicaReserveRetryMs": 0}})");
  ASSERT_TRUE(bad.ok());
  const auto s = parseScenario(bad->json);
  ASSERT_FALSE(s.ok());
  const std::string errors = s.diagnostics().toString();
  for (const char* want : {"/pool/replicaMode", "lock", "share", "reserve",
                           "/pool/replicaReserveRttMs", "/pool/replicaReserveRetryMs"}) {
    EXPECT_NE(errors.find(want), std::string::npos) << want << "\n" << errors;
  }
}

// share mode's static-1.0 reaches a server queue of several requests (a request waits on its
// server behind others); in reserve mode the largest is 1 (counted as a request joins the queue,
// before its server takes it): every request on a server holds one of its slots in the table.
TEST(ReplicaReserveSimTest, ReserveNeverOverbooksAnEndpointWhereShareDoes) {
  const ArmResult share = runTestArm(reserveScenario(ReplicaMode::kShare), "static-1.0");
  const ArmResult reserve = runTestArm(reserveScenario(ReplicaMode::kReserve), "static-1.0");
  EXPECT_GT(share.maxServerQueue, 1u);
  EXPECT_LE(reserve.maxServerQueue, 1u);
  const ArmResult recommended = runTestArm(reserveScenario(ReplicaMode::kReserve), "recommended");
  EXPECT_LE(recommended.maxServerQueue, 1u);
  // The pool is still used: static-1.0 keeps it about as loaded as share mode does.
  EXPECT_GT(reserve.poolLoadMean, 0.9 * share.poolLoadMean);
}

TEST(ReplicaReserveSimTest, ReserveRunIsDeterministic) {
  Scenario s = reserveScenario(ReplicaMode::kReserve);
  s.durationSeconds = 15.0;
  const std::vector<ArmResult> first{runTestArm(s, "recommended")};
  const std::vector<ArmResult> second{runTestArm(s, "recommended")};
  EXPECT_EQ(formatTable(s, first), formatTable(s, second));
  EXPECT_EQ(first[0].maxServerQueue, second[0].maxServerQueue);
}

// One replica in reserve mode works alone (no sync renews its leases: they never end).
TEST(ReplicaReserveSimTest, OneReplicaInReserveMode) {
  Scenario s = reserveScenario(ReplicaMode::kReserve);
  s.pool.gatewayReplicas = 1;
  s.durationSeconds = 15.0;
  const ArmResult run = runTestArm(s, "static-1.0");
  EXPECT_LE(run.maxServerQueue, 1u);
  s.pool.replicaMode = ReplicaMode::kShare;
  const ArmResult alone = runTestArm(s, "static-1.0");
  EXPECT_GT(run.poolLoadMean, 0.9 * alone.poolLoadMean);
  EXPECT_GT(run.poolLoadMean, 0.0);
}

// A booking below the top class leaves the policy's fixed reserve free over the pool (the
// gateway's keepFree term). With no top-class traffic at all, 8 replicas' batch and standard
// requests never take the pool's free slots below the recommended arm's minReserve (6 of 64):
// without the term, replicas that each saw the reserve free spent it together (down to 1).
TEST(ReplicaReserveSimTest, BookingsBelowTheTopClassLeaveThePoolsReserveFree) {
  Scenario s = reserveScenario(ReplicaMode::kReserve);
  s.pool.gatewayReplicas = 8;
  s.classes.front().arrival = {.process = ArrivalProcess::kBacklog, .backlog = 0};  // none
  RunOptions series;
  series.collectSeries = true;
  const ArmResult run = runArm(s, testArm("recommended"), series);
  std::size_t checked = 0;
  for (const IntervalSample& sample : run.samples) {
    if (sample.time < 2.0 || sample.time >= s.durationSeconds) continue;  // filled by then
    std::int64_t free = 0;
    for (std::size_t i = 0; i < sample.running.size(); ++i) {
      free += s.pool.slots - static_cast<std::int64_t>(sample.running[i] + sample.serverQueue[i]);
    }
    EXPECT_GE(free, 6) << "at " << sample.time << " s";
    ++checked;
  }
  EXPECT_GT(checked, 200u);
  EXPECT_GT(run.poolLoadMean, 0.8);  // the rest of the pool is used
}

// A booking below the top class leaves free the room its band's ceiling keeps at the calling
// replica, (1 - ceiling) x the pool's slots rounded up, when that is more than the policy's fixed
// reserve: a request parked below the top band is booked only where its replica's gate would
// let it through now. With the fixed reserve alone, on short-bursts at 8 replicas the requests
// parked below the top band held the pool at 6 free slots where the batch band's ceiling kept 7.
TEST(ReplicaReserveSimTest, BookingsBelowTheTopClassKeepTheirBandsRoom) {
  using detail::bookingKeep;
  EXPECT_EQ(bookingKeep(6, std::nullopt, 64), 6);  // the band not in the policy's domain yet
  EXPECT_EQ(bookingKeep(6, 1.0, 64), 6);           // the ceiling keeps nothing: the fixed reserve
  EXPECT_EQ(bookingKeep(6, 1.0 - 7.0 / 64.0, 64), 7);
  EXPECT_EQ(bookingKeep(6, 1.0 - 7.0 / 64.0 + 1e-12, 64), 7);  // a hair off a whole request
  EXPECT_EQ(bookingKeep(6, 1.0 - 7.2 / 64.0, 64), 8);          // a part of one: all of it
  EXPECT_EQ(bookingKeep(6, 0.5, 64), 32);                      // minCeiling in a burst
  EXPECT_EQ(bookingKeep(0, 0.75, 64), 16);
  EXPECT_EQ(bookingKeep(6, std::nan(""), 64), 6);
  // At the table: 8 free slots over the pool leave 7 after the booking.
  ReservationTable table(2);
  const std::vector<ReservationRoom> rooms{{.slots = 16, .scrapedSlotsUsed = 12},
                                           {.slots = 16, .scrapedSlotsUsed = 12}};
  EXPECT_TRUE(detail::leavesPoolReserve(rooms, table, bookingKeep(6, 1.0 - 7.0 / 64.0, 64)));
  EXPECT_FALSE(detail::leavesPoolReserve(rooms, table, bookingKeep(6, 1.0 - 8.0 / 64.0, 64)));
}

// A parked request holds no slot, so restoration never revokes one (Ticket::setParked): with
// every replica's view credited, the replicas dispatch into each freed slot and the requests the
// table refuses stay parked as the youngest leases; without the filter restoration revoked them
// (25 of 60 revocations on default, seed 2, 30 s, 8 replicas), freeing nothing.
TEST(ReplicaReserveSimTest, RestorationRevokesNoParkedRequest) {
  Scenario s = reserveScenario(ReplicaMode::kReserve);
  s.pool.gatewayReplicas = 8;
  RunOptions records;
  records.collectSeries = true;  // the request records
  const ArmResult run = runArm(s, testArm("recommended"), records);
  std::size_t revoked = 0;
  std::size_t parked = 0;
  for (const RequestRecord& r : run.requests) {
    if (r.outcome != "revoked") continue;
    ++revoked;
    if (r.endpoint < 0) ++parked;  // revoked before any endpoint booked it
  }
  EXPECT_GT(revoked, 5u);  // restoration ran
  EXPECT_EQ(parked, 0u);
}

// In reserve mode the room a call carries to the table and the replica's view are its scrape
// less the requests that ended since (its own and the feed's): a freed slot is booked for a
// parked request, and seen at the replica's gate, before the next scrape. With a 1 s scrape,
// static-1.0 keeps 0.98 of the pool busy (0.74 with the views floored at the scrape) and never
// over-books an endpoint.
TEST(ReplicaReserveSimTest, FreedSlotsNeverOverbookBetweenSlowScrapes) {
  Scenario s = reserveScenario(ReplicaMode::kReserve);
  s.pool.gatewayReplicas = 2;
  s.pool.scrapeIntervalMs = 1000.0;
  const ArmResult run = runTestArm(s, "static-1.0");
  EXPECT_GT(run.poolLoadMean, 0.9);
  EXPECT_LE(run.maxServerQueue, 1u);
}

}  // namespace
}  // namespace holdback::sim
