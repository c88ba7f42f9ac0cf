// Strict JSON parsing and the ParamReader.
#include <gtest/gtest.h>

#include "holdback/config/json.hpp"

namespace holdback::config {
namespace {

std::vector<std::string> errorsOf(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& d : parseJson(text).diagnostics().errors()) out.push_back(d.toString());
  return out;
}

TEST(ParseJsonTest, AcceptsPlainDocuments) {
  const auto parsed = parseJson(R"({"a": [1, 2.5, "x", null, true, {"b": -3}]})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed.diagnostics().empty());
  EXPECT_EQ(parsed.value()["a"][5]["b"], -3);
}

TEST(ParseJsonTest, DuplicateKeysAreErrorsWithTheirPath) {
  EXPECT_EQ(errorsOf(R"({"a": 1, "a": 2})"),
            std::vector<std::string>{"/a: duplicate key \"a\": a key may appear only once in an "
                                     "object (a second value would silently replace the first)"});
  EXPECT_EQ(errorsOf(R"([{"x": 1}, {"y": [0, {"z": 1, "z": 1}]}])"),
            std::vector<std::string>{"/1/y/1/z: duplicate key \"z\": a key may appear only once "
                                     "in an object (a second value would silently replace the "
                                     "first)"});
  // The document is still returned, so callers can report other problems too.
  EXPECT_TRUE(parseJson(R"({"a": 1, "a": 2})").ok());
}

TEST(ParseJsonTest, ManyDuplicateKeysKeepABoundedReport) {
  std::string text = "{\"a\": 0";
  for (int i = 0; i < 100000; ++i) text += ", \"a\": 0";
  text += "}";
  const auto parsed = parseJson(text);
  EXPECT_EQ(parsed.diagnostics().errorCount(), 100000u);
  EXPECT_EQ(parsed.diagnostics().all().size(), Diagnostics::kMaxKept);
}

TEST(ParseJsonTest, NestingBeyondTheLimitIsAnError) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const auto parsed = parseJson(deep);
  EXPECT_FALSE(parsed.ok());
  ASSERT_EQ(parsed.diagnostics().errors().size(), 1u);
  EXPECT_NE(parsed.diagnostics().errors()[0].message.find("nesting deeper than 128 levels"),
            std::string::npos)
      << parsed.diagnostics().toString();
  const std::string at_limit = std::string(128, '[') + std::string(128, ']');
  EXPECT_TRUE(parseJson(at_limit).ok());
}

TEST(ParseJsonTest, EscapesPathTokens) {
  EXPECT_EQ(errorsOf(R"({"a/b": {"c~d": 1, "c~d": 2}})").at(0).substr(0, 10), "/a~1b/c~0d");
  EXPECT_EQ(joinPath("/x", "a/b~c"), "/x/a~1b~0c");
}

TEST(ParseJsonTest, SyntaxErrorsCarryLineColumnAndPath) {
  const auto errors = errorsOf("{\n  \"a\": [1,\n  2,,\n]}");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("/a/2 (line 3, column 5): invalid JSON: syntax error", 0), 0u)
      << errors[0];
  EXPECT_FALSE(parseJson("{").ok());
  EXPECT_FALSE(parseJson("").ok());
  EXPECT_FALSE(parseJson("{} {}").ok());
  EXPECT_FALSE(parseJson("{\"a\": 1} // comment").ok());
}

TEST(ParseJsonTest, NumberOverflowIsAnError) {
  EXPECT_EQ(errorsOf(R"({"x": 1e400})"),
            std::vector<std::string>{
                "/x (line 1, column 11): invalid JSON: number overflow parsing '1e400'"});
}

TEST(FormatNumberTest, ShortestRoundTrip) {
  EXPECT_EQ(formatNumber(1.0), "1.0");
  EXPECT_EQ(formatNumber(0.1), "0.1");
  EXPECT_EQ(formatNumber(0.7250000000000001), "0.7250000000000001");
  EXPECT_EQ(formatNumber(-2.0), "-2.0");
  EXPECT_EQ(formatNumber(1e300), "1e+300");
  EXPECT_EQ(formatNumber(std::numeric_limits<double>::infinity()), "inf");
}

TEST(ParseIntegerKeyTest, WholeStringsOnly) {
  EXPECT_EQ(parseIntegerKey("-10", -100, 100), -10);
  EXPECT_EQ(parseIntegerKey("2147483647", INT32_MIN, INT32_MAX), INT32_MAX);
  EXPECT_EQ(parseIntegerKey("2147483648", INT32_MIN, INT32_MAX), std::nullopt);
  for (const char* bad : {"", " 1", "1 ", "+1", "1.0", "0x10", "abc", "-"}) {
    EXPECT_EQ(parseIntegerKey(bad, -100, 100), std::nullopt) << bad;
  }
}

// A non-negative JSON literal is stored unsigned; the lower bound applies to it too.
TEST(ParamReaderTest, UnsignedLiteralBelowTheMinimumIsOutOfRange) {
  const Json params = parseJson(R"({"a": 0, "b": 1})").value();
  Diagnostics diagnostics;
  ParamReader reader(&params, "/p", diagnostics);
  EXPECT_EQ(reader.integer("a", 1, 10), std::nullopt);
  EXPECT_EQ(reader.integer("b", 1, 10), 1);
  ASSERT_EQ(diagnostics.errors().size(), 1u);
  EXPECT_EQ(diagnostics.errors()[0].toString(),
            "/p/a: 0 is out of range; expected an integer in [1, 10]");
}

TEST(ParamReaderTest, IntegersAreNeverWrappedTruncatedOrClamped) {
  const Json params = parseJson(R"({"a": 3000000000, "b": 2.5, "c": 5.0, "d": -1,
                                     "e": 18446744073709551615, "f": "7"})")
                          .value();
  Diagnostics diagnostics;
  ParamReader reader(&params, "/p", diagnostics);
  EXPECT_EQ(reader.integer("a", INT32_MIN, INT32_MAX), std::nullopt);
  EXPECT_EQ(reader.integer("b", 0, 10), std::nullopt);
  EXPECT_EQ(reader.integer("c", 0, 10), 5);
  EXPECT_EQ(reader.integer("d", 0, 10), std::nullopt);
  EXPECT_EQ(reader.integer("e", 0, INT64_MAX), std::nullopt);
  EXPECT_EQ(reader.integer("f", 0, 10), std::nullopt);
  reader.finish();
  std::vector<std::string> errors;
  for (const auto& d : diagnostics.errors()) errors.push_back(d.toString());
  EXPECT_EQ(
      errors,
      (std::vector<std::string>{
          // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): a message split over two literals
          "/p/a: 3000000000 is out of range; expected an integer in [-2147483648, "
          "2147483647]",
          "/p/b: 2.5 is not a whole number; expected an integer in [0, 10]",
          "/p/d: -1 is out of range; expected an integer in [0, 10]",
          "/p/e: 18446744073709551615 is out of range; expected an integer in [0, "
          "9223372036854775807]",
          "/p/f: \"7\" is a string; expected an integer in [0, 10]"}));
}

TEST(ParamReaderTest, AbsentParametersReadAsEmpty) {
  Diagnostics diagnostics;
  ParamReader reader(nullptr, "/p", diagnostics);
  EXPECT_FALSE(reader.has("x"));
  EXPECT_EQ(reader.number("x"), std::nullopt);
  reader.finish();
  EXPECT_TRUE(diagnostics.empty());
}

}  // namespace
}  // namespace holdback::config
