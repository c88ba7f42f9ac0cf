// detail::ReplicaCoordinator (flow/detail/replica_coordinator.hpp): what an installed share
// decides. Internal: enter through the public header (its -inl includes the detail -inl files).
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/replica_coordinator.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <optional>

namespace holdback {
namespace {

using namespace std::chrono_literals;
using detail::ReplicaCoordinator;
using Past = PoolPressureSampler::PastThreshold;

ReplicaShare shareOf(std::int64_t rank, std::int64_t replicas, bool feed) {
  ReplicaShare s;
  s.rank = rank;
  s.replicas = replicas;
  s.pooledArrivals = feed;
  return s;
}

TEST(ReplicaCoordinatorTest, TheSamplersRuleFollowsTheShare) {
  ReplicaCoordinator c;
  EXPECT_EQ(c.install(std::nullopt).mode, Past::kDetector);  // one gateway
  const ReplicaCoordinator::PastThresholdSetting turn = c.install(shareOf(2, 3, true));
  EXPECT_EQ(turn.mode, Past::kTurn);
  EXPECT_EQ(turn.turn.rank, 2);
  EXPECT_EQ(turn.turn.replicas, 3);
  EXPECT_TRUE(c.shared());
  EXPECT_EQ(c.install(shareOf(0, 3, false)).mode, Past::kNone);  // no feed
  EXPECT_EQ(c.install(std::nullopt).mode, Past::kNone);          // the store failed
  EXPECT_FALSE(c.shared());
  EXPECT_EQ(c.install(shareOf(0, 1, true)).mode, Past::kDetector);  // one replica
  EXPECT_EQ(c.install(std::nullopt).mode, Past::kDetector);
  // A rank outside [0, R) shares nothing, but the sampler still keeps to its turn rule.
  EXPECT_EQ(c.install(shareOf(3, 3, true)).mode, Past::kTurn);
  EXPECT_FALSE(c.shared());
}

TEST(ReplicaCoordinatorTest, TheRestorationPartsOfTheReplicasSumToThePoolsNeed) {
  const TimePoint now = TimePoint{} + 1h + 250ms;
  for (std::size_t need = 0; need < 9; ++need) {
    std::size_t sum = 0;
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      ReplicaCoordinator c;
      (void)c.install(shareOf(rank, 4, false));
      sum += c.restorationPart(need, now);
    }
    EXPECT_EQ(sum, need);
  }
  ReplicaCoordinator alone;
  EXPECT_EQ(alone.restorationPart(5, now), 5u);
}

TEST(ReplicaCoordinatorTest, OthersFiguresAreSanitizedAndTheTurnoverIsThePools) {
  ReplicaShare s = shareOf(0, 2, false);
  s.others.leases = -3.0;
  s.others.completionRate = 6.0;
  s.others.protectedArrivalRate = std::numeric_limits<double>::infinity();
  ReplicaCoordinator c;
  (void)c.install(s);
  EXPECT_EQ(c.others(&ReplicaRestoreFigures::leases), 0.0);
  EXPECT_EQ(c.others(&ReplicaRestoreFigures::protectedArrivalRate), 0.0);
  EXPECT_EQ(c.poolCompletionRate(2.0), 4.0);  // (2 + 6) / 2 replicas
  s.pooledArrivals = true;
  (void)c.install(s);
  EXPECT_EQ(c.poolCompletionRate(2.0), 8.0);  // each replica's demand counts the pool's
  EXPECT_FALSE(ReplicaCoordinator{}.poolCompletionRate(2.0).has_value());
}

TEST(ReplicaCoordinatorTest, AReplicaYieldsToAnOlderHeadOnTheFeedOnly) {
  ReplicaShare s = shareOf(0, 2, true);
  const TimePoint mine = TimePoint{} + 1h;
  s.others.addHead(7, ReplicaRestoreFigures::secondsOf(mine - 300ms));
  ReplicaCoordinator c;
  (void)c.install(s);
  EXPECT_TRUE(c.yieldsTo(7, mine));           // theirs waited 300 ms longer: over the 100 ms
  EXPECT_FALSE(c.yieldsTo(7, mine - 250ms));  // 50 ms: within the tolerance
  EXPECT_FALSE(c.yieldsTo(8, mine));          // no head of that band
  s.pooledArrivals = false;
  (void)c.install(s);
  EXPECT_FALSE(c.yieldsTo(7, mine));  // without the feed the ledger's split shares the room
}

}  // namespace
}  // namespace holdback
