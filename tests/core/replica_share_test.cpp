// ReplicaTurn: the one rule of which replica has the turn or takes a remainder, on the clock the
// replicas share.
#include "holdback/core/replica_share.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace holdback {
namespace {

using namespace std::chrono_literals;

// Two hours into the controller's clock: step 72000 of ReplicaTurn::kStep (even).
const TimePoint kTurnEpoch = TimePoint{} + 2h;
constexpr Duration kStep = ReplicaTurn::kStep;

TEST(ReplicaTurnTest, OneReplicaAtATimeHasTheTurnOnEachEndpointAndEachGetsItInTurn) {
  for (const std::int64_t replicas : {2, 3, 4, 8}) {
    for (std::size_t endpoint = 0; endpoint < 10; ++endpoint) {
      std::vector<int> turns(static_cast<std::size_t>(replicas), 0);
      for (std::int64_t step = 0; step < replicas; ++step) {
        const TimePoint now = kTurnEpoch + step * kStep + 37ms;
        int holders = 0;
        for (std::int64_t rank = 0; rank < replicas; ++rank) {
          if (ReplicaTurn{rank, replicas, Duration::zero()}.hasTurn(endpoint, now)) {
            ++holders;
            ++turns[static_cast<std::size_t>(rank)];
          }
        }
        EXPECT_EQ(holders, 1) << replicas << " replicas, endpoint " << endpoint;
      }
      for (const int t : turns) EXPECT_EQ(t, 1) << replicas << " replicas, endpoint " << endpoint;
    }
    // At one time, the replicas hold the turns of consecutive endpoints in turn.
    for (std::int64_t rank = 0; rank < replicas; ++rank) {
      int held = 0;
      for (std::size_t endpoint = 0; endpoint < static_cast<std::size_t>(replicas); ++endpoint) {
        held += ReplicaTurn{rank, replicas, Duration::zero()}.hasTurn(endpoint, kTurnEpoch) ? 1 : 0;
      }
      EXPECT_EQ(held, 1) << rank;
    }
  }
}

TEST(ReplicaTurnTest, TheTurnStepsOnTheSharedClock) {
  // Two replicas whose controllers' clocks differ by 250 ms, each told the offset to a clock
  // they share: they agree on whose turn it is at every shared instant.
  const Duration ahead = 250ms;
  for (int k = 0; k < 40; ++k) {
    const TimePoint mine = kTurnEpoch + k * 10ms;
    const TimePoint theirs = mine + ahead;  // the same instant on the other replica's clock
    const bool a = ReplicaTurn{0, 2, ahead}.hasTurn(0, mine);
    const bool b = ReplicaTurn{1, 2, Duration::zero()}.hasTurn(0, theirs);
    EXPECT_NE(a, b) << k;
  }
  // An offset of one step hands the turn to the next rank.
  EXPECT_TRUE((ReplicaTurn{0, 4, Duration::zero()}.hasTurn(0, kTurnEpoch)));
  EXPECT_TRUE((ReplicaTurn{3, 4, kStep}.hasTurn(0, kTurnEpoch)));
}

TEST(ReplicaTurnTest, FewReplicasAndBadInputHaveDocumentedAnswers) {
  // Fewer than two replicas: always this replica's turn; a rank outside [0, R): never.
  EXPECT_TRUE((ReplicaTurn{0, 1, Duration::zero()}.hasTurn(3, kTurnEpoch)));
  EXPECT_TRUE((ReplicaTurn{5, 0, Duration::zero()}.hasTurn(3, kTurnEpoch)));
  EXPECT_TRUE((ReplicaTurn{0, -2, Duration::zero()}.hasTurn(3, kTurnEpoch)));
  EXPECT_FALSE((ReplicaTurn{-1, 2, Duration::zero()}.hasTurn(0, kTurnEpoch)));
  EXPECT_FALSE((ReplicaTurn{2, 2, Duration::zero()}.hasTurn(0, kTurnEpoch)));
  // Extreme clocks and offsets (no overflow: the sanitizer build runs this) still give every
  // endpoint exactly one holder.
  const TimePoint times[] = {TimePoint::min(), TimePoint::max(), TimePoint{}, TimePoint{} - 1ns};
  const Duration offsets[] = {Duration::min(), Duration::max(), Duration::zero(), -kStep};
  for (const TimePoint now : times) {
    for (const Duration offset : offsets) {
      for (const std::size_t endpoint : {std::size_t{0}, std::size_t{7}, SIZE_MAX}) {
        int holders = 0;
        for (std::int64_t rank = 0; rank < 3; ++rank) {
          holders += ReplicaTurn{rank, 3, offset}.hasTurn(endpoint, now) ? 1 : 0;
        }
        EXPECT_EQ(holders, 1);
      }
    }
  }
}

TEST(ReplicaTurnTest, PartsSumToTheWholeAndTheRemainderMovesWithTheTurn) {
  for (const std::int64_t replicas : {2, 3, 4, 8}) {
    for (const std::uint64_t n : {0u, 1u, 3u, 7u, 8u, 13u}) {
      std::vector<std::uint64_t> over(static_cast<std::size_t>(replicas), 0);
      for (std::int64_t step = 0; step < replicas; ++step) {
        const TimePoint now = kTurnEpoch + step * kStep + 11ms;
        std::uint64_t sum = 0;
        for (std::int64_t rank = 0; rank < replicas; ++rank) {
          const std::uint64_t part = ReplicaTurn{rank, replicas}.part(n, 5, now);
          EXPECT_GE(part, n / static_cast<std::uint64_t>(replicas));
          EXPECT_LE(part, n / static_cast<std::uint64_t>(replicas) + 1);
          sum += part;
          over[static_cast<std::size_t>(rank)] += part - n / static_cast<std::uint64_t>(replicas);
        }
        EXPECT_EQ(sum, n) << replicas << " replicas, " << n;
      }
      // Over R steps each replica took the remainder's units equally often.
      for (const std::uint64_t o : over) {
        EXPECT_EQ(o, n % static_cast<std::uint64_t>(replicas)) << replicas << " replicas, " << n;
      }
    }
  }
  // The replica that has the turn takes the first unit of a remainder.
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const ReplicaTurn turn{rank, 4};
    EXPECT_EQ(turn.part(1, 2, kTurnEpoch) == 1, turn.hasTurn(2, kTurnEpoch)) << rank;
  }
  // One replica takes everything; a rank outside [0, R) nothing.
  EXPECT_EQ((ReplicaTurn{0, 1}.part(7, 0, kTurnEpoch)), 7u);
  EXPECT_EQ((ReplicaTurn{4, 4}.part(7, 0, kTurnEpoch)), 0u);
  EXPECT_EQ((ReplicaTurn{-1, 4}.part(7, 0, kTurnEpoch)), 0u);
}

TEST(ReplicaTurnTest, TheShareCarriesItsTurn) {
  ReplicaShare share;
  share.rank = 2;
  share.replicas = 3;
  share.clockOffset = 40ms;
  const ReplicaTurn turn = share.turn();
  EXPECT_EQ(turn.rank, 2);
  EXPECT_EQ(turn.replicas, 3);
  EXPECT_EQ(turn.clockOffset, 40ms);
}

}  // namespace
}  // namespace holdback
