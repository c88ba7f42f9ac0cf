// Defaults a file gets from the rest of the file (config/detail/derived_defaults.hpp), and the
// deprecated keys behind them: a key the file sets still applies, with a warning.
#include <gtest/gtest.h>

#include <string>

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback::config {
namespace {

// An EndpointPickerConfig with a reservation policy (extra parameters `policy`), a utilization
// detector and the flowControl keys `flow`.
std::string derivedFile(const std::string& policy, const std::string& flow) {
  return R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
    "featureGates": ["flowControl"],
    "plugins": [{"name": "util", "type": "utilization-detector"},
                {"name": "res", "type": "reservation-holdback-policy",
                 "parameters": {"epsilon": 0.03)" +
         policy + R"(}}],
    "flowControl": {"usageLimitPolicyPluginRef": "res", "saturationDetector": {"pluginRef": "util"})" +
         flow + "}}";
}

const ReservationOptions& derivedPolicy(const ConfigBundle& b) {
  EXPECT_EQ(b.policy, b.controller.policy);
  EXPECT_EQ(b.policies.at("res"), b.policy);
  return dynamic_cast<const ReservationPolicy&>(*b.policy).options();
}

constexpr const char* kDerivedRestoration =
    R"(, "enableEviction": true, "eviction": {"revokeOnBlock": false,
        "restoreReserve": {"enabled": true}})";

TEST(DerivedDefaultsTest, RestorationTurnsTheHoldAndTheProtectiveStartOff) {
  const auto loaded = loadEndpointPickerConfigText(derivedFile("", kDerivedRestoration));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_TRUE(loaded.diagnostics().empty()) << loaded.diagnostics().toString();
  const ReservationOptions& o = derivedPolicy(*loaded.value());
  EXPECT_FALSE(o.holdReserve);
  EXPECT_FALSE(o.protectiveStart);
  EXPECT_EQ(o.epsilon, 0.03);
  // Restoration aims for the policy's epsilon.
  EXPECT_EQ(loaded.value()->controller.eviction.restoreReserve.epsilon, 0.03);
}

TEST(DerivedDefaultsTest, WithoutRestorationThePolicyKeepsItsDefaults) {
  for (const char* flow : {"", R"(, "enableEviction": true)",
                           // The block without eviction enabled restores nothing.
                           R"(, "eviction": {"restoreReserve": {"enabled": true}})"}) {
    const auto loaded = loadEndpointPickerConfigText(derivedFile("", flow));
    ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
    const ReservationOptions& o = derivedPolicy(*loaded.value());
    EXPECT_TRUE(o.holdReserve) << flow;
    EXPECT_TRUE(o.protectiveStart) << flow;
    EXPECT_EQ(loaded.value()->controller.eviction.restoreReserve.epsilon, 0.01) << flow;
  }
}

TEST(DerivedDefaultsTest, DeprecatedKeysTheFileSetsStillApply) {
  const auto loaded = loadEndpointPickerConfigText(
      derivedFile(R"(, "holdReserve": true, "protectiveStart": true)",
                  R"(, "enableEviction": true, "eviction": {"revokeOnBlock": false,
                      "restoreReserve": {"epsilon": 0.2}})"));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const ReservationOptions& o = derivedPolicy(*loaded.value());
  EXPECT_TRUE(o.holdReserve);
  EXPECT_TRUE(o.protectiveStart);
  EXPECT_EQ(loaded.value()->controller.eviction.restoreReserve.epsilon, 0.2);
  std::string paths;
  for (const Diagnostic& w : loaded.diagnostics().warnings()) {
    EXPECT_EQ(w.message.rfind("deprecated (not a documented key any more; the value still "
                              "applies): remove it; ",
                              0),
              0u)
        << w.toString();
    paths += w.path + " ";
  }
  EXPECT_EQ(paths,
            "/plugins/1/parameters/holdReserve /plugins/1/parameters/protectiveStart "
            "/flowControl/eviction/restoreReserve/epsilon ");
}

TEST(DerivedDefaultsTest, ReplicasWithoutSyncStartNothingPastTheKvThreshold) {
  for (const int replicas : {1, 3}) {
    const auto loaded = loadEndpointPickerConfigText(
        derivedFile("", R"(, "dispatchLedger": {"replicas": )" + std::to_string(replicas) + "}"));
    ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
    EXPECT_TRUE(loaded.diagnostics().empty()) << loaded.diagnostics().toString();
    const ConfigBundle& b = *loaded.value();
    EXPECT_EQ(b.detector, b.controller.detector);
    EXPECT_EQ(b.detectors.at("util"), b.detector);
    EXPECT_EQ(dynamic_cast<const UtilizationDetector&>(*b.detector).options().kvStartPastThreshold,
              replicas == 1);
  }
  // The file's own value applies (with the deprecation warning).
  const auto loaded = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"],
          "plugins": [{"name": "util", "type": "utilization-detector",
                       "parameters": {"kvStartPastThreshold": true}}],
          "flowControl": {"saturationDetector": {"pluginRef": "util"},
                          "dispatchLedger": {"replicas": 3}}})");
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_EQ(loaded.diagnostics().warnings().size(), 1u) << loaded.diagnostics().toString();
  EXPECT_TRUE(dynamic_cast<const UtilizationDetector&>(*loaded.value()->detector)
                  .options()
                  .kvStartPastThreshold);
}

}  // namespace
}  // namespace holdback::config
