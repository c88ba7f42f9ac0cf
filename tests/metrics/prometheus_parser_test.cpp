// Moved from examples/gateway/tests/prometheus_text_test.cpp with the parser.
#include "holdback/metrics/prometheus_parser.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace holdback {
namespace {

TEST(PrometheusParserTest, ParsesCommentsLabelsAndTimestamps) {
  const ParsedPrometheusText m = parsePrometheusText(
      "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
      "# TYPE vllm:num_requests_waiting gauge\n"
      "vllm:num_requests_waiting{model_name=\"m\",engine=\"0\"} 3\n"
      "\n"
      "plain_metric 1.5e3 1700000000000\n"
      "  spaced_metric  {  a = \"x\" , }   -2  \n");
  EXPECT_EQ(m.commentLines, 2u);
  EXPECT_EQ(m.skippedLines, 0u);
  ASSERT_EQ(m.samples.size(), 3u);
  EXPECT_EQ(m.samples[0].name, "vllm:num_requests_waiting");
  ASSERT_EQ(m.samples[0].labels.size(), 2u);
  EXPECT_EQ(m.samples[0].label("model_name"), "m");
  EXPECT_EQ(m.samples[0].label("engine"), "0");
  EXPECT_FALSE(m.samples[0].label("absent").has_value());
  EXPECT_EQ(m.samples[0].value, 3.0);
  EXPECT_FALSE(m.samples[0].timestampMs.has_value());
  EXPECT_EQ(m.samples[1].value, 1500.0);
  EXPECT_EQ(m.samples[1].timestampMs, 1700000000000);
  EXPECT_EQ(m.samples[2].name, "spaced_metric");
  EXPECT_EQ(m.samples[2].label("a"), "x");
  EXPECT_EQ(m.samples[2].value, -2.0);
}

TEST(PrometheusParserTest, LabelEscapes) {
  const auto s = parsePrometheusSampleLine(
      R"(m{a="q\"uote",b="back\\slash",c="new\nline",d="other\t",e=""} 1)");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->label("a"), "q\"uote");
  EXPECT_EQ(s->label("b"), "back\\slash");
  EXPECT_EQ(s->label("c"), "new\nline");
  EXPECT_EQ(s->label("d"), "other\\t");  // unknown escapes are kept as written
  EXPECT_EQ(s->label("e"), "");
  // A comma, brace or '#' inside a quoted value is part of the value.
  const auto t = parsePrometheusSampleLine(R"(m{a="x,}# y"} 2)");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->label("a"), "x,}# y");
}

TEST(PrometheusParserTest, SpecialValues) {
  EXPECT_TRUE(std::isnan(*parsePrometheusValue("NaN")));
  EXPECT_TRUE(std::isnan(*parsePrometheusValue("nan")));
  EXPECT_EQ(*parsePrometheusValue("+Inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*parsePrometheusValue("Inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*parsePrometheusValue("-Inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(*parsePrometheusValue("+infinity"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*parsePrometheusValue("0.25"), 0.25);
  EXPECT_EQ(*parsePrometheusValue("+7"), 7.0);
  EXPECT_EQ(*parsePrometheusValue("-1e-3"), -0.001);
  EXPECT_EQ(*parsePrometheusValue(".5"), 0.5);
  for (const char* bad :
       {"", "+", "-", "abc", "1.2.3", "1,5", "--1", "+-1", "0x10", "1e", "Infx", "0x1p3",
        // std::from_chars reads these as NaN / infinity; Go's strconv.ParseFloat (and so
        // Prometheus) does not
        "nan(1)", "NaN()", "-nan(0x7)", "nan(", "infinit", "1_000"}) {
    EXPECT_FALSE(parsePrometheusValue(bad).has_value()) << bad;
  }
  // Too small for a double: 0 with its sign, as Go's ParseFloat reads it; too large: rejected
  // (Go: an error). Subnormals keep their value.
  EXPECT_EQ(*parsePrometheusValue("1e-400"), 0.0);
  EXPECT_TRUE(std::signbit(*parsePrometheusValue("-1e-400")));
  EXPECT_EQ(*parsePrometheusValue("0.1e-99999999999999999999"), 0.0);
  EXPECT_EQ(*parsePrometheusValue("1000e-330"), 0.0);
  EXPECT_EQ(*parsePrometheusValue("1e-310"), 1e-310);
  EXPECT_EQ(*parsePrometheusValue("4.9e-324"), std::numeric_limits<double>::denorm_min());
  for (const char* huge : {"1e309", "-1e309", "0.1e400", "1e99999999999999999999"}) {
    EXPECT_FALSE(parsePrometheusValue(huge).has_value()) << huge;
  }
  EXPECT_FALSE(parsePrometheusValue("1" + std::string(400, '0')).has_value());
  EXPECT_EQ(*parsePrometheusValue("0." + std::string(400, '0') + "1"), 0.0);
  EXPECT_EQ(*parsePrometheusValue("1" + std::string(400, '0') + "e-800"), 0.0);
  EXPECT_FALSE(parsePrometheusValue("1" + std::string(400, '0') + "e-5").has_value());
  const ParsedPrometheusText m = parsePrometheusText("a NaN\nb +Inf\nc -Inf 12\n");
  ASSERT_EQ(m.samples.size(), 3u);
  EXPECT_TRUE(std::isnan(m.samples[0].value));
  EXPECT_TRUE(std::isinf(m.samples[1].value));
  EXPECT_EQ(m.samples[2].timestampMs, 12);
}

TEST(PrometheusParserTest, GarbageLinesAreSkippedAndCounted) {
  const ParsedPrometheusText m = parsePrometheusText(
      "good 1\n"
      "no_value\n"
      "bad value\n"
      "1starts_with_digit 1\n"
      "unterminated{a=\"x} 1\n"
      "missing_eq{a \"x\"} 1\n"
      "bad_label_name{1a=\"x\"} 1\n"
      "unquoted{a=x} 1\n"
      "float_ts 1 1.5\n"
      "trailing 1 2 3\n"
      "nospace{a=\"b\"}1\n"
      "\x01\x02\xff binary\n"
      "also_good{x=\"y\"} 2\n");
  EXPECT_EQ(m.skippedLines, 11u);
  ASSERT_EQ(m.samples.size(), 2u);
  EXPECT_EQ(m.samples[0].name, "good");
  EXPECT_EQ(m.samples[1].name, "also_good");
}

TEST(PrometheusParserTest, CrlfAndMissingFinalNewline) {
  const ParsedPrometheusText m = parsePrometheusText("# c\r\na 1\r\nb 2");
  EXPECT_EQ(m.commentLines, 1u);
  EXPECT_EQ(m.skippedLines, 0u);
  ASSERT_EQ(m.samples.size(), 2u);
  EXPECT_EQ(m.samples[0].value, 1.0);
  EXPECT_EQ(m.samples[1].value, 2.0);
}

TEST(PrometheusParserTest, EmptyInput) {
  const ParsedPrometheusText m = parsePrometheusText("");
  EXPECT_TRUE(m.samples.empty());
  EXPECT_EQ(m.skippedLines, 0u);
}

}  // namespace
}  // namespace holdback
