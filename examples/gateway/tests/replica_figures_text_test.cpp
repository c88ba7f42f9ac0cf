// The replica sync's text form of the restoration figures (replica_figures_text.hpp): what one
// replica writes another reads back, on another host's clock, and any other text a peer or an
// operator leaves in Redis is rejected with its reason.
#include "replica_figures_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace holdback::gateway {
namespace {

// The wall clock "now" of the tests below: the figures' times are checked against it.
constexpr double kNow = 1.7e9 + 1000.0;

RejectReason rejected(std::string_view text, double now = kNow) {
  ReplicaRestoreFigures read;
  RejectReason why{};
  EXPECT_FALSE(parseRestoreFigures(text, 1.7e9, now, read, why)) << "taken: " << text;
  return why;
}

TEST(ReplicaFiguresText, RoundTripsAcrossHostsClocks) {
  ReplicaRestoreFigures mine{2.5, 40.0, 3.0, 64.0};
  mine.victimLists = 1.0;
  mine.addVictim(1000.25);
  mine.addVictim(1000.5);
  mine.addHead(-1, 990.0);
  mine.addHead(100, 999.75);
  // Written on a host whose steady clock is 1.7e9 s behind the wall clock, read on one whose
  // steady clock is 1.7e9 + 50 s behind: the same wall instants, 50 s later on the reader's clock.
  const std::string text = formatRestoreFigures(mine, 1.7e9);
  ReplicaRestoreFigures read;
  RejectReason why{};
  ASSERT_TRUE(parseRestoreFigures(text, 1.7e9 + 50.0, kNow, read, why))
      << text << ": " << toString(why);
  EXPECT_EQ(read.protectedArrivalRate, 2.5);
  EXPECT_EQ(read.completionRate, 40.0);
  EXPECT_EQ(read.pendingRevocations, 3.0);
  EXPECT_EQ(read.leases, 64.0);
  EXPECT_EQ(read.victimLists, 1.0);
  ASSERT_EQ(read.victimCount, 2u);
  EXPECT_NEAR(read.victimDispatchTimes[0], 1000.5 - 50.0, 1e-6);  // youngest first
  EXPECT_NEAR(read.victimDispatchTimes[1], 1000.25 - 50.0, 1e-6);
  ASSERT_EQ(read.headsUsed(), 2u);  // the queue heads, moved to the reader's clock alike
  ASSERT_TRUE(read.headOf(-1).has_value());
  EXPECT_NEAR(*read.headOf(-1), 990.0 - 50.0, 1e-6);
  ASSERT_TRUE(read.headOf(100).has_value());
  EXPECT_NEAR(*read.headOf(100), 999.75 - 50.0, 1e-6);
  EXPECT_FALSE(read.headOf(0).has_value());
}

TEST(ReplicaFiguresText, TheFourFiguresAloneReadAsNoVictimList) {
  ReplicaRestoreFigures read;
  RejectReason why{};
  ASSERT_TRUE(parseRestoreFigures("1 2 3 4", 0.0, kNow, read, why));
  EXPECT_EQ(read.leases, 4.0);
  EXPECT_EQ(read.victimLists, 0.0);
  EXPECT_EQ(read.victimCount, 0u);
  ASSERT_TRUE(parseRestoreFigures("1 2 3 4 0 0 0", 0.0, kNow, read, why));  // nothing listed
  EXPECT_EQ(read.headsUsed(), 0u);
}

// Whatever a peer (or anyone who can write to Redis) leaves in the field is rejected whole unless
// it is what a replica writes: nothing of it reaches the figures the replicas sum.
TEST(ReplicaFiguresText, HostileTextIsRejectedWhole) {
  EXPECT_EQ(rejected(""), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1 2 three 4"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1 2 3"), RejectReason::kMalformed);
  EXPECT_EQ(rejected(" 1 2 3 4"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1  2 3 4"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1 2 3 4 "), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1 2 3 4\n"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("0x10 2 3 4"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("+1 2 3 4"), RejectReason::kMalformed);
  // Not finite, negative, beyond any replica's figures.
  EXPECT_EQ(rejected("nan 1 1 1"), RejectReason::kNotFinite);
  EXPECT_EQ(rejected("1 inf 1 1"), RejectReason::kNotFinite);
  EXPECT_EQ(rejected("1 1 -5 1"), RejectReason::kNegative);
  EXPECT_EQ(rejected("1 1 1 1e400"), RejectReason::kOutOfRange);
  EXPECT_EQ(rejected("1 1 1 2e9"), RejectReason::kOutOfRange);
  EXPECT_EQ(rejected("1 1 1 1 2 0 0"), RejectReason::kOutOfRange);  // victim lists: 0 or 1
  // A list cut short, a count beyond kVictims, extra tokens.
  EXPECT_EQ(rejected("1 1 1 1 1 3 1700000999.5"), RejectReason::kMalformed);
  EXPECT_EQ(rejected("1 1 1 1 1 4294967295 1700000999.5"), RejectReason::kTooMany);
  EXPECT_EQ(rejected("1 1 1 1 1 99999999999999999999999"), RejectReason::kOutOfRange);
  EXPECT_EQ(rejected("1 1 1 1 1 -1"), RejectReason::kNegative);
  EXPECT_EQ(rejected("1 1 1 1 1 1 1700000999.5 0 7"), RejectReason::kMalformed);
  std::string many = "1 1 1 1 1 40";
  for (int i = 0; i < 40; ++i) many += " 1700000999.5";
  EXPECT_EQ(rejected(many), RejectReason::kTooMany);
  // Queue heads: more than kHeads, a priority beyond 32 bits, a NaN time, pairs cut short.
  std::string heads = "1 1 1 1 1 0 12";
  for (int prio = 0; prio < 12; ++prio) heads += " " + std::to_string(prio) + " 1700000999.5";
  EXPECT_EQ(rejected(heads), RejectReason::kTooMany);
  EXPECT_EQ(rejected("1 1 1 1 1 0 1 4294967296 1700000999.5"), RejectReason::kOutOfRange);
  EXPECT_EQ(rejected("1 1 1 1 1 0 1 10 nan"), RejectReason::kNotFinite);
  EXPECT_EQ(rejected("1 1 1 1 1 0 2 10 1700000999.5"), RejectReason::kMalformed);
  // Longer than any replica writes.
  EXPECT_EQ(rejected("1 1 1 1" + std::string(3000, '0')), RejectReason::kTooLong);
}

// A queue head enqueued in 1970 (or a day ago, or next year) is no replica's: taken, it would
// make every replica leave its dispatches of that band to a replica that does not exist.
TEST(ReplicaFiguresText, TimesFarFromNowAreRejected) {
  EXPECT_EQ(rejected("1 1 1 1 0 0 1 10 0"), RejectReason::kTime);
  EXPECT_EQ(rejected("1 1 1 1 0 0 1 10 -1e300"), RejectReason::kTime);
  EXPECT_EQ(rejected("1 1 1 1 1 1 1e300"), RejectReason::kTime);
  const double dayAgo = kNow - ReplicaInputLimits::kMaxTimeBehind - 1.0;
  const double ahead = kNow + ReplicaInputLimits::kMaxTimeAhead + 1.0;
  EXPECT_EQ(rejected("1 1 1 1 0 0 1 10 " + std::to_string(dayAgo)), RejectReason::kTime);
  EXPECT_EQ(rejected("1 1 1 1 0 0 1 10 " + std::to_string(ahead)), RejectReason::kTime);
  EXPECT_EQ(rejected("1 1 1 1 1 1 " + std::to_string(ahead)), RejectReason::kTime);
  // Within the window: taken.
  ReplicaRestoreFigures read;
  RejectReason why{};
  EXPECT_TRUE(parseRestoreFigures(
      "1 1 1 1 1 1 " + std::to_string(kNow - 3600.0) + " 1 10 " + std::to_string(kNow + 30.0),
      1.7e9, kNow, read, why))
      << toString(why);
}

// What this replica publishes is always what the others take, even from figures a bug or an
// overflow left out of range.
TEST(ReplicaFiguresText, OwnOddFiguresAreWrittenWithinTheBounds) {
  ReplicaRestoreFigures odd{std::numeric_limits<double>::quiet_NaN(), 1e300, -4.0,
                            std::numeric_limits<double>::infinity()};
  odd.victimLists = 7.0;
  const std::string text = formatRestoreFigures(odd, 1.7e9);
  ReplicaRestoreFigures read;
  RejectReason why{};
  ASSERT_TRUE(parseRestoreFigures(text, 1.7e9, kNow, read, why)) << text << ": " << toString(why);
  EXPECT_EQ(read.protectedArrivalRate, 0.0);
  EXPECT_EQ(read.completionRate, ReplicaInputLimits::kMaxFigure);
  EXPECT_EQ(read.pendingRevocations, 0.0);
  EXPECT_EQ(read.leases, ReplicaInputLimits::kMaxFigure);
  EXPECT_EQ(read.victimLists, 1.0);
}

// Summed over the most replicas a store reads, figures at their bounds stay finite.
TEST(ReplicaFiguresText, SumsOfBoundedFiguresStayFinite) {
  ReplicaRestoreFigures top{ReplicaInputLimits::kMaxFigure, ReplicaInputLimits::kMaxFigure,
                            ReplicaInputLimits::kMaxFigure, ReplicaInputLimits::kMaxFigure};
  ReplicaRestoreFigures sum;
  for (std::size_t i = 0; i < ReplicaInputLimits::kMaxReplicas; ++i) sum += top;
  EXPECT_TRUE(std::isfinite(sum.leases));
  EXPECT_EQ(sum.leases, ReplicaInputLimits::kMaxFigure * ReplicaInputLimits::kMaxReplicas);
}

}  // namespace
}  // namespace holdback::gateway
