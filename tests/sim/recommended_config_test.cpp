// examples/configs/recommended.yaml and the simulator's `recommended` arm describe the same
// configuration: the figures docs/results/recommended.md gives for the arm are the file's.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "../../examples/gateway/gateway_http.hpp"  // kDefaultConfigText
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/policy/reservation.hpp"
#include "sim/arms.hpp"
#include "sim/scenario.hpp"

namespace holdback::sim {
namespace {

const std::string kRecommendedFile =
    std::string(HOLDBACK_SIM_GOLDEN_DIR) + "/../../../examples/configs/recommended.yaml";

// A file's reservation options and a simulator arm's, field by field.
void expectSamePolicy(const ReservationOptions& f, const ReservationOptions& s) {
  EXPECT_EQ(f.epsilon, s.epsilon);
  EXPECT_EQ(f.minCeiling, s.minCeiling);
  EXPECT_EQ(f.minReserve, s.minReserve);
  EXPECT_EQ(f.minReserveShare, s.minReserveShare);
  EXPECT_EQ(f.smoothing.rise, s.smoothing.rise);
  EXPECT_EQ(f.smoothing.decay, s.smoothing.decay);
  EXPECT_EQ(f.smoothing.riseSignificance, s.smoothing.riseSignificance);
  EXPECT_EQ(f.holdReserve, s.holdReserve);
  EXPECT_EQ(f.protectiveStart, s.protectiveStart);
  EXPECT_EQ(f.poissonSizing, s.poissonSizing);
  EXPECT_EQ(f.capacityModel, s.capacityModel);
  EXPECT_EQ(f.sizing, s.sizing);
}

TEST(RecommendedConfigTest, TheFileAndTheSimulatorArmAgree) {
  auto loaded = config::loadEndpointPickerConfigFile(kRecommendedFile);
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  // No deprecated key: the hold, the protective start and the restoration's epsilon follow from
  // reserve restoration and the policy (config/detail/derived_defaults.hpp).
  EXPECT_TRUE(loaded.diagnostics().empty()) << loaded.diagnostics().toString();
  const config::ConfigBundle& bundle = *loaded.value();
  const auto* file = dynamic_cast<const ReservationPolicy*>(bundle.policy.get());
  ASSERT_NE(file, nullptr) << "the file's policy is the reservation holdback policy";

  Scenario scenario;
  ASSERT_TRUE(findScenario("default", scenario));
  Arm arm;
  ASSERT_TRUE(findArm(kRecommendedArm, arm));
  auto built = makePolicy(scenario, arm);
  ASSERT_TRUE(built.ok());
  const auto* sim = dynamic_cast<const ReservationPolicy*>(built.value().get());
  ASSERT_NE(sim, nullptr);

  // The file's minReserve is the arm's for the built-in pool (a tenth of 4 x 16 slots).
  expectSamePolicy(file->options(), sim->options());

  // The pool's saturation weighs endpoints by their slots in both (docs/results/mixed-pools.md).
  const auto* detector = dynamic_cast<const UtilizationDetector*>(bundle.controller.detector.get());
  ASSERT_NE(detector, nullptr);
  auto simDetector = makeDetector(scenario);
  ASSERT_TRUE(simDetector.ok());
  EXPECT_EQ(detector->options().aggregation, Aggregation::kCapacity);
  // The slot term: the simulator's from the pool's slots (pool.slotTerm), the file's from each
  // endpoint's slots as the host knows them.
  EXPECT_TRUE(detector->options().endpointCapacity);
  EXPECT_TRUE(scenario.pool.slotTerm);
  EXPECT_GT(
      dynamic_cast<const UtilizationDetector&>(*simDetector.value()).options().maxRunningRequests,
      0);
  EXPECT_EQ(detector->options().aggregation,
            dynamic_cast<const UtilizationDetector&>(*simDetector.value()).options().aggregation);

  const EvictionOptions& ev = bundle.controller.eviction;
  EXPECT_TRUE(bundle.enableEviction);
  EXPECT_EQ(ev.revokeOnBlock, arm.revokeOnBlock);
  EXPECT_EQ(ev.restoreReserve.enabled, arm.restoreReserve);
  EXPECT_EQ(ev.restoreReserve.epsilon, arm.restoreEpsilon);
  EXPECT_EQ(ev.restoreReserve.evictionBudget, arm.evictionBudget);
  EXPECT_EQ(ev.restoreReserve.evictionBurst, arm.evictionBurst);
  EXPECT_EQ(ev.restoreReserve.wasteBudget, arm.wasteBudget);
}

// recommended-hol is the recommended arm with one change, the eviction trigger: at a head-of-line
// block instead of reserve restoration; it runs only when named.
TEST(RecommendedConfigTest, TheHeadOfLineVariantChangesOnlyTheTrigger) {
  Scenario scenario;
  ASSERT_TRUE(findScenario("default", scenario));
  Arm recommended;
  Arm hol;
  ASSERT_TRUE(findArm(kRecommendedArm, recommended));
  ASSERT_TRUE(findArm("recommended-hol", hol));
  for (const Arm& a : allArms()) EXPECT_NE(a.name, "recommended-hol");
  EXPECT_TRUE(hol.eviction);
  EXPECT_TRUE(hol.revokeOnBlock);
  EXPECT_FALSE(hol.restoreReserve);
  EXPECT_FALSE(recommended.revokeOnBlock);
  EXPECT_TRUE(recommended.restoreReserve);
  EXPECT_EQ(hol.fitFirst, recommended.fitFirst);
  EXPECT_EQ(hol.hybridConcurrency, recommended.hybridConcurrency);
  EXPECT_EQ(hol.policy(scenario), recommended.policy(scenario));
  auto a = makePolicy(scenario, hol);
  auto b = makePolicy(scenario, recommended);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto& x = dynamic_cast<const ReservationPolicy&>(*a.value()).options();
  const auto& y = dynamic_cast<const ReservationPolicy&>(*b.value()).options();
  EXPECT_EQ(x.holdReserve, y.holdReserve);
  EXPECT_EQ(x.protectiveStart, y.protectiveStart);
  EXPECT_EQ(x.minReserve, y.minReserve);
}

// The opt-in arm gateway-default is holdback-gateway's built-in configuration.
TEST(RecommendedConfigTest, TheGatewayDefaultArmIsTheGatewaysBuiltInConfiguration) {
  auto loaded = config::loadEndpointPickerConfigText(gateway::kDefaultConfigText);
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const config::ConfigBundle& bundle = *loaded.value();
  const auto* file = dynamic_cast<const ReservationPolicy*>(bundle.policy.get());
  ASSERT_NE(file, nullptr);
  Scenario scenario;
  ASSERT_TRUE(findScenario("default", scenario));
  Arm arm;
  ASSERT_TRUE(findArm("gateway-default", arm));
  for (const Arm& a : allArms()) EXPECT_NE(a.name, "gateway-default");  // only when named
  auto built = makePolicy(scenario, arm);
  ASSERT_TRUE(built.ok()) << built.diagnostics().toString();
  expectSamePolicy(file->options(),
                   dynamic_cast<const ReservationPolicy&>(*built.value()).options());
  // No slot term in either.
  const auto* detector = dynamic_cast<const UtilizationDetector*>(bundle.controller.detector.get());
  ASSERT_NE(detector, nullptr);
  EXPECT_EQ(detector->options().maxRunningRequests, 0);
  EXPECT_FALSE(detector->options().endpointCapacity);
  auto simDetector = makeDetector(scenario, arm);
  ASSERT_TRUE(simDetector.ok());
  const auto& simOptions = dynamic_cast<const UtilizationDetector&>(*simDetector.value()).options();
  EXPECT_EQ(simOptions.maxRunningRequests, 0);
  EXPECT_FALSE(simOptions.endpointCapacity);
  EXPECT_EQ(detector->options().aggregation, simOptions.aggregation);
  const EvictionOptions& ev = bundle.controller.eviction;
  EXPECT_TRUE(bundle.enableEviction);
  EXPECT_TRUE(arm.eviction);
  EXPECT_EQ(ev.revokeOnBlock, arm.revokeOnBlock);
  EXPECT_EQ(ev.restoreReserve.enabled, arm.restoreReserve);
  EXPECT_EQ(ev.restoreReserve.epsilon, arm.restoreEpsilon);
  EXPECT_TRUE(arm.fitFirst);
}

}  // namespace
}  // namespace holdback::sim
