// Go-style duration strings: what parses, what does not, and formatDuration round trips.
#include "holdback/core/duration.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace holdback {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(DurationTest, ParsesGoDurations) {
  const std::pair<const char*, Duration> cases[] = {
      {"0", Duration::zero()},
      {"-0", Duration::zero()},
      {"+0", Duration::zero()},
      {"0s", Duration::zero()},
      {"200ms", milliseconds(200)},
      {"1.5s", milliseconds(1500)},
      {"2m", minutes(2)},
      {"1h30m", minutes(90)},
      {"1h30m15s", seconds(5415)},
      {"-5s", seconds(-5)},
      {"+5s", seconds(5)},
      {".5s", milliseconds(500)},
      {"1.s", seconds(1)},
      {"7ns", nanoseconds(7)},
      {"3us", microseconds(3)},
      {"3\xC2\xB5s", microseconds(3)},  // U+00B5 micro sign
      {"3\xCE\xBCs", microseconds(3)},  // U+03BC Greek mu
      {"1.000000001s", nanoseconds(1'000'000'001)},
      {"1.0000000019s", nanoseconds(1'000'000'001)},  // below a nanosecond: truncated
      {"0.1ms", microseconds(100)},
      {"2562047h", hours(2562047)},
      {"9223372036854775807ns", nanoseconds(std::numeric_limits<std::int64_t>::max())},
  };
  for (const auto& [text, expected] : cases) {
    const auto parsed = parseDuration(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, expected) << text;
  }
}

TEST(DurationTest, RejectsEverythingElse) {
  for (const char* text : {"",
                           "-",
                           "+",
                           "s",
                           "200",
                           "1",
                           "-1",
                           ".s",
                           "ms",
                           "200 ms",
                           " 200ms",
                           "200ms ",
                           "1d",
                           "1S",
                           "1sec",
                           "1..5s",
                           "1.5.s",
                           "1e3ms",
                           "0x10s",
                           "1h-30m",
                           "9223372036854775808ns",
                           "2562048h",
                           "99999999999999999999s",
                           "9223372036854775807ns1ns"}) {
    EXPECT_FALSE(parseDuration(text).has_value()) << "\"" << text << "\"";
  }
}

TEST(DurationTest, FormatsReadably) {
  EXPECT_EQ(formatDuration(Duration::zero()), "0s");
  EXPECT_EQ(formatDuration(milliseconds(200)), "200ms");
  EXPECT_EQ(formatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(formatDuration(minutes(2)), "120s");
  EXPECT_EQ(formatDuration(microseconds(-250)), "-250us");
  EXPECT_EQ(formatDuration(nanoseconds(7)), "7ns");
  EXPECT_EQ(formatDuration(nanoseconds(1'000'001)), "1.000001ms");
}

TEST(DurationTest, FormatRoundTrips) {
  for (const std::int64_t ns :
       {std::int64_t{1}, std::int64_t{999}, std::int64_t{1001}, std::int64_t{123'456'789},
        std::int64_t{-42'000'000'000}, std::numeric_limits<std::int64_t>::max(),
        std::numeric_limits<std::int64_t>::min() + 1}) {
    const std::string text = formatDuration(nanoseconds(ns));
    const auto back = parseDuration(text);
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_EQ(back->count(), ns) << text;
  }
  // INT64_MIN formats, though the parser (symmetric range) does not read it back.
  EXPECT_EQ(formatDuration(nanoseconds(std::numeric_limits<std::int64_t>::min())),
            "-9223372036.854775808s");
}

}  // namespace
}  // namespace holdback
