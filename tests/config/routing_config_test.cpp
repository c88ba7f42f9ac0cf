// flowControl.routing: the file's switch for EndpointPicker's priority routing
// (EndpointPickerOptions::priorityRouting): its default, its values, its errors (path, value and
// the allowed values), that it loads with the flowControl gate off, and the effective config.
#include <gtest/gtest.h>

#include <string>

#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"

namespace holdback::config {
namespace {

BundleResult loadRouting(const std::string& flowControl, bool gate = true) {
  return loadEndpointPickerConfigText(
      std::string(R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig", )") +
      (gate ? R"("featureGates": ["flowControl"], )" : "") + R"("flowControl": )" + flowControl +
      "}");
}

TEST(RoutingConfigTest, DefaultsToInFlightAndReadsPriority) {
  const auto plain = loadRouting("{}");
  ASSERT_TRUE(plain.ok()) << plain.diagnostics().toString();
  EXPECT_EQ(plain.value()->routing, Routing::kInFlight);
  const auto priority = loadRouting(R"({"routing": "priority"})");
  ASSERT_TRUE(priority.ok()) << priority.diagnostics().toString();
  EXPECT_EQ(priority.value()->routing, Routing::kPriority);
  EXPECT_EQ(effectiveConfig(*priority.value())["routing"], "priority");
  const auto inFlight = loadRouting(R"({"routing": "in-flight"})");
  ASSERT_TRUE(inFlight.ok()) << inFlight.diagnostics().toString();
  EXPECT_EQ(inFlight.value()->routing, Routing::kInFlight);
}

TEST(RoutingConfigTest, LoadsWithTheGateOffWithoutAWarning) {
  const auto loaded = loadRouting(R"({"routing": "priority"})", false);
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_EQ(loaded.value()->routing, Routing::kPriority);
  EXPECT_EQ(loaded.value()->warnings.toString().find("routing"), std::string::npos)
      << loaded.value()->warnings.toString();
}

TEST(RoutingConfigTest, AnUnknownValueNamesThePathTheValueAndTheChoices) {
  for (const char* value : {R"("fewest")", "true", "1"}) {
    const auto loaded = loadRouting(std::string(R"({"routing": )") + value + "}");
    ASSERT_FALSE(loaded.ok()) << value;
    ASSERT_EQ(loaded.diagnostics().errors().size(), 1u) << loaded.diagnostics().toString();
    const Diagnostic d = loaded.diagnostics().errors().front();
    EXPECT_EQ(d.path, "/flowControl/routing");
    EXPECT_NE(d.message.find("in-flight"), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("priority"), std::string::npos) << d.message;
  }
  const auto loaded = loadRouting(R"({"routing": "fewest"})");
  EXPECT_NE(loaded.diagnostics().toString().find("\"fewest\""), std::string::npos)
      << loaded.diagnostics().toString();
}

}  // namespace
}  // namespace holdback::config
