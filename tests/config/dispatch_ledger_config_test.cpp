// flowControl.dispatchLedger: the host's DispatchLedger options in the bundle, beside either
// detector; the deprecated place (the utilization detector's parameters.dispatchLedger) with its
// warning; both places an error; the effective configuration prints the block once, at its place.
#include "holdback/config/dispatch_ledger_config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"

namespace holdback::config {
namespace {

// A whole file with `plugins` and `flow` spliced into its plugin list and flowControl block.
std::string ledgerConfigFile(const std::string& plugins, const std::string& flow,
                             const std::string& gates = R"(["flowControl"])") {
  return R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
     "featureGates": )" +
         gates + R"(, "plugins": [)" + plugins + R"(], "flowControl": {)" + flow + "}}";
}

std::vector<std::string> ledgerMessages(const Diagnostics& d, bool errors) {
  std::vector<std::string> out;
  for (const Diagnostic& x : errors ? d.errors() : d.warnings()) out.push_back(x.toString());
  return out;
}

constexpr const char* kLedgerUtil7 =
    R"({"name": "util", "type": "utilization-detector", "parameters": {"queueDepthThreshold": 7}})";
constexpr const char* kLedgerConc =
    R"({"name": "conc", "type": "concurrency-detector", "parameters": {"maxConcurrency": 8}})";

TEST(DispatchLedgerConfigTest, TheBlockLoadsIntoTheBundleWithEitherDetector) {
  const std::string block = R"("dispatchLedger": {"correction": false,
      "scrapeMarginRequests": 3, "dispatchBudget": true, "budgetQueueDepth": 9, "replicas": 4,
      "slotCountFromScrapes": false, "creditCompletions": true, "reconcileInFlight": false})";
  for (const char* ref : {"util", "conc"}) {
    const auto loaded = loadEndpointPickerConfigText(ledgerConfigFile(
        std::string(kLedgerUtil7) + ", " + kLedgerConc,
        R"("saturationDetector": {"pluginRef": ")" + std::string(ref) + R"("}, )" + block));
    ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
    // Five of the keys are deprecated: each warns at its path, and its value still applies.
    std::vector<std::string> warned;
    for (const Diagnostic& w : loaded.diagnostics().warnings()) {
      EXPECT_NE(w.message.find("deprecated (not a documented key any more; the value still "
                               "applies)"),
                std::string::npos)
          << w.toString();
      warned.push_back(w.path);
    }
    EXPECT_EQ(warned, (std::vector<std::string>{"/flowControl/dispatchLedger/scrapeMarginRequests",
                                                "/flowControl/dispatchLedger/slotCountFromScrapes",
                                                "/flowControl/dispatchLedger/creditCompletions",
                                                "/flowControl/dispatchLedger/reconcileInFlight",
                                                "/flowControl/dispatchLedger/budgetQueueDepth"}));
    const DispatchLedgerOptions& l = loaded.value()->dispatchLedger;
    EXPECT_FALSE(l.correction) << ref;
    EXPECT_EQ(l.scrapeMarginRequests, 3) << ref;
    EXPECT_TRUE(l.dispatchBudget) << ref;
    EXPECT_EQ(l.budgetQueueDepth, 9) << ref;
    EXPECT_EQ(l.replicas, 4) << ref;
    EXPECT_FALSE(l.slotCountFromScrapes) << ref;
    EXPECT_TRUE(l.creditCompletions) << ref;
    EXPECT_FALSE(l.reconcileInFlight) << ref;
  }
}

TEST(DispatchLedgerConfigTest, BudgetQueueDepthFollowsTheUtilizationDetectorUnlessGiven) {
  const auto util = loadEndpointPickerConfigText(
      ledgerConfigFile(kLedgerUtil7, R"("saturationDetector": {"pluginRef": "util"})"));
  ASSERT_TRUE(util.ok()) << util.diagnostics().toString();
  const DispatchLedgerOptions& d = util.value()->dispatchLedger;
  EXPECT_EQ(d.budgetQueueDepth, 7);
  // The rest: DispatchLedgerOptions' defaults.
  EXPECT_TRUE(d.correction);
  EXPECT_EQ(d.scrapeMarginRequests, 0);
  EXPECT_FALSE(d.dispatchBudget);
  EXPECT_EQ(d.replicas, 1);
  EXPECT_TRUE(d.slotCountFromScrapes);
  EXPECT_FALSE(d.creditCompletions);
  EXPECT_TRUE(d.reconcileInFlight);
  const auto conc = loadEndpointPickerConfigText(
      ledgerConfigFile(kLedgerConc, R"("saturationDetector": {"pluginRef": "conc"})"));
  ASSERT_TRUE(conc.ok()) << conc.diagnostics().toString();
  EXPECT_EQ(conc.value()->dispatchLedger.budgetQueueDepth,
            DispatchLedgerOptions{}.budgetQueueDepth);
  const auto given = loadEndpointPickerConfigText(
      ledgerConfigFile(kLedgerUtil7, R"("saturationDetector": {"pluginRef": "util"},
                                         "dispatchLedger": {"budgetQueueDepth": 2})"));
  ASSERT_TRUE(given.ok()) << given.diagnostics().toString();
  EXPECT_EQ(given.value()->dispatchLedger.budgetQueueDepth, 2);
}

TEST(DispatchLedgerConfigTest, TheDeprecatedPlaceLoadsWithAWarningNamingBothPlaces) {
  const auto loaded = loadEndpointPickerConfigText(ledgerConfigFile(
      R"({"name": "util", "type": "utilization-detector",
          "parameters": {"queueDepthThreshold": 6, "dispatchLedger": {"replicas": 3}}})",
      R"("saturationDetector": {"pluginRef": "util"})"));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_EQ(ledgerMessages(loaded.diagnostics(), false),
            std::vector<std::string>{
                "/plugins/0/parameters/dispatchLedger: deprecated here: the dispatch ledger is "
                "the host's, not the detector's; move this block to flowControl.dispatchLedger "
                "(same keys)"});
  EXPECT_EQ(loaded.value()->dispatchLedger.replicas, 3);
  EXPECT_EQ(loaded.value()->dispatchLedger.budgetQueueDepth, 6);
  // Its problems are reported once, at the old path.
  const auto bad = loadEndpointPickerConfigText(ledgerConfigFile(
      R"({"name": "util", "type": "utilization-detector",
          "parameters": {"dispatchLedger": {"replicas": 0}}})",
      R"("saturationDetector": {"pluginRef": "util"})"));
  EXPECT_EQ(ledgerMessages(bad.diagnostics(), true),
            std::vector<std::string>{"/plugins/0/parameters/dispatchLedger/replicas: 0 is out of "
                                     "range; expected an integer in [1, 1024]"});
}

TEST(DispatchLedgerConfigTest, BothPlacesAreAnErrorNamingBoth) {
  const auto loaded = loadEndpointPickerConfigText(ledgerConfigFile(
      R"({"name": "util", "type": "utilization-detector",
          "parameters": {"dispatchLedger": {"replicas": 3}}})",
      R"("saturationDetector": {"pluginRef": "util"}, "dispatchLedger": {"replicas": 2})"));
  EXPECT_FALSE(loaded.ok());
  EXPECT_EQ(ledgerMessages(loaded.diagnostics(), true),
            std::vector<std::string>{
                "/flowControl/dispatchLedger: the dispatch ledger is set twice, here and at "
                "/plugins/0/parameters/dispatchLedger (deprecated); keep only "
                "/flowControl/dispatchLedger"});
}

TEST(DispatchLedgerConfigTest, ProblemsOfTheBlockCarryTheirPath) {
  const auto loaded = loadEndpointPickerConfigText(
      ledgerConfigFile(kLedgerConc, R"("saturationDetector": {"pluginRef": "conc"},
          "dispatchLedger": {"scrapeMarginRequests": -1, "correction": "yes", "x": 1})"));
  EXPECT_FALSE(loaded.ok());
  EXPECT_EQ(ledgerMessages(loaded.diagnostics(), true),
            (std::vector<std::string>{
                "/flowControl/dispatchLedger/correction: \"yes\" is a string; expected true or "
                "false",
                "/flowControl/dispatchLedger/x: unknown key \"x\"; allowed keys: "
                "budgetQueueDepth, correction, creditCompletions, dispatchBudget, "
                "reconcileInFlight, replicas, scrapeMarginRequests, slotCountFromScrapes",
                "/flowControl/dispatchLedger/scrapeMarginRequests: -1 is negative; expected an "
                "integer >= 0"}));
}

TEST(DispatchLedgerConfigTest, ReadWithTheGateOffWithoutAWarning) {
  const auto loaded = loadEndpointPickerConfigText(
      ledgerConfigFile(kLedgerUtil7, R"("saturationDetector": {"pluginRef": "util"},
                       "dispatchLedger": {"replicas": 5})",
                       "[]"));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_FALSE(loaded.value()->flowControlEnabled);
  EXPECT_TRUE(loaded.diagnostics().warnings().empty()) << loaded.diagnostics().toString();
  EXPECT_EQ(loaded.value()->dispatchLedger.replicas, 5);
}

TEST(DispatchLedgerConfigTest, OnePluginObjectKeepsItsBlock) {
  const auto parsed = parseJson(
      R"({"type": "utilization-detector",
          "parameters": {"queueDepthThreshold": 4, "dispatchLedger": {"dispatchBudget": true}}})");
  ASSERT_TRUE(parsed.ok());
  const auto detector = loadSaturationDetector(parsed.value(), builtinDetectorRegistry());
  ASSERT_TRUE(detector.ok()) << detector.diagnostics().toString();
  Diagnostics d;
  const DispatchLedgerOptions l =
      loadDispatchLedgerOptions(parsed.value(), detector.value().get(), d);
  EXPECT_TRUE(d.empty()) << d.toString();
  EXPECT_TRUE(l.dispatchBudget);
  EXPECT_EQ(l.budgetQueueDepth, 4);
}

TEST(DispatchLedgerConfigTest, TheEffectiveConfigPrintsTheBlockOnceAtItsPlace) {
  const auto loaded = loadEndpointPickerConfigText(ledgerConfigFile(
      kLedgerUtil7,
      R"("saturationDetector": {"pluginRef": "util"}, "dispatchLedger": {"replicas": 2})"));
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const OrderedJson e = effectiveConfig(*loaded.value());
  EXPECT_FALSE(e["saturationDetector"]["parameters"].contains("dispatchLedger"));
  ASSERT_TRUE(e.contains("dispatchLedger"));
  EXPECT_EQ(e["dispatchLedger"]["replicas"], 2);
  EXPECT_EQ(e["dispatchLedger"]["budgetQueueDepth"], 7);
}

}  // namespace
}  // namespace holdback::config
