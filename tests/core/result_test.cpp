// Result::value() is checked in every build mode (core/diagnostics.hpp): a failed Result's value()
// prints its diagnostics and aborts instead of reading an empty optional.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "holdback/core/diagnostics.hpp"

namespace holdback {
namespace {

Result<std::unique_ptr<int>> failing() {
  Diagnostics d;
  d.error("/maxBands", "must be at least 1, but got 0");
  return Result<std::unique_ptr<int>>::failure(std::move(d));
}

TEST(ResultTest, ValueOfAFailedResultAbortsWithTheDiagnostics) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)failing().value(), "value\\(\\) of a failed Result(.|\n)*/maxBands: must be");
  EXPECT_DEATH(
      {
        auto r = failing();
        (void)r.value();
      },
      "failed Result");
  EXPECT_DEATH(
      {
        const auto r = failing();
        (void)r->get();
      },
      "failed Result");
}

TEST(ResultTest, ValueOfASuccessfulResult) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r.value(), 7);
  EXPECT_EQ(**r.operator->(), 7);
  EXPECT_EQ(*std::move(r).value(), 7);
}

}  // namespace
}  // namespace holdback
