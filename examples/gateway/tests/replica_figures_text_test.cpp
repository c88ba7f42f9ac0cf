// The replica sync's text form of the restoration figures (replica_figures_text.hpp): what one
// replica writes another reads back, on another host's clock, and any text a peer or an
// operator leaves in Redis reads without harm.
#include "replica_figures_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace holdback::gateway {
namespace {

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
  ASSERT_TRUE(parseRestoreFigures(text, 1.7e9 + 50.0, read)) << text;
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
  ASSERT_TRUE(parseRestoreFigures("1 2 3 4", 0.0, read));
  EXPECT_EQ(read.leases, 4.0);
  EXPECT_EQ(read.victimLists, 0.0);
  EXPECT_EQ(read.victimCount, 0u);
}

TEST(ReplicaFiguresText, HostileTextReadsWithoutHarm) {
  ReplicaRestoreFigures read;
  EXPECT_FALSE(parseRestoreFigures("", 0.0, read));
  EXPECT_FALSE(parseRestoreFigures("1 2 three 4", 0.0, read));
  // NaN, infinities and negatives read as 0; a count beyond the times present keeps those read;
  // a count beyond the list's size reads kVictims at most.
  ASSERT_TRUE(parseRestoreFigures("nan inf -5 1e400 1 3 10.5", 0.0, read));
  EXPECT_EQ(read.protectedArrivalRate, 0.0);
  EXPECT_EQ(read.completionRate, 0.0);
  EXPECT_EQ(read.pendingRevocations, 0.0);
  EXPECT_EQ(read.leases, 0.0);
  ASSERT_EQ(read.victimCount, 1u);
  EXPECT_EQ(read.victimDispatchTimes[0], 10.5);
  std::string many = "1 1 1 1 1 4294967295";
  for (int i = 0; i < 40; ++i) many += " " + std::to_string(i);
  ASSERT_TRUE(parseRestoreFigures(many, 0.0, read));
  EXPECT_EQ(read.victimCount, ReplicaRestoreFigures::kVictims);
  EXPECT_EQ(read.victimDispatchTimes[0], 15.0);  // the first kVictims read, youngest first
  ASSERT_TRUE(parseRestoreFigures("1 1 1 1 1 2 nan", 0.0, read));
  ASSERT_EQ(read.victimCount, 1u);
  EXPECT_TRUE(std::isfinite(read.victimDispatchTimes[0]));  // a NaN time counts as the oldest
  // Queue heads: a NaN or infinite enqueue time is dropped (no replica yields to it), a count
  // beyond the pairs present keeps those read, and of more than kHeads priorities the highest
  // kHeads are kept.
  ASSERT_TRUE(parseRestoreFigures("1 1 1 1 1 1 5.0 9 -1 nan 7 inf 50 12.5", 0.0, read));
  EXPECT_EQ(read.headsUsed(), 1u);
  ASSERT_TRUE(read.headOf(50).has_value());
  EXPECT_EQ(*read.headOf(50), 12.5);
  EXPECT_FALSE(read.headOf(-1).has_value());
  std::string heads = "1 1 1 1 1 0 12";
  for (int prio = 0; prio < 12; ++prio) heads += " " + std::to_string(prio) + " 3.5";
  ASSERT_TRUE(parseRestoreFigures(heads, 0.0, read));
  EXPECT_EQ(read.headsUsed(), ReplicaRestoreFigures::kHeads);
  EXPECT_FALSE(read.headOf(0).has_value());  // 12 priorities: 0-3 displaced by 4-11
  ASSERT_TRUE(read.headOf(11).has_value());
  EXPECT_EQ(*read.headOf(11), 3.5);
}

}  // namespace
}  // namespace holdback::gateway
