// flowControl.profile: reference gives the Go endpoint picker's arithmetic: Go's own detector
// vectors (upstream-reference.md §4.2) and policy vectors (§2.2) through a loaded config.
#include "holdback/config/reference_profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "detector/go_detector_vectors.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback::config {
namespace {

const TimePoint kProfileNow = TimePoint{} + std::chrono::hours(1000);

// Go's detector-test parameters, with `extra` parameters and `flow_control` fields.
std::string goDetectorConfig(const std::string& flow_control, const std::string& extra = "") {
  return R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
     "featureGates": ["flowControl"],
     "plugins": [{"name": "util", "type": "utilization-detector", "parameters":
                  {"queueDepthThreshold": 5, "kvCacheUtilThreshold": 0.9,
                   "metricsStalenessThreshold": "100ms")" +
         extra + R"(}},
                 {"name": "holdback", "type": "priority-holdback-policy",
                  "parameters": {"shape": "linear", "domain": "rank",
                                 "minCeiling": 0.2, "maxCeiling": 0.9}}],
     "flowControl": {"saturationDetector": {"pluginRef": "util"},
                     "usageLimitPolicyPluginRef": "holdback")" +
         flow_control + "}}";
}

std::shared_ptr<const ConfigBundle> loadProfileConfig(const std::string& text) {
  const auto loaded = loadEndpointPickerConfigText(text);
  EXPECT_TRUE(loaded) << loaded.diagnostics().toString();
  return loaded ? loaded.value() : nullptr;
}

double saturationOf(const ConfigBundle& b, const char* label) {
  for (const auto& v : test_support::goUtilizationSaturationVectors(kProfileNow)) {
    if (std::string(v.label) == label) return b.detector->saturation(v.endpoints, kProfileNow);
  }
  ADD_FAILURE() << label;
  return NAN;
}

TEST(ReferenceProfileTest, ReproducesGoDetectorVectorsExactly) {
  const auto b = loadProfileConfig(goDetectorConfig(R"(, "profile": "reference")"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->profile, "reference");
  EXPECT_EQ(b->detectors.at("util"), b->detector);
  for (const auto& v : test_support::goUtilizationSaturationVectors(kProfileNow)) {
    EXPECT_NEAR(b->detector->saturation(v.endpoints, kProfileNow), v.expected, 1e-12) << v.label;
  }
  const auto& util = dynamic_cast<const UtilizationDetector&>(*b->detector);
  EXPECT_FALSE(b->dispatchLedger.correction);
  EXPECT_EQ(util.options().telemetryValidation, TelemetryValidation::kReference);
}

TEST(ReferenceProfileTest, DefaultProfileCapsWhereGoDoesNot) {
  const auto b = loadProfileConfig(goDetectorConfig(""));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->profile, "holdback");
  // Go: 2.0 / 1.6 / 2.03; holdback's default endpointScoreCap of 1.0: 1.0 / 0.6 / 1.0.
  EXPECT_DOUBLE_EQ(saturationOf(*b, "queue overload"), 1.0);
  EXPECT_NEAR(saturationOf(*b, "fresh + overloaded"), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(saturationOf(*b, "three mixed"), 1.0);
  const auto r = loadProfileConfig(goDetectorConfig(R"(, "profile": "reference")"));
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(saturationOf(*r, "queue overload"), 2.0);
  EXPECT_NEAR(saturationOf(*r, "fresh + overloaded"), 1.6, 1e-12);
  EXPECT_NEAR(saturationOf(*r, "three mixed"), (1.0 + 4.0 + 1.1) / 3, 1e-12);
}

TEST(ReferenceProfileTest, ExplicitParametersKeepTheirValues) {
  const auto b = loadProfileConfig(
      goDetectorConfig(R"(, "profile": "reference")",
                       R"(, "endpointScoreCap": 1.0, "dispatchLedger": {"correction": true})"));
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(saturationOf(*b, "queue overload"), 1.0);
  const auto& util = dynamic_cast<const UtilizationDetector&>(*b->detector);
  EXPECT_TRUE(b->dispatchLedger.correction);  // the deprecated place still counts
  EXPECT_EQ(util.options().telemetryValidation, TelemetryValidation::kReference);
  const auto n = loadProfileConfig(
      goDetectorConfig(R"(, "profile": "reference", "dispatchLedger": {"correction": true})"));
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->dispatchLedger.correction);
  const auto u = loadProfileConfig(
      goDetectorConfig(R"(, "profile": "reference", "dispatchLedger": {"replicas": 2})"));
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->dispatchLedger.correction);
  EXPECT_EQ(u->dispatchLedger.replicas, 2);
}

TEST(ReferenceProfileTest, TheDefaultDetectorFollowsTheProfile) {
  const auto b = loadProfileConfig(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "flowControl": {"profile": "reference"}})");
  ASSERT_TRUE(b);
  const auto& util = dynamic_cast<const UtilizationDetector&>(*b->detector);
  EXPECT_TRUE(std::isinf(util.options().endpointScoreCap));
  EXPECT_FALSE(b->dispatchLedger.correction);
}

// The flow controller a host builds from bundle.controller runs the reference detector too, for
// a declared detector and for the loader's default one.
TEST(ReferenceProfileTest, TheControllersDetectorIsTheReferenceOne) {
  for (const std::string& text :
       {goDetectorConfig(R"(, "profile": "reference")"),
        std::string(R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "flowControl": {"profile": "reference"}})")}) {
    const auto b = loadProfileConfig(text);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->controller.detector, b->detector) << text;
    const auto* util = dynamic_cast<const UtilizationDetector*>(b->controller.detector.get());
    ASSERT_NE(util, nullptr) << text;
    EXPECT_TRUE(std::isinf(util->options().endpointScoreCap)) << text;
    EXPECT_EQ(util->options().telemetryValidation, TelemetryValidation::kReference) << text;
  }
}

TEST(ReferenceProfileTest, PolicyVectorsAreGoVectorsUnderEitherProfile) {
  // upstream-reference.md §2.2, rank domain, [0.2, 0.9] over five priorities, bit for bit.
  for (const char* fc : {"", R"(, "profile": "reference")"}) {
    const auto b = loadProfileConfig(goDetectorConfig(fc));
    ASSERT_TRUE(b);
    std::vector<double> c(5, 1.0);
    b->policy->computeLimit(0.0, std::vector<Priority>{50, 40, 30, 20, 10}, c);
    EXPECT_EQ(c, (std::vector<double>{0.9, 0.7250000000000001, 0.55, 0.3750000000000001,
                                      0.20000000000000007}))
        << fc;
  }
}

TEST(ReferenceProfileTest, IsValidatedAndListedInTheEffectiveConfig) {
  const auto bad = loadEndpointPickerConfigText(goDetectorConfig(R"(, "profile": "go")"));
  ASSERT_FALSE(bad);
  const std::string text = bad.diagnostics().toString();
  EXPECT_NE(text.find("/flowControl/profile"), std::string::npos) << text;
  EXPECT_NE(text.find("reference"), std::string::npos) << text;
  const auto b = loadProfileConfig(goDetectorConfig(R"(, "profile": "reference")"));
  ASSERT_TRUE(b);
  const std::string effective = effectiveConfig(*b).dump();
  EXPECT_NE(effective.find(R"("profile":"reference")"), std::string::npos) << effective;
  EXPECT_NE(effective.find(R"("telemetryValidation":"reference")"), std::string::npos) << effective;
  EXPECT_NE(effective.find(R"("endpointScoreCap":"none")"), std::string::npos) << effective;
}

}  // namespace
}  // namespace holdback::config
