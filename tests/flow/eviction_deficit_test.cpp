// The eviction deficits (flow/detail/eviction_deficit.hpp): pure functions of a snapshot, and
// the Poisson reserve they share with the reservation policy (policy/poisson_reserve.hpp).
// Internal: enter through the public header (its -inl includes the detail -inl files).
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/eviction_deficit.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "holdback/policy/poisson_reserve.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using detail::BurstMemory;
using detail::ReserveDeficit;
using detail::ReserveSnapshot;

TEST(EvictionDeficitTest, HeadOfLineIsTheSaturationOverTheCeilingLessWhatIsPending) {
  const detail::HeadOfLineDeficit d = detail::headOfLineDeficit(0.9, 0.6, 0.1);
  EXPECT_NEAR(d.target, 0.3, 1e-12);
  EXPECT_NEAR(d.net, 0.2, 1e-12);
}

TEST(EvictionDeficitTest, TheReserveDeficitFollowsItsFormula) {
  // u = 0.05 per request; the victim band 10 requests over its ceiling; 2 requests free for the
  // top band; lambda T = 4 arrivals: r(4, 1%) = 10; releases 2/s x 1 s; 1 pending.
  ReserveSnapshot in;
  in.saturation = 0.9;
  in.unit = 0.05;
  in.topCeiling = 1.0;
  in.victimCeiling = 0.4;
  in.arrivalRate = 4.0;
  in.completionRate = 2.0;
  in.pending = 1.0;
  in.leadSeconds = 1.0;
  in.epsilon = 0.01;
  const std::optional<ReserveDeficit> d = detail::reserveDeficit(in);
  ASSERT_TRUE(d.has_value());
  const double wanted = poissonReserve(4.0, 0.01, inverseNormal(0.99));
  EXPECT_EQ(wanted, 10.0);
  EXPECT_NEAR(d->target, std::min(10.0, wanted - 2.0) - 2.0, 1e-9);
  EXPECT_NEAR(d->deficit, d->target - 1.0, 1e-12);
  // At most the requests over the victim band's ceiling.
  in.victimCeiling = 0.8;  // 2 requests over it
  EXPECT_NEAR(detail::reserveDeficit(in)->target, 2.0 - 2.0, 1e-9);
  // Within its ceiling: nothing to restore.
  in.victimCeiling = 0.9;
  EXPECT_FALSE(detail::reserveDeficit(in).has_value());
}

TEST(EvictionDeficitTest, TheEvictorAndTheReservationPolicyShareOnePoissonReserve) {
  for (const double eps : {0.001, 0.01, 0.1, 0.5}) {
    const double z = inverseNormal(1.0 - eps);
    EXPECT_EQ(z, ReservationPolicy::inverseNormal(1.0 - eps));
    for (const double a : {-1.0, 0.0, 0.5, 4.0, 29.9, 30.1, 200.0}) {
      EXPECT_EQ(poissonReserve(a, eps, z), ReservationPolicy::poissonReserve(a, eps, z)) << a;
    }
  }
  EXPECT_EQ(poissonReserve(std::nan(""), 0.01, 2.0), 1.0);
}

TEST(EvictionDeficitTest, ReleaseChanceIsDueByTheMeanThenMemoryless) {
  EXPECT_EQ(detail::releaseChance(0.0, 1.0, 1.0), 0.0);  // not measured
  EXPECT_EQ(detail::releaseChance(2.0, 0.5, 1.0), 0.0);  // due at 2 s, horizon ends at 1.5 s
  EXPECT_EQ(detail::releaseChance(2.0, 1.5, 1.0), 1.0);  // due within the horizon
  EXPECT_NEAR(detail::releaseChance(2.0, 3.0, 1.0), 1.0 - std::exp(-0.5), 1e-12);  // overdue
}

TEST(EvictionDeficitTest, BurstMemoryKeepsTheDecayedPeak) {
  BurstMemory m;
  const TimePoint t0 = TimePoint{} + 1h;
  EXPECT_EQ(m.remember(t0, 50.0, 0s), 50.0);  // off: the rate as it is
  EXPECT_EQ(m.remember(t0, 100.0, 10s), 100.0);
  EXPECT_NEAR(m.remember(t0 + 10s, 1.0, 10s), 100.0 * std::exp(-1.0), 1e-9);
  EXPECT_EQ(m.remember(t0 + 10s, 80.0, 10s), 80.0);  // above the decayed peak: the new peak
}

}  // namespace
}  // namespace holdback
