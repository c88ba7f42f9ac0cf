// JSON/YAML documents with positions, and Kubernetes quantities.
#include <gtest/gtest.h>

#include "holdback/config/document.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/config/quantity.hpp"

namespace holdback::config {
namespace {

std::vector<std::string> errorsOf(const Result<Document>& r) {
  std::vector<std::string> out;
  for (const auto& d : r.diagnostics().errors()) out.push_back(d.toString());
  return out;
}

TEST(ParseDocumentTest, DetectsJsonByContent) {
  const auto r = parseDocument("  \n{\"a\": 1}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().format, DocumentFormat::kJson);
  EXPECT_EQ(r.value().json["a"], 1);
}

TEST(ParseDocumentTest, YamlScalarsFollowTheCoreSchema) {
  const auto r = parseDocument(R"(
int: 42
negative: -7
big: 3000000000
float: 0.6
exp: 1.5e3
leadingDot: .5
quoted: "0.6"
single: '42'
bools: [true, False, TRUE]
nulls: [~, null, ]
empty:
duration: 200ms
quantity: 1Gi
word: yes
)");
  ASSERT_TRUE(r.ok()) << r.diagnostics().toString();
  const Json& j = r.value().json;
  EXPECT_EQ(r.value().format, DocumentFormat::kYaml);
  EXPECT_TRUE(j["int"].is_number_integer());
  EXPECT_EQ(j["int"], 42);
  EXPECT_EQ(j["negative"], -7);
  EXPECT_EQ(j["big"].get<std::int64_t>(), 3000000000);
  EXPECT_TRUE(j["float"].is_number_float());
  EXPECT_DOUBLE_EQ(j["float"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(j["exp"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(j["leadingDot"].get<double>(), 0.5);
  EXPECT_EQ(j["quoted"], "0.6");
  EXPECT_EQ(j["single"], "42");
  EXPECT_EQ(j["bools"], Json::parse("[true, false, true]"));
  EXPECT_TRUE(j["nulls"][0].is_null());
  EXPECT_TRUE(j["nulls"][1].is_null());
  EXPECT_TRUE(j["empty"].is_null());
  EXPECT_EQ(j["duration"], "200ms");
  EXPECT_EQ(j["quantity"], "1Gi");
  EXPECT_EQ(j["word"], "yes");  // YAML 1.2: not a boolean
}

TEST(ParseDocumentTest, NumericKeysBecomeStrings) {
  const auto r = parseDocument("ceilings:\n  100: 0.95\n  -10: 0.4\n  \"5\": 0.5\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().json["ceilings"], Json::parse(R"({"100":0.95,"-10":0.4,"5":0.5})"));
}

TEST(ParseDocumentTest, YamlDuplicateKeysAreErrorsWithLineAndColumn) {
  const auto r = parseDocument("a: 1\nb:\n  c: 1\n  c: 2\n");
  EXPECT_TRUE(r.ok());  // returned, but with the error
  EXPECT_EQ(errorsOf(r), std::vector<std::string>{
                             "/b/c (line 4, column 3): duplicate key \"c\": a key may appear only "
                             "once in a map (a second value would silently replace the first)"});
}

TEST(ParseDocumentTest, YamlSyntaxErrorsAndOtherRejections) {
  EXPECT_EQ(errorsOf(parseDocument("a: [1, 2\nb: 3")),
            std::vector<std::string>{"/ (line 2, column 2): invalid YAML: did not find expected "
                                     "',' or ']' while parsing a flow sequence"});
  EXPECT_EQ(errorsOf(parseDocument("a: .inf")),
            std::vector<std::string>{"/a (line 1, column 4): .inf is not a finite number; "
                                     "infinities and NaN are not allowed"});
  EXPECT_EQ(errorsOf(parseDocument("a: 1e400")),
            std::vector<std::string>{
                "/a (line 1, column 4): number overflow: 1e400 does not fit a double"});
  EXPECT_EQ(errorsOf(parseDocument("a: 1\n---\nb: 2\n")),
            std::vector<std::string>{
                "/ (line 2, column 1): the file holds more than one YAML document; expected one"});
  EXPECT_EQ(errorsOf(parseDocument("? [1, 2]\n: 3\n")),
            std::vector<std::string>{
                "/ (line 1, column 3): a map key must be a plain value, not a list or map"});
}

TEST(ParseDocumentTest, InputsThatHangYamlCppAreRejectedPromptly) {
  // Regressions (config fuzzer): yaml-cpp 0.7 loops forever, allocating, on every one of these;
  // libyaml rejects each with one error.
  for (const std::string& text :
       {std::string(",\n\0", 3), std::string(","), std::string(" ,"), std::string("--- ,"),
        std::string("!t ,"), std::string("&a ,"), std::string("# c\n,"), std::string("\"a\","),
        std::string("\"a\" ,"), std::string("[1],"), std::string("{a: 1},"),
        std::string("\"x\"\n,")}) {
    const auto errors = errorsOf(parseYaml(text));
    ASSERT_EQ(errors.size(), 1u) << text;
    EXPECT_NE(errors[0].find("invalid YAML: "), std::string::npos) << errors[0];
  }
  EXPECT_EQ(errorsOf(parseDocument(std::string(",\n\0", 3))),
            std::vector<std::string>{
                "/ (line 1, column 1): invalid YAML: control characters are not allowed"});
  EXPECT_FALSE(parseDocument("a: \x01").ok());
  EXPECT_TRUE(parseDocument("a:\tb\r\n").ok());
  // Commas elsewhere are ordinary YAML.
  EXPECT_TRUE(parseDocument("a: b, c\nd: [1, 2]\n").ok());
}

TEST(ParseDocumentTest, AliasBombIsBounded) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char name = 'b'; name <= 'h'; ++name) {
    bomb += std::string(1, name) + ": &" + name + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = name;
  }
  const auto r = parseDocument(bomb);
  ASSERT_FALSE(errorsOf(r).empty());
  EXPECT_NE(errorsOf(r)[0].find("expands to more than 1000000 values"), std::string::npos);
}

TEST(ParseDocumentTest, DiagnosticsGetPositionsFromTheSourceMap) {
  const auto doc = parseDocument(R"(type: priority-holdback-policy
parameters:
  strategy: static
  ceilings:
    100: 0.5
    20: 0.75
)");
  ASSERT_TRUE(doc.ok());
  const auto policy = loadUsageLimitPolicy(doc.value().json, builtinPolicyRegistry());
  ASSERT_FALSE(policy.ok());
  const Diagnostics located = withPositions(policy.diagnostics(), doc.value().positions);
  ASSERT_EQ(located.errors().size(), 1u);
  EXPECT_EQ(located.errors()[0].line, 6);
  EXPECT_EQ(located.errors()[0].column, 9);
  EXPECT_EQ(located.errors()[0].path, "/parameters/ceilings/20");
}

TEST(ParseDocumentTest, TheSeedProposalYamlLoads) {
  const auto doc = parseDocument(R"(apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
metadata:
  name: default-config
featureGates:
- flowControl
plugins:
- type: priority-holdback-policy
  name: dynamic-holdback
  parameters:
    strategy: "sigmoid-smoothed"
    minCeiling: 0.6
    maxCeiling: 1.0
    sigmoidSteepness: 8.0
    sigmoidMidpoint: 0.5
    sigmoidDomain: "value"
flowControl:
  usageLimitPolicyPluginRef: dynamic-holdback
)");
  ASSERT_TRUE(doc.ok()) << doc.diagnostics().toString();
  const auto policy = loadUsageLimitPolicy(doc.value().json, builtinPolicyRegistry());
  ASSERT_TRUE(policy.ok()) << policy.diagnostics().toString();
  EXPECT_EQ(policy.value()->name(), "dynamic-holdback");
}

TEST(QuantityTest, KubernetesSemantics) {
  EXPECT_EQ(parseQuantity("5000"), 5000);
  EXPECT_EQ(parseQuantity("0"), 0);
  EXPECT_EQ(parseQuantity("1k"), 1000);
  EXPECT_EQ(parseQuantity("1G"), 1000000000);
  EXPECT_EQ(parseQuantity("1Gi"), 1073741824);
  EXPECT_EQ(parseQuantity("500M"), 500000000);
  EXPECT_EQ(parseQuantity("10Gi"), 10737418240);
  EXPECT_EQ(parseQuantity("1.5k"), 1500);
  EXPECT_EQ(parseQuantity("1.5e3"), 1500);
  EXPECT_EQ(parseQuantity("0.5"), 1);    // rounds up
  EXPECT_EQ(parseQuantity("1500m"), 2);  // 1.5 rounds up
  EXPECT_EQ(parseQuantity("1000m"), 1);
  EXPECT_EQ(parseQuantity("-5"), -5);
  EXPECT_EQ(parseQuantity("+7"), 7);
  EXPECT_EQ(parseQuantity("8Ei"), std::nullopt);  // 2^63 overflows int64
  EXPECT_EQ(parseQuantity("7Ei"), 8070450532247928832);
  EXPECT_EQ(parseQuantity("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parseQuantity("9223372036854775808"), std::nullopt);
  for (const char* bad :
       {"", "k", "1 k", "1kb", "1.2.3", "abc", "1e", "1e1000x", ".", "-", "1Ki2"}) {
    EXPECT_EQ(parseQuantity(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace holdback::config
