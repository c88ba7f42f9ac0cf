#include "holdback/core/types.hpp"

#include <gtest/gtest.h>

namespace holdback {
namespace {

TEST(ElapsedTest, IsTheDifferenceWhenItFits) {
  const TimePoint t0{Duration(1000)};
  EXPECT_EQ(elapsed(t0, t0 + Duration(250)), Duration(250));
  EXPECT_EQ(elapsed(t0 + Duration(250), t0), Duration(-250));
  EXPECT_EQ(elapsed(t0, t0), Duration::zero());
}

TEST(ElapsedTest, SaturatesInsteadOfOverflowing) {
  EXPECT_EQ(elapsed(TimePoint::min(), TimePoint::max()), Duration::max());
  EXPECT_EQ(elapsed(TimePoint::max(), TimePoint::min()), Duration::min());
  EXPECT_EQ(elapsed(TimePoint{Duration(-1)}, TimePoint::max()), Duration::max());
  EXPECT_EQ(elapsed(TimePoint{Duration(1)}, TimePoint::max()),
            Duration(Duration::max().count() - 1));
}

static_assert(elapsed(TimePoint{}, TimePoint{Duration(5)}) == Duration(5));

}  // namespace
}  // namespace holdback
