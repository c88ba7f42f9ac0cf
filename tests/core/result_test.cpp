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

// A document with a million duplicate keys once made the loader allocate a diagnostic for each:
// the list keeps the first kMaxKept, counts the rest and says how many were not shown.
TEST(DiagnosticsTest, KeepsTheFirstHundredAndCountsTheRest) {
  Diagnostics d;
  for (int i = 0; i < 1000; ++i) d.error("/k" + std::to_string(i), "bad");
  d.warning("/w", "late warning");
  EXPECT_EQ(d.all().size(), Diagnostics::kMaxKept);
  EXPECT_EQ(d.errorCount(), 1000u);
  EXPECT_EQ(d.notKept(), 901u);
  EXPECT_TRUE(d.hasErrors());
  const std::string text = d.toString();
  EXPECT_NE(text.find("/k99: bad"), std::string::npos);
  EXPECT_EQ(text.find("/k100: bad"), std::string::npos);
  EXPECT_NE(text.find("error: 901 more diagnostics not shown (only the first 100 are kept)"),
            std::string::npos);
  Diagnostics merged;
  merged.error("/first", "kept");
  merged.append(d);
  EXPECT_EQ(merged.errorCount(), 1001u);
  EXPECT_EQ(merged.all().size(), Diagnostics::kMaxKept);
  EXPECT_EQ(merged.notKept(), 902u);  // d's 901 and the one that no longer fit
}

}  // namespace
}  // namespace holdback
