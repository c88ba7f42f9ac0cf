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

TEST(Utf8Test, ValidatesWellFormedUtf8Only) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("plain ascii"));
  EXPECT_TRUE(isValidUtf8("\xc2\xb5 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
  for (const char* bad : {"\xff", "\xfe\x80", "\x80", "\xc0\xaf",  // stray, overlong
                          "\xe0\x80\xaf", "\xed\xa0\x80",          // overlong, surrogate
                          "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",  // above U+10FFFF
                          "\xe2\x82", "ok\xf0\x9f\x98"}) {         // truncated
    EXPECT_FALSE(isValidUtf8(bad)) << bad;
  }
}

TEST(Utf8Test, ReplacesEachIllFormedSubpartWithOneReplacementCharacter) {
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(toValidUtf8("kept \xc2\xb5"), "kept \xc2\xb5");
  EXPECT_EQ(toValidUtf8("\xff\xfe\x80"
                        "bad"),
            fffd + fffd + fffd + "bad");
  // A truncated sequence is one subpart; the byte that broke it starts over.
  EXPECT_EQ(toValidUtf8("a\xe2\x82"
                        "b"),
            "a" + fffd + "b");
  EXPECT_EQ(toValidUtf8("\xf0\x9f\x98"), fffd);
  EXPECT_EQ(toValidUtf8("\xed\xa0\x80"), fffd + fffd + fffd);  // a surrogate: 3 subparts
  EXPECT_TRUE(isValidUtf8(toValidUtf8("\xc0\x80\xf8\x88\x80\x80\x80x\xe0")));
}

TEST(JsonNestingTest, CountsBracketsOutsideStringsOnly) {
  EXPECT_FALSE(jsonNestingExceeds(R"({"a": [1, {"b": [2]}]})", 4));
  EXPECT_TRUE(jsonNestingExceeds(R"({"a": [1, {"b": [2]}]})", 3));
  // Brackets in strings, with escaped quotes and backslashes, are text.
  EXPECT_FALSE(jsonNestingExceeds(R"({"a": "[[[[{{{{\"[[[\\", "b": "]]]]"})", 1));
  EXPECT_TRUE(jsonNestingExceeds(R"({"a": "\\", "b": [[1]]})", 2));
  // Any bytes: unbalanced closers do not go below zero, and an unterminated string ends it.
  EXPECT_FALSE(jsonNestingExceeds("]]]]}}}}[", 1));
  EXPECT_TRUE(jsonNestingExceeds("]]]][[", 1));
  EXPECT_FALSE(jsonNestingExceeds("\"[[[[[[", 1));
  EXPECT_FALSE(jsonNestingExceeds("", 0));
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_TRUE(jsonNestingExceeds(deep, kMaxJsonNesting));
  EXPECT_FALSE(jsonNestingExceeds(deep, 200000));
}

}  // namespace
}  // namespace holdback
