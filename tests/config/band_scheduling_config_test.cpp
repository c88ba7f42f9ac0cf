// flowControl.bandScheduling and the bands' weight: loaded, validated with their paths (every
// error at once), shown in the effective config, and reaching the controller.
#include "holdback/config/endpoint_picker_config.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "holdback/config/effective_config.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"

namespace holdback::config {
namespace {

const std::string kBandSchedulingHead =
    R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
        "featureGates": ["flowControl"], "flowControl": )";

TEST(BandSchedulingConfigTest, LoadsAndShowsInTheEffectiveConfig) {
  const auto loaded = loadEndpointPickerConfigText(kBandSchedulingHead + R"({
      "bandScheduling": {"schedule": "weighted-fair", "activationThreshold": 0.7},
      "defaultPriorityBand": {"weight": 2},
      "priorityBands": [{"priority": 10, "weight": 5}, {"priority": 1}]}})");
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const FlowControllerOptions& o = loaded.value()->controller;
  EXPECT_EQ(o.bandScheduling.schedule, BandSchedule::kWeightedFair);
  EXPECT_DOUBLE_EQ(o.bandScheduling.activationThreshold, 0.7);
  EXPECT_DOUBLE_EQ(o.defaultBand.weight, 2.0);
  EXPECT_DOUBLE_EQ(o.bands.at(0).weight, 5.0);
  EXPECT_DOUBLE_EQ(o.bands.at(1).weight, 0.0);
  const OrderedJson e = effectiveConfig(*loaded.value());
  EXPECT_EQ(e["bandScheduling"]["schedule"], "weighted-fair");
  EXPECT_EQ(e["bandScheduling"]["activationThreshold"], 0.7);
  EXPECT_EQ(e["defaultPriorityBand"]["weight"], 2.0);
  EXPECT_EQ(e["priorityBands"][0]["weight"], 5.0);
  EXPECT_EQ(e["priorityBands"][1]["weight"], 0.0);
  EXPECT_NE(
      describeBundle(*loaded.value()).find("band scheduling: weighted-fair at saturation >= 0.7"),
      std::string::npos);
}

TEST(BandSchedulingConfigTest, DefaultsToStrictPriority) {
  const auto loaded = loadEndpointPickerConfigText(kBandSchedulingHead + "{}}");
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const OrderedJson e = effectiveConfig(*loaded.value());
  EXPECT_EQ(e["bandScheduling"]["schedule"], "strict-priority");
  EXPECT_EQ(e["bandScheduling"]["activationThreshold"], kDefaultBandActivationThreshold);
  EXPECT_EQ(describeBundle(*loaded.value()).find("band scheduling"), std::string::npos);
}

TEST(BandSchedulingConfigTest, ErrorsNamePathValueAndWhatIsAllowedAllAtOnce) {
  const auto loaded = loadEndpointPickerConfigText(kBandSchedulingHead + R"({
      "bandScheduling": {"schedule": "wfq", "activationThreshold": 1.5, "window": 3},
      "defaultNegativePriorityBand": {"weight": "heavy"},
      "priorityBands": [{"priority": 10, "weight": 0.5}, {"priority": 1, "weight": 1e7}]}})");
  ASSERT_FALSE(loaded.ok());
  std::map<std::string, std::string> e;
  for (const Diagnostic& d : loaded.diagnostics().errors()) e[d.path] += d.message;
  EXPECT_EQ(e.size(), 6u) << loaded.diagnostics().toString();
  EXPECT_NE(e["/flowControl/bandScheduling/schedule"].find(
                R"(expected one of "strict-priority", "weighted-fair")"),
            std::string::npos)
      << e["/flowControl/bandScheduling/schedule"];
  EXPECT_EQ(e["/flowControl/bandScheduling/activationThreshold"],
            "1.5 is outside [0, 1); the saturation at and above which weighted-fair band "
            "scheduling is active");
  EXPECT_NE(e["/flowControl/bandScheduling/window"].find("allowed keys: activationThreshold, "
                                                         "schedule"),
            std::string::npos);
  EXPECT_NE(e["/flowControl/defaultNegativePriorityBand/weight"].find("\"heavy\" is a string"),
            std::string::npos)
      << e["/flowControl/defaultNegativePriorityBand/weight"];
  EXPECT_NE(e["/flowControl/priorityBands/0/weight"].find("0.5 is not a band weight"),
            std::string::npos);
  EXPECT_NE(e["/flowControl/priorityBands/1/weight"].find("1e+07 is not a band weight: 0 "
                                                          "(derived from the band's position) "
                                                          "or a number in [1, 1000000]"),
            std::string::npos)
      << e["/flowControl/priorityBands/1/weight"];
}

TEST(BandSchedulingConfigTest, NotAnObjectIsReported) {
  const auto loaded =
      loadEndpointPickerConfigText(kBandSchedulingHead + R"({"bandScheduling": "weighted-fair"}})");
  ASSERT_FALSE(loaded.ok());
  ASSERT_EQ(loaded.diagnostics().errors().size(), 1u);
  EXPECT_EQ(loaded.diagnostics().errors()[0].path, "/flowControl/bandScheduling");
}

TEST(BandSchedulingConfigTest, VtcFairnessLoadsWithItsParameters) {
  const std::string head = R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
      "featureGates": ["flowControl"], "plugins": [{"name": "vtc", "type": "vtc-fairness-policy",
      "parameters": )";
  const auto loaded =
      loadEndpointPickerConfigText(head + R"({"requestCost": 16, "tokenWeight": 0.5}}],
      "flowControl": {"priorityBands": [{"priority": 1, "fairnessPolicyRef": "vtc"},
                                        {"priority": 2, "fairnessPolicyRef": "vtc-fairness-policy"}]}})");
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const auto* vtc =
      dynamic_cast<const VtcFairnessPolicy*>(loaded.value()->controller.bands.at(0).fairness.get());
  ASSERT_NE(vtc, nullptr);
  EXPECT_DOUBLE_EQ(vtc->options().requestCost, 16.0);
  EXPECT_DOUBLE_EQ(vtc->options().tokenWeight, 0.5);
  const OrderedJson e = effectiveConfig(*loaded.value());
  EXPECT_EQ(e["priorityBands"][1]["fairnessPolicy"]["type"], "vtc-fairness-policy");
  EXPECT_EQ(e["priorityBands"][1]["fairnessPolicy"]["parameters"]["requestCost"], 16.0);
  EXPECT_EQ(e["priorityBands"][0]["fairnessPolicy"]["parameters"]["tokenWeight"],
            1.0);  // undeclared ref: defaults

  const auto bad = loadEndpointPickerConfigText(
      head + R"({"requestCost": 0, "tokenWeight": -1, "inputWeight": 2}}]})");
  ASSERT_FALSE(bad.ok());
  std::map<std::string, std::string> errors;
  for (const Diagnostic& d : bad.diagnostics().errors()) errors[d.path] += d.message;
  EXPECT_EQ(errors.size(), 3u) << bad.diagnostics().toString();
  EXPECT_EQ(errors["/plugins/0/parameters/requestCost"],
            "0.0 is outside (0, 1e9]; the tokens charged per request");
  EXPECT_EQ(errors["/plugins/0/parameters/tokenWeight"],
            "-1.0 is outside [0, 1e6]; the weight of a declared token");
  EXPECT_NE(errors["/plugins/0/parameters/inputWeight"].find("requestCost, tokenWeight"),
            std::string::npos);
}

}  // namespace
}  // namespace holdback::config
