// JSON configuration of the usage limit policies: acceptance and rejection tables with the exact
// error text, the reference §2.2 factory vectors, both spellings, and EndpointPickerConfig
// resolution.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback::config {
namespace {

// Loads a document; returns the error lines ("path: message"), empty when it loaded.
std::vector<std::string> policyErrorsOf(const std::string& text) {
  auto parsed = parseJson(text);
  std::vector<std::string> out;
  for (const auto& d : parsed.diagnostics().errors()) out.push_back(d.toString());
  if (!parsed) return out;
  auto policy = loadUsageLimitPolicy(parsed.value(), builtinPolicyRegistry());
  for (const auto& d : policy.diagnostics().errors()) out.push_back(d.toString());
  if (out.empty()) {
    EXPECT_TRUE(policy.ok());
  }
  return out;
}

std::shared_ptr<UsageLimitPolicy> load(const std::string& text) {
  auto parsed = parseJson(text);
  EXPECT_TRUE(parsed.ok()) << parsed.diagnostics().toString();
  auto policy = loadUsageLimitPolicy(parsed.value(), builtinPolicyRegistry());
  EXPECT_TRUE(policy.ok()) << policy.diagnostics().toString();
  return policy.ok() ? policy.value() : nullptr;
}

std::string holdbackPlugin(const std::string& parameters) {
  return R"({"type":"priority-holdback-policy","parameters":)" + parameters + "}";
}

std::vector<double> ceilingsOf(UsageLimitPolicy& policy, const std::vector<Priority>& priorities) {
  std::vector<double> c(priorities.size(), 1.0);
  policy.computeLimit(0.0, priorities, c);
  return c;
}

// ---- reference §2.2 factory vectors ------------------------------------------------------------

TEST(PriorityHoldbackConfigTest, ReferenceFactoryAccepts) {
  for (const char* params :
       {R"({"domain":"rank","minCeiling":0.5})",
        R"({"domain":"value","minCeiling":0.3,"maxCeiling":0.9})",
        R"({"domain":"rank","minCeiling":0.2,"maxCeiling":0.8})", R"({"minCeiling":0.5})",
        R"({"shape":"linear","minCeiling":0.5})", R"({"minCeiling":0.0})"}) {
    EXPECT_EQ(policyErrorsOf(holdbackPlugin(params)), std::vector<std::string>{}) << params;
  }
}

TEST(PriorityHoldbackConfigTest, ReferenceFactoryRejects) {
  for (const char* params :
       {R"({"domain":"rank"})", R"({})", R"({"shape":"cubic","minCeiling":0.5})",
        R"({"domain":"unknown","minCeiling":0.5})", R"({"minCeiling":-0.1})",
        R"({"minCeiling":1.0})", R"({"minCeiling":0.5,"maxCeiling":0.0})",
        R"({"minCeiling":0.5,"maxCeiling":1.1})", R"({"minCeiling":0.5,"maxCeiling":0.5})",
        R"({"minCeiling":0.8,"maxCeiling":0.5})", R"({not json})"}) {
    EXPECT_FALSE(policyErrorsOf(holdbackPlugin(params)).empty()) << params;
  }
  EXPECT_FALSE(policyErrorsOf(R"({"type":"priority-holdback-policy"})").empty());
}

TEST(PriorityHoldbackConfigTest, DefaultsAreLinearRankMaxOne) {
  auto policy = load(holdbackPlugin(R"({"minCeiling":0.5})"));
  ASSERT_NE(policy, nullptr);
  const auto& options = dynamic_cast<PriorityHoldbackPolicy&>(*policy).options();
  EXPECT_EQ(options.strategy, HoldbackStrategy::kStepwiseSpread);
  EXPECT_EQ(options.maxCeiling, 1.0);
  EXPECT_EQ(policy->name(), "priority-holdback-policy");
  EXPECT_EQ(policy->type(), "priority-holdback-policy");
}

// ---- exact messages ----------------------------------------------------------------------------

struct RejectCase {
  std::string parameters;
  std::vector<std::string> errors;
};

// Keeps CTest names short: the first error's path.
void PrintTo(const RejectCase& c, std::ostream* os) {
  *os << (c.errors.empty() ? "ok" : c.errors.front().substr(0, c.errors.front().find(':')));
}

class PriorityHoldbackRejectTest : public ::testing::TestWithParam<RejectCase> {};

TEST_P(PriorityHoldbackRejectTest, ReportsEveryProblemWithPath) {
  EXPECT_EQ(policyErrorsOf(holdbackPlugin(GetParam().parameters)), GetParam().errors);
}

// Expected messages are split over several string literals on purpose.
// NOLINTBEGIN(bugprone-suspicious-missing-comma)
INSTANTIATE_TEST_SUITE_P(
    Table, PriorityHoldbackRejectTest,
    ::testing::Values(
        RejectCase{R"({})",
                   {"/parameters/minCeiling: missing; strategy \"stepwise-spread\" requires "
                    "minCeiling, a number in [0.0, 1.0)"}},
        RejectCase{R"({"minCeiling":1.2})",
                   {"/parameters/minCeiling: 1.2 is outside [0.0, 1.0)",
                    "/parameters/minCeiling: 1.2 is not below maxCeiling "
                    "1.0; minCeiling must be strictly less than "
                    "maxCeiling"}},
        RejectCase{R"({"minCeiling":0.5,"maxCeiling":0.0})",
                   {"/parameters/maxCeiling: 0.0 is outside (0.0, 1.0]",
                    "/parameters/minCeiling: 0.5 is not below maxCeiling 0.0; minCeiling must be "
                    "strictly less than maxCeiling"}},
        RejectCase{R"({"minCeiling":"0.5"})",
                   {"/parameters/minCeiling: \"0.5\" is a string; expected a number"}},
        RejectCase{R"({"minCeiling":0.5,"colour":"red"})",
                   {"/parameters/colour: unknown key \"colour\"; allowed keys: ceilings, "
                    "defaultCeiling, domain, maxCeiling, minCeiling, shape, sigmoidDomain, "
                    "sigmoidMidpoint, sigmoidSteepness, strategy"}},
        RejectCase{R"({"minCeiling":0.5,"minCeiling":0.6})",
                   {"/parameters/minCeiling: duplicate key \"minCeiling\": a key may appear only "
                    "once in an object (a second value would silently replace the first)"}},
        RejectCase{R"({"strategy":"stepwise-spread","domain":"rank","minCeiling":0.5})",
                   {"/parameters/domain: cannot be combined with \"strategy\"; use either "
                    "strategy (with sigmoidDomain) or shape and domain, not both"}},
        RejectCase{R"({"strategy":"stepwise","minCeiling":0.5})",
                   {"/parameters/strategy: \"stepwise\" is not supported; expected one of "
                    "\"stepwise-spread\", \"linear-proportional\", \"sigmoid-smoothed\", "
                    "\"static\""}},
        RejectCase{R"({"strategy":"linear-proportional","minCeiling":0.5,"sigmoidSteepness":4})",
                   {"/parameters/sigmoidSteepness: applies only to strategy \"sigmoid-smoothed\", "
                    "not \"linear-proportional\""}},
        RejectCase{R"({"strategy":"sigmoid-smoothed","minCeiling":0.5,"sigmoidSteepness":0,
                       "sigmoidMidpoint":1.5})",
                   {"/parameters/sigmoidSteepness: 0.0 is outside (0.0, 100.0]",
                    "/parameters/sigmoidMidpoint: 1.5 is outside [0.0, 1.0]"}},
        RejectCase{R"({"strategy":"sigmoid-smoothed","minCeiling":0.5,"sigmoidSteepness":101})",
                   {"/parameters/sigmoidSteepness: 101.0 is outside (0.0, 100.0]"}},
        RejectCase{R"({"strategy":"static","minCeiling":0.5,"ceilings":{"0":0.5}})",
                   {"/parameters/minCeiling: does not apply to strategy \"static\""}},
        RejectCase{R"({"strategy":"static"})",
                   {"/parameters/ceilings: missing or empty; strategy \"static\" requires "
                    "ceilings, a non-empty map from priority to a ceiling in [0.0, 1.0]"}},
        RejectCase{R"({"strategy":"static","ceilings":{}})",
                   {"/parameters/ceilings: missing or empty; strategy \"static\" requires "
                    "ceilings, a non-empty map from priority to a ceiling in [0.0, 1.0]"}},
        RejectCase{R"({"strategy":"static","ceilings":{"100":0.5,"20":0.75,"-1":0.9}})",
                   {"/parameters/ceilings/20: 0.75 is above 0.5, the ceiling of the higher "
                    "priority 100; ceilings must not increase as priority decreases (priority "
                    "inversion)",
                    "/parameters/ceilings/-1: 0.9 is above 0.75, the ceiling of the higher "
                    "priority 20; ceilings must not increase as priority decreases (priority "
                    "inversion)"}},
        RejectCase{R"({"strategy":"static","ceilings":{"3000000000":0.5,"x":0.2,"2.5":0.1,
                       "7":1.5,"8":"high"}})",
                   {"/parameters/ceilings/2.5: \"2.5\" is not an integer priority in "
                    "[-2147483648, 2147483647]",
                    "/parameters/ceilings/3000000000: \"3000000000\" is not an integer priority "
                    "in [-2147483648, 2147483647]",
                    "/parameters/ceilings/8: \"high\" is a string; expected a ceiling in [0.0, "
                    "1.0]",
                    "/parameters/ceilings/x: \"x\" is not an integer priority in [-2147483648, "
                    "2147483647]",
                    "/parameters/ceilings/7: 1.5 is outside [0.0, 1.0]"}},
        RejectCase{R"({"strategy":"static","ceilings":{"10":0.5,"010":0.5}})",
                   {"/parameters/ceilings/10: priority 10 is listed more than once"}},
        RejectCase{R"({"strategy":"static","ceilings":{"0":0.5},"defaultCeiling":-0.5})",
                   {"/parameters/defaultCeiling: -0.5 is outside [0.0, 1.0]"}},
        RejectCase{R"({"strategy":"stepwise-spread","minCeiling":0.5,"defaultCeiling":0.5})",
                   {"/parameters/defaultCeiling: applies only to strategy \"static\", not "
                    "\"stepwise-spread\""}},
        RejectCase{R"({"shape":"linear","domain":"explicit","ceilings":{"0":1}})",
                   {"/parameters/shape: does not apply to domain \"explicit\" (a static map has "
                    "no shape)"}},
        RejectCase{R"({"shape":"sigmoid","sigmoidDomain":"value","minCeiling":0.5})",
                   {"/parameters/sigmoidDomain: cannot be combined with \"shape\"/\"domain\"; "
                    "with that spelling the sigmoid domain is given by \"domain\""}},
        RejectCase{R"({"minCeiling":1e400})",
                   {"/parameters/minCeiling (line 1, column 67): invalid JSON: number overflow "
                    "parsing '1e400'"}},
        RejectCase{R"([1])", {"/parameters: found an array; expected an object"}}));
// NOLINTEND(bugprone-suspicious-missing-comma)

// ---- spellings ---------------------------------------------------------------------------------

TEST(PriorityHoldbackConfigTest, BothSpellingsBuildTheSameStrategies) {
  const std::vector<Priority> priorities{100, 50, 0, -1};
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {R"({"strategy":"stepwise-spread","minCeiling":0.4})",
       R"({"shape":"linear","domain":"rank","minCeiling":0.4})"},
      {R"({"strategy":"linear-proportional","minCeiling":0.4})",
       R"({"domain":"value","minCeiling":0.4})"},
      {R"({"strategy":"sigmoid-smoothed","sigmoidDomain":"value","minCeiling":0.6})",
       R"({"shape":"sigmoid","domain":"value","minCeiling":0.6})"},
      {R"({"strategy":"sigmoid-smoothed","minCeiling":0.6})",
       R"({"shape":"sigmoid","minCeiling":0.6})"},
      {R"({"strategy":"static","ceilings":{"100":1,"20":0.75,"-1":0.6}})",
       R"({"domain":"explicit","ceilings":{"100":1,"20":0.75,"-1":0.6}})"},
  };
  for (const auto& [proposal, reference] : pairs) {
    auto a = load(holdbackPlugin(proposal));
    auto b = load(holdbackPlugin(reference));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(ceilingsOf(*a, priorities), ceilingsOf(*b, priorities)) << proposal;
  }
}

TEST(PriorityHoldbackConfigTest, SeedProposalSigmoidConfig) {
  auto policy = load(holdbackPlugin(
      R"({"strategy":"sigmoid-smoothed","minCeiling":0.6,"maxCeiling":1.0,"sigmoidSteepness":8.0,
          "sigmoidMidpoint":0.5,"sigmoidDomain":"value"})"));
  ASSERT_NE(policy, nullptr);
  const auto c = ceilingsOf(*policy, {100, 50, 0, -1});
  EXPECT_NEAR(c[1], 0.8041076402, 1e-10);
  EXPECT_NEAR(c[2], 0.6006032069, 1e-10);
}

TEST(PriorityHoldbackConfigTest, IntegralFloatPriorityKeysAreNotAccepted) {
  EXPECT_FALSE(
      policyErrorsOf(holdbackPlugin(R"({"strategy":"static","ceilings":{"1.0":0.5}})")).empty());
}

TEST(PriorityHoldbackConfigTest, NegativeStringKeysWork) {
  auto policy = load(holdbackPlugin(R"({"strategy":"static","ceilings":{"-10":0.4,"5":0.9}})"));
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(ceilingsOf(*policy, {5, -10}), (std::vector<double>{0.9, 0.4}));
}

TEST(PriorityHoldbackConfigTest, DefaultCeilingAboveLowestListedWarns) {
  auto parsed = parseJson(holdbackPlugin(
      R"({"strategy":"static","ceilings":{"100":1.0,"0":0.5},"defaultCeiling":0.8})"));
  auto policy = loadUsageLimitPolicy(parsed.value(), builtinPolicyRegistry());
  ASSERT_TRUE(policy.ok());
  ASSERT_EQ(policy.diagnostics().warnings().size(), 1u);
  EXPECT_EQ(policy.diagnostics().warnings()[0].path, "/parameters/defaultCeiling");
}

// ---- static-usage-limit-policy and soft-reflective ---------------------------------------------

TEST(StaticUsageLimitConfigTest, Table) {
  EXPECT_EQ(policyErrorsOf(R"({"type":"static-usage-limit-policy"})"), std::vector<std::string>{});
  EXPECT_EQ(
      policyErrorsOf(R"({"type":"static-usage-limit-policy","parameters":{"threshold":0.8}})"),
      std::vector<std::string>{});
  EXPECT_EQ(policyErrorsOf(R"({"type":"static-usage-limit-policy","parameters":{"threshold":0}})"),
            std::vector<std::string>{"/parameters/threshold: 0.0 is outside (0.0, 1.0]"});
  EXPECT_EQ(
      policyErrorsOf(R"({"type":"static-usage-limit-policy","parameters":{"threshold":true}})"),
      std::vector<std::string>{"/parameters/threshold: true is a boolean; expected a number"});
  EXPECT_EQ(policyErrorsOf(R"({"type":"static-usage-limit-policy","parameters":{"limit":1}})"),
            std::vector<std::string>{
                "/parameters/limit: unknown key \"limit\"; allowed keys: threshold"});
}

TEST(SoftReflectiveConfigTest, TakesNoParameters) {
  EXPECT_EQ(policyErrorsOf(R"({"type":"soft-reflective-ceiling-policy"})"),
            std::vector<std::string>{});
  EXPECT_EQ(policyErrorsOf(R"({"type":"soft-reflective-ceiling-policy","parameters":{}})"),
            std::vector<std::string>{});
  EXPECT_EQ(
      policyErrorsOf(R"({"type":"soft-reflective-ceiling-policy","parameters":{"threshold":0.5}})"),
      std::vector<std::string>{"/parameters/threshold: unknown key \"threshold\"; "
                               "soft-reflective-ceiling-policy takes no parameters"});
}

TEST(PluginSpecTest, UnknownTypeAndMissingType) {
  EXPECT_EQ(
      policyErrorsOf(R"({"type":"magic-policy"})"),
      std::vector<std::string>{
          "/type: \"magic-policy\" is not a registered type; registered: "
          "priority-holdback-policy, reservation-holdback-policy, soft-reflective-ceiling-policy, "
          "static-usage-limit-policy"});
  EXPECT_EQ(policyErrorsOf(R"({"type":7,"extra":1})"),
            (std::vector<std::string>{"/type: 7 is a number; expected a string",
                                      "/extra: unknown key \"extra\"; allowed keys: name, "
                                      "parameters, type"}));
}

// ---- EndpointPickerConfig ----------------------------------------------------------------------

TEST(EndpointPickerConfigTest, ResolvesThePolicyRef) {
  auto policy = load(R"({
    "apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
    "plugins": [
      {"type": "utilization-detector", "parameters": {"queueDepthThreshold": 5}},
      {"type": "priority-holdback-policy", "name": "dynamic-holdback",
       "parameters": {"strategy": "sigmoid-smoothed", "minCeiling": 0.6}}],
    "flowControl": {"usageLimitPolicyPluginRef": "dynamic-holdback"}})");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->name(), "dynamic-holdback");
}

TEST(EndpointPickerConfigTest, AbsentRefMeansStaticThresholdOne) {
  auto policy = load(R"({"kind": "EndpointPickerConfig", "plugins": []})");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->type(), "static-usage-limit-policy");
  EXPECT_EQ(ceilingsOf(*policy, {5, 0}), (std::vector<double>{1.0, 1.0}));
}

TEST(EndpointPickerConfigTest, AbsentRefPicksConfiguredStaticPlugin) {
  auto policy = load(R"({"plugins": [{"type": "static-usage-limit-policy",
                                      "parameters": {"threshold": 0.8}}]})");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(ceilingsOf(*policy, {0}), (std::vector<double>{0.8}));
}

// Expected messages are split over several string literals on purpose.
// NOLINTBEGIN(bugprone-suspicious-missing-comma)
TEST(EndpointPickerConfigTest, ReportsEveryPluginProblemAndABadRef) {
  const auto errors = policyErrorsOf(R"({"plugins": [
      {"type": "priority-holdback-policy", "name": "a", "parameters": {"minCeiling": 2}},
      {"type": "priority-holdback-policy", "name": "a", "parameters": {"minCeiling": 0.5}},
      {"type": "utilization-detector", "name": "util"},
      {"type": "static-usage-limit-policy", "parameters": {"threshold": -1}}],
    "flowControl": {"usageLimitPolicyPluginRef": "util"}})");
  EXPECT_EQ(errors,
            (std::vector<std::string>{
                "/plugins/1/name: duplicate plugin name \"a\" (first defined at /plugins/0); "
                "plugin names must be unique",
                "/plugins/0/parameters/minCeiling: 2.0 is outside [0.0, 1.0)",
                "/plugins/0/parameters/minCeiling: 2.0 is not below maxCeiling 1.0; minCeiling "
                "must be strictly less than maxCeiling",
                "/plugins/3/parameters/threshold: -1.0 is outside (0.0, 1.0]",
                "/flowControl/usageLimitPolicyPluginRef: \"util\" names a plugin of type "
                "\"utilization-detector\", which is not a usage limit policy"}));
  EXPECT_EQ(policyErrorsOf(R"({"plugins": [{"type": "utilization-detector", "name": "util"}],
                        "flowControl": {"usageLimitPolicyPluginRef": "util"}})"),
            std::vector<std::string>{
                "/flowControl/usageLimitPolicyPluginRef: \"util\" names a plugin of type "
                "\"utilization-detector\", which is not a usage limit policy"});
  EXPECT_EQ(policyErrorsOf(R"({"plugins": [], "flowControl": {"usageLimitPolicyPluginRef": "x"}})"),
            std::vector<std::string>{
                "/flowControl/usageLimitPolicyPluginRef: \"x\" names no plugin; defined "
                "plugins: none"});
}
// NOLINTEND(bugprone-suspicious-missing-comma)

}  // namespace
}  // namespace holdback::config
