#include "holdback/core/text.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

namespace holdback {
namespace {

using namespace std::chrono_literals;

TEST(FormatNumberTest, ShortestRoundTripWithADecimalPoint) {
  EXPECT_EQ(formatNumber(1.0), "1.0");
  EXPECT_EQ(formatNumber(0.1), "0.1");
  EXPECT_EQ(formatNumber(-2.5), "-2.5");
  EXPECT_EQ(formatNumber(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(formatNumber(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(formatNumber(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(JoinPathTest, EscapesTheAppendedToken) {
  EXPECT_EQ(joinPath("", "a"), "/a");
  EXPECT_EQ(joinPath("/x", "a/b~c"), "/x/a~1b~0c");
}

// One duration format across the library: Go style, the largest unit that keeps the number >= 1.
TEST(FormatDurationTest, GoStyleLargestUnit) {
  EXPECT_EQ(formatDuration(0s), "0s");
  EXPECT_EQ(formatDuration(1500ms), "1.5s");
  EXPECT_EQ(formatDuration(90s), "90s");
  EXPECT_EQ(formatDuration(200ms), "200ms");
  EXPECT_EQ(formatDuration(-250us), "-250us");
  EXPECT_EQ(formatDuration(7ns), "7ns");
  EXPECT_EQ(formatDuration(Duration::min()), "-9223372036.854775808s");
}

}  // namespace
}  // namespace holdback
