// The flow plugins' registries (config/flow_plugin_config.hpp): every built-in type builds under
// its name, an unknown type and an unexpected parameter are errors at their paths, and
// program-aware-fairness reads its parameters (as upstream spells them) from a whole file.
#include "holdback/config/flow_plugin_config.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "holdback/config/endpoint_picker_config.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

// Builds `type` from `registry` as the plugin at /plugins/0 (no parameters) and returns the
// built plugin's type, or every error.
template <class Interface>
std::string builtType(const config::PluginRegistry<Interface>& registry, const std::string& type) {
  const config::PluginSpec spec{type, type, nullptr, "/plugins/0"};
  auto made = registry.create(spec);
  if (!made) return made.diagnostics().toString();
  return std::string(made.value()->type());
}

// The registry holds exactly `types`, and each builds a plugin of that type.
template <class Interface>
void expectEveryTypeBuilds(const config::PluginRegistry<Interface>& registry,
                           const std::vector<std::string>& types) {
  EXPECT_EQ(registry.types(), types);
  for (const std::string& type : types) EXPECT_EQ(builtType(registry, type), type);
}

TEST(FlowPluginConfigTest, EveryBuiltinFairnessTypeResolves) {
  expectEveryTypeBuilds(config::builtinFairnessRegistry(),
                        {"global-strict-fairness-policy", "program-aware-fairness",
                         "round-robin-fairness-policy", "vtc-fairness-policy"});
}

TEST(FlowPluginConfigTest, EveryBuiltinOrderingTypeResolves) {
  expectEveryTypeBuilds(
      config::builtinOrderingRegistry(),
      {"edf-ordering-policy", "fcfs-ordering-policy", "slo-deadline-ordering-policy"});
}

TEST(FlowPluginConfigTest, EveryBuiltinEvictionTypeResolves) {
  const auto filters = config::builtinEvictionFilterRegistry();
  EXPECT_EQ(filters.types(), std::vector<std::string>{"sheddable-eviction-filter"});
  const auto filter = filters.create({"sheddable-eviction-filter", "f", nullptr, "/plugins/0"});
  ASSERT_TRUE(filter) << filter.diagnostics().toString();
  EXPECT_EQ(filter.value()->name(), "sheddable-eviction-filter");
  const auto orders = config::builtinEvictionOrderRegistry();
  EXPECT_EQ(orders.types(), std::vector<std::string>{"priority-then-time-eviction-order-policy"});
  const auto order =
      orders.create({"priority-then-time-eviction-order-policy", "o", nullptr, "/plugins/1"});
  ASSERT_TRUE(order) << order.diagnostics().toString();
  EXPECT_EQ(order.value()->name(), "priority-then-time-eviction-order-policy");
}

TEST(FlowPluginConfigTest, UnknownTypeIsAnErrorAtItsPath) {
  EXPECT_EQ(builtType(config::builtinFairnessRegistry(), "fcfs-ordering-policy"),
            "error: /plugins/0/type: \"fcfs-ordering-policy\" is not a registered type; "
            "registered: global-strict-fairness-policy, program-aware-fairness, "
            "round-robin-fairness-policy, vtc-fairness-policy\n");
  EXPECT_EQ(builtType(config::builtinOrderingRegistry(), "lifo-ordering-policy"),
            "error: /plugins/0/type: \"lifo-ordering-policy\" is not a registered type; "
            "registered: edf-ordering-policy, fcfs-ordering-policy, "
            "slo-deadline-ordering-policy\n");
}

TEST(FlowPluginConfigTest, APluginWithoutParametersRejectsAnyAtTheirPath) {
  const auto parameters = config::parseJson(R"({"weight": 2})");
  ASSERT_TRUE(parameters);
  const config::PluginSpec spec{"edf-ordering-policy", "edf", &parameters.value(), "/plugins/2"};
  const auto made = config::builtinOrderingRegistry().create(spec);
  ASSERT_FALSE(made);
  EXPECT_NE(made.diagnostics().toString().find("/plugins/2/parameters/weight"), std::string::npos)
      << made.diagnostics().toString();
}

TEST(ProgramAwareFairnessTest, LoadsFromAnEndpointPickerConfigAndIsShared) {
  const auto loaded = config::loadEndpointPickerConfigText(R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: program-aware-fairness
  parameters: {strategy: las, lasWeightService: 0.7, lasWeightHeadWait: 0.3,
               lasHalfLifeSeconds: 30, evictionTtlSeconds: 0, evictionSweepSeconds: 60}
- type: slo-deadline-ordering-policy
flowControl:
  priorityBands:
  - {priority: 10, fairnessPolicyRef: program-aware-fairness,
     orderingPolicyRef: slo-deadline-ordering-policy}
  - {priority: 0, fairnessPolicyRef: program-aware-fairness}
)");
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  EXPECT_TRUE(loaded.diagnostics().warnings().empty()) << loaded.diagnostics().toString();
  const auto& bands = loaded.value()->controller.bands;
  ASSERT_EQ(bands.size(), 2u);
  EXPECT_EQ(bands[0].fairness, bands[1].fairness);  // one program table for the file
  const auto* p = dynamic_cast<const ProgramAwareFairnessPolicy*>(bands[0].fairness.get());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->options().weightService, 0.7);
  EXPECT_EQ(p->options().halfLife, Duration(30s));
  EXPECT_EQ(p->options().evictionTtl, Duration::zero());
  EXPECT_EQ(bands[0].ordering->type(), "slo-deadline-ordering-policy");
  // Undeclared, a band ref gets the defaults, also shared.
  const auto undeclared = config::loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "flowControl": {"priorityBands": [
            {"priority": 1, "fairnessPolicyRef": "program-aware-fairness"},
            {"priority": 2, "fairnessPolicyRef": "program-aware-fairness"}]}})");
  ASSERT_TRUE(undeclared) << undeclared.diagnostics().toString();
  EXPECT_EQ(undeclared.value()->controller.bands[0].fairness,
            undeclared.value()->controller.bands[1].fairness);
  // Bad parameters name their path and what is allowed.
  const auto bad = config::loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "plugins": [{"type": "program-aware-fairness",
                       "parameters": {"strategy": "vtc", "lasWeightService": -1,
                                      "evictionSweepSeconds": 0, "bogus": 1}}]})");
  ASSERT_FALSE(bad);
  const std::string errors = bad.diagnostics().toString();
  for (const char* path :
       {"/plugins/0/parameters/strategy", "/plugins/0/parameters/lasWeightService",
        "/plugins/0/parameters/evictionSweepSeconds", "/plugins/0/parameters/bogus"}) {
    EXPECT_NE(errors.find(path), std::string::npos) << path << "\n" << errors;
  }
}

}  // namespace
}  // namespace holdback
