// Result::value() is checked in every build mode (core/diagnostics.hpp): a failed Result's value()
// prints its diagnostics and aborts instead of reading an empty optional. Diagnostics::append
// leaves out a later stage's error about a value an earlier stage already reported.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

TEST(DiagnosticsTest, AppendSkipsAnErrorAtAPathThatAlreadyHasOne) {
  Diagnostics earlier;  // e.g. the YAML parser: reported the value and left null in its place
  earlier.error("/a", ".nan is not a finite number");
  earlier.error("", "the whole document");
  Diagnostics later;                                   // e.g. the loader, reading that null
  later.error("/a", "found null; expected a number");  // a consequence: skipped
  later.warning("/a", "deprecated");                   // warnings are kept
  later.error("/b", "first problem");                  // other paths are kept,
  later.error("/b", "second problem");                 // all of them
  later.error("", "could not be built");               // and whole-document errors
  earlier.append(later);
  std::vector<std::string> lines;
  for (const Diagnostic& d : earlier.all()) lines.push_back(d.toString());
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "/a: .nan is not a finite number", "/: the whole document", "/a: deprecated",
                       "/b: first problem", "/b: second problem", "/: could not be built"}));
  EXPECT_EQ(earlier.errorCount(), 5u);
}

}  // namespace
}  // namespace holdback
