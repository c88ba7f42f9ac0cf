// Every example config under examples/configs/ loads as a whole EndpointPickerConfig without a
// warning (but for a Go gateway plugin shown on purpose), and a controller is created from it once
// the host adds its collaborators (the `evict` callback when the file enables eviction), as
// docs/guide/getting-started.md wires it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/flow/flow_controller.hpp"

namespace holdback {
namespace {

// The example configs (endpoints.json is a pool snapshot for `holdback saturation`, not one).
std::vector<std::string> exampleConfigFiles() {
  std::vector<std::string> files;
  const std::filesystem::path dir = std::filesystem::path(HOLDBACK_SOURCE_DIR) / "examples/configs";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if ((ext == ".yaml" || ext == ".json") && entry.path().filename() != "endpoints.json") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ExampleConfigsTest, EveryExampleLoadsWithoutWarningsAndCreatesAController) {
  const std::vector<std::string> files = exampleConfigFiles();
  ASSERT_GE(files.size(), 9u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto loaded = config::loadEndpointPickerConfigFile(file);
    ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
    const config::ConfigBundle& bundle = *loaded.value();
    // The one warning an example may draw on purpose: a Go gateway plugin (flow-control.yaml
    // shows that such a file loads unchanged). No deprecated header, no unknown key.
    std::istringstream warnings(bundle.warnings.toString());
    for (std::string line; std::getline(warnings, line);) {
      EXPECT_NE(line.find("is not a holdback plugin type"), std::string::npos) << line;
    }
    EXPECT_TRUE(bundle.flowControlEnabled);
    FlowControllerOptions options = bundle.controller;
    options.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(2));
    options.onOutcome = [](Completion&&) {};
    if (options.eviction.enabled) {
      // Without the host's actuator, create() refuses a config with eviction on.
      auto refused = FlowController::create(options);
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(refused.diagnostics().toString().find("/eviction/evict"), std::string::npos);
      options.eviction.evict = [](const Revocation&) {};
    }
    auto created = FlowController::create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.diagnostics().toString();
  }
}

// A whole config with one reservation-holdback-policy whose parameters are `parameters`.
std::string reservationConfig(const std::string& parameters) {
  return R"({"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig",
             "featureGates":["flowControl"],
             "plugins":[{"type":"reservation-holdback-policy","name":"r","parameters":)" +
         parameters + R"(}],"flowControl":{"usageLimitPolicyPluginRef":"r"}})";
}

// The keys the loader accepts at `path`, from its "unknown key" error for an unknown key there.
std::set<std::string> allowedKeysOf(const std::string& parameters) {
  auto loaded = config::loadEndpointPickerConfigText(reservationConfig(parameters));
  EXPECT_FALSE(loaded.ok());
  const std::string text = loaded.diagnostics().toString();
  const std::string marker = "allowed keys: ";
  const std::size_t at = text.find(marker);
  std::set<std::string> keys;
  if (at == std::string::npos) {
    ADD_FAILURE() << text;
    return keys;
  }
  std::istringstream list(
      text.substr(at + marker.size(), text.find('\n', at) - at - marker.size()));
  for (std::string key; std::getline(list, key, ',');) {
    keys.insert(key.substr(key.find_first_not_of(' ')));
  }
  return keys;
}

std::set<std::string> keysOf(const config::OrderedJson& object) {
  std::set<std::string> keys;
  for (const auto& item : object.items()) keys.insert(item.key());
  return keys;
}

// `holdback validate --json` lists every parameter the loader accepts, with its effective value.
TEST(ExampleConfigsTest, EffectiveConfigListsEveryReservationParameter) {
  auto loaded = config::loadEndpointPickerConfigText(reservationConfig(
      R"({"sizing":"occupancy","poissonSizing":false,
          "feedback":{"targetWait":"80ms","targets":{"10":"20ms"},"maxExtra":64}})"));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const config::OrderedJson effective = config::effectiveConfig(*loaded.value());
  const config::OrderedJson& parameters = effective["usageLimitPolicy"]["parameters"];
  EXPECT_EQ(keysOf(parameters), allowedKeysOf(R"({"unknownKey":1})"));
  EXPECT_EQ(parameters["sizing"], "occupancy");
  EXPECT_EQ(parameters["poissonSizing"], false);
  const config::OrderedJson& feedback = parameters["feedback"];
  EXPECT_EQ(keysOf(feedback), allowedKeysOf(R"({"feedback":{"unknownKey":1}})"));
  EXPECT_EQ(feedback["enabled"], true);  // the block's presence turns it on
  EXPECT_EQ(feedback["targetWait"], "80ms");
  EXPECT_EQ(feedback["targets"]["10"], "20ms");
  EXPECT_EQ(feedback["maxExtra"], 64.0);
  EXPECT_EQ(feedback["interval"], "500ms");
}

}  // namespace
}  // namespace holdback
