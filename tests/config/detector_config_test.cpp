// JSON configuration of the saturation detectors: the reference §4.2/§4.3 factory vectors,
// rejection tables with the exact error text, and EndpointPickerConfig resolution.
#include "holdback/config/detector_config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "holdback/config/json.hpp"

namespace holdback::config {
namespace {

using S = std::vector<std::string>;

struct Loaded {
  std::shared_ptr<SaturationDetector> detector;
  S errors;
  S warnings;
};

Loaded loadText(const std::string& text) {
  Loaded out;
  auto parsed = parseJson(text);
  for (const auto& d : parsed.diagnostics().errors()) out.errors.push_back(d.toString());
  if (!parsed) return out;
  auto detector = loadSaturationDetector(parsed.value(), builtinDetectorRegistry());
  for (const auto& d : detector.diagnostics().errors()) out.errors.push_back(d.toString());
  for (const auto& d : detector.diagnostics().warnings()) out.warnings.push_back(d.toString());
  EXPECT_EQ(detector.ok(), out.errors.empty()) << text;
  if (detector.ok()) out.detector = detector.value();
  return out;
}

std::string plugin(const std::string& type, const std::string& parameters) {
  return R"({"type":")" + type + R"(","parameters":)" + parameters + "}";
}
std::string utilization(const std::string& parameters) {
  return plugin("utilization-detector", parameters);
}
std::string concurrency(const std::string& parameters) {
  return plugin("concurrency-detector", parameters);
}

// ---- reference factory vectors ------------------------------------------------------------

TEST(UtilizationDetectorConfigTest, ReferenceFactoryVectors) {
  for (const char* ok : {R"({"queueDepthThreshold":5,"kvCacheUtilThreshold":0.8})", R"({})",
                         R"({"headroom":2.0})"}) {
    const Loaded l = loadText(utilization(ok));
    EXPECT_EQ(l.errors, S{}) << ok;
    ASSERT_NE(l.detector, nullptr) << ok;
    EXPECT_EQ(l.detector->type(), "utilization-detector");
  }
  for (const char* bad :
       {R"({"queueDepthThreshold":"invalid_type"})", R"({"queueDepthThreshold":0})",
        R"({"kvCacheUtilThreshold":1.5})", R"({"kvCacheUtilThreshold":0.0})",
        R"({"metricsStalenessThreshold":"0s"})", R"({"headroom":-0.5})"}) {
    EXPECT_FALSE(loadText(utilization(bad)).errors.empty()) << bad;
  }
  EXPECT_EQ(loadText(utilization(R"({"headroom":2.0})")).warnings,
            S{"/parameters/headroom: 2.0 is above 1.0: the filter lets endpoints exceed their "
              "thresholds by more than 100%"});
}

TEST(ConcurrencyDetectorConfigTest, ReferenceFactoryVectors) {
  for (const char* ok :
       {R"({"maxConcurrency":50,"headroom":0.2})", R"({})", R"({"headroom":2.0})",
        R"({"concurrencyMode":"hybrid","maxConcurrency":10,"maxTokenConcurrency":100})"}) {
    const Loaded l = loadText(concurrency(ok));
    EXPECT_EQ(l.errors, S{}) << ok;
    ASSERT_NE(l.detector, nullptr) << ok;
    EXPECT_EQ(l.detector->type(), "concurrency-detector");
  }
  for (const char* bad :
       {R"({"maxConcurrency":"invalid_type"})", R"({"maxConcurrency":0})",
        R"({"maxTokenConcurrency":0})", R"({"headroom":-0.5})", R"({"concurrencyMode":"magic"})"}) {
    EXPECT_FALSE(loadText(concurrency(bad)).errors.empty()) << bad;
  }
}

// ---- parsed values ------------------------------------------------------------------------

TEST(UtilizationDetectorConfigTest, ReadsEveryParameter) {
  const Loaded l = loadText(
      R"({"type":"utilization-detector","name":"util","parameters":{"queueDepthThreshold":8,
          "kvCacheUtilThreshold":0.9,"metricsStalenessThreshold":"1.5s","headroom":0.25,
          "aggregation":"weighted","stalenessPolicy":"ignore"}})");
  ASSERT_NE(l.detector, nullptr) << l.errors.front();
  EXPECT_EQ(l.detector->name(), "util");
  const auto& o = dynamic_cast<UtilizationDetector&>(*l.detector).options();
  EXPECT_EQ(o.queueDepthThreshold, 8);
  EXPECT_EQ(o.kvCacheUtilThreshold, 0.9);
  EXPECT_EQ(o.metricsStalenessThreshold, std::chrono::milliseconds(1500));
  EXPECT_EQ(o.headroom, 0.25);
  EXPECT_EQ(o.aggregation, Aggregation::kWeighted);
  EXPECT_EQ(o.stalenessPolicy, StalenessPolicy::kIgnore);
  // An integral float is an integer.
  const Loaded f = loadText(utilization(R"({"queueDepthThreshold":7.0,"aggregation":"max"})"));
  ASSERT_NE(f.detector, nullptr);
  EXPECT_EQ(dynamic_cast<UtilizationDetector&>(*f.detector).options().queueDepthThreshold, 7);
  EXPECT_EQ(dynamic_cast<UtilizationDetector&>(*f.detector).options().aggregation,
            Aggregation::kMax);
}

TEST(ConcurrencyDetectorConfigTest, ReadsEveryParameter) {
  const Loaded l = loadText(concurrency(
      R"({"concurrencyMode":"tokens","maxConcurrency":12,"maxTokenConcurrency":3000,
          "headroom":0.5,"inFlightLoadProducerName":"my-producer"})"));
  ASSERT_NE(l.detector, nullptr);
  const auto& o = dynamic_cast<ConcurrencyDetector&>(*l.detector).options();
  EXPECT_EQ(o.mode, ConcurrencyMode::kTokens);
  EXPECT_EQ(o.maxConcurrency, 12);
  EXPECT_EQ(o.maxTokenConcurrency, 3000);
  EXPECT_EQ(o.headroom, 0.5);
  EXPECT_EQ(l.warnings, S{"/parameters/inFlightLoadProducerName: \"my-producer\" has no effect: "
                          "in holdback the host feeds in-flight counts "
                          "(Endpoint::inFlightRequests/inFlightTokens, e.g. from an "
                          "InFlightTracker)"});
  EXPECT_EQ(loadText(concurrency(R"({"inFlightLoadProducerName":""})")).warnings, S{});
}

// ---- rejection tables with the exact text -------------------------------------------------

struct Rejection {
  std::string document;
  S errors;
};

TEST(UtilizationDetectorConfigTest, RejectionTable) {
  const std::vector<Rejection> table{
      {utilization(R"({"queueDepthThreshold":"invalid_type"})"),
       {"/parameters/queueDepthThreshold: \"invalid_type\" is a string; expected an integer > 0"}},
      {utilization(R"({"queueDepthThreshold":0})"),
       {"/parameters/queueDepthThreshold: 0 is not strictly positive; expected an integer > 0"}},
      {utilization(R"({"queueDepthThreshold":-4})"),
       {"/parameters/queueDepthThreshold: -4 is not strictly positive; expected an integer > 0"}},
      {utilization(R"({"queueDepthThreshold":2.5})"),
       {"/parameters/queueDepthThreshold: 2.5 is not a whole number; expected an integer > 0"}},
      {utilization(R"({"queueDepthThreshold":9223372036854775808})"),
       {"/parameters/queueDepthThreshold: 9223372036854775808 is too large; expected an integer "
        "in [1, 9223372036854775807]"}},
      {utilization(R"({"queueDepthThreshold":1e19})"),
       {"/parameters/queueDepthThreshold: 1e+19 is too large; expected an integer in [1, "
        "9223372036854775807]"}},
      {utilization(R"({"kvCacheUtilThreshold":1.5})"),
       {"/parameters/kvCacheUtilThreshold: 1.5 is outside (0.0, 1.0]"}},
      {utilization(R"({"kvCacheUtilThreshold":0})"),
       {"/parameters/kvCacheUtilThreshold: 0.0 is outside (0.0, 1.0]"}},
      {utilization(R"({"kvCacheUtilThreshold":"0.8"})"),
       {"/parameters/kvCacheUtilThreshold: \"0.8\" is a string; expected a number"}},
      {utilization(R"({"metricsStalenessThreshold":"0s"})"),
       {"/parameters/metricsStalenessThreshold: \"0s\" is not strictly positive; expected a "
        "duration > 0 such as \"200ms\""}},
      {utilization(R"({"metricsStalenessThreshold":"-1m"})"),
       {"/parameters/metricsStalenessThreshold: \"-60s\" is not strictly positive; expected a "
        "duration > 0 such as \"200ms\""}},
      {utilization(R"({"metricsStalenessThreshold":200})"),
       {"/parameters/metricsStalenessThreshold: 200 is a number; expected a duration string such "
        "as \"200ms\", \"1.5s\" or \"2m\""}},
      {utilization(R"({"metricsStalenessThreshold":"200"})"),
       {"/parameters/metricsStalenessThreshold: \"200\" is not a duration; expected a string "
        "such as \"200ms\", \"1.5s\" or \"2m\" (units ns, us, ms, s, m, h)"}},
      {utilization(R"({"headroom":-0.5})"),
       {"/parameters/headroom: -0.5 is negative; expected a number >= 0.0"}},
      {utilization(R"({"aggregation":"median"})"),
       {"/parameters/aggregation: \"median\" is not supported; expected one of \"mean\", "
        "\"max\", \"weighted\", \"capacity\""}},
      {utilization(R"({"stalenessPolicy":true})"),
       {"/parameters/stalenessPolicy: true is a boolean; expected one of \"saturated\", "
        "\"ignore\""}},
      {utilization(R"({"queueDepth":5})"),
       {"/parameters/queueDepth: unknown key \"queueDepth\"; allowed keys: aggregation, "
        "dispatchLedger, endpointCapacity, endpointScoreCap, headroom, kvCacheUtilThreshold, "
        "kvStartPastThreshold, "
        "maxRunningRequests, metricsStalenessThreshold, queueDepthThreshold, stalenessPolicy, "
        "telemetryValidation"}},
      {utilization(R"([1])"), {"/parameters: found an array; expected an object"}},
      // Every problem at once, type errors and range errors together.
      {utilization(R"({"queueDepthThreshold":"x","kvCacheUtilThreshold":2,"headroom":-1,"z":0})"),
       {"/parameters/queueDepthThreshold: \"x\" is a string; expected an integer > 0",
        "/parameters/z: unknown key \"z\"; allowed keys: aggregation, dispatchLedger, "
        "endpointCapacity, endpointScoreCap, headroom, kvCacheUtilThreshold, kvStartPastThreshold, "
        "maxRunningRequests, metricsStalenessThreshold, queueDepthThreshold, stalenessPolicy, "
        "telemetryValidation",
        "/parameters/kvCacheUtilThreshold: 2.0 is outside (0.0, 1.0]",
        "/parameters/headroom: -1.0 is negative; expected a number >= 0.0"}},
      {R"({"type":"utilization-detector","parameters":{"headroom":1,"headroom":-1}})",
       {"/parameters/headroom: duplicate key \"headroom\": a key may appear only once in an "
        "object (a second value would silently replace the first)",
        "/parameters/headroom: -1.0 is negative; expected a number >= 0.0"}},
      // The ledger's and the detector's switches.
      {utilization(R"({"maxRunningRequests":-2})"),
       {"/parameters/maxRunningRequests: -2 is negative; expected an integer >= 0 (0 = no slot "
        "term)"}},
      {utilization(R"({"telemetryValidation":"loose"})"),
       {"/parameters/telemetryValidation: \"loose\" is not supported; expected one of "
        "\"strict\", \"reference\""}},
      {utilization(R"({"kvStartPastThreshold":"yes"})"),
       {"/parameters/kvStartPastThreshold: \"yes\" is a string; expected true or false"}},
      {utilization(R"({"endpointScoreCap":0})"),
       {"/parameters/endpointScoreCap: 0.0 is not strictly positive; expected a number > 0 or "
        "\"none\""}},
      {utilization(R"({"endpointScoreCap":"off"})"),
       {"/parameters/endpointScoreCap: \"off\" is a string; expected a number > 0 or \"none\""}},
      {utilization(R"({"dispatchLedger":{"scrapeMarginRequests":-1,"budgetQueueDepth":0,"x":1}})"),
       {"/parameters/dispatchLedger/x: unknown key \"x\"; allowed keys: budgetQueueDepth, "
        "correction, creditCompletions, dispatchBudget, reconcileInFlight, replicas, "
        "scrapeMarginRequests, slotCountFromScrapes",
        "/parameters/dispatchLedger/scrapeMarginRequests: -1 is negative; expected an integer >= 0",
        "/parameters/dispatchLedger/budgetQueueDepth: 0 is not strictly positive; expected an "
        "integer > 0"}},
      {utilization(R"({"dispatchLedger":{"replicas":0}})"),
       {"/parameters/dispatchLedger/replicas: 0 is out of range; expected an integer in [1, "
        "1024]"}},
      {utilization(R"({"dispatchLedger":{"correction":"yes"}})"),
       {"/parameters/dispatchLedger/correction: \"yes\" is a string; expected true or false"}},
      {utilization(R"({"dispatchLedger":{"slotCountFromScrapes":1}})"),
       {"/parameters/dispatchLedger/slotCountFromScrapes: 1 is a number; expected true or "
        "false"}},
      {utilization(R"({"dispatchLedger":{"creditCompletions":"on"}})"),
       {"/parameters/dispatchLedger/creditCompletions: \"on\" is a string; expected true or "
        "false"}},
      {utilization(R"({"dispatchLedger":{"reconcileInFlight":null}})"),
       {"/parameters/dispatchLedger/reconcileInFlight: found null; expected true or false"}},
  };
  for (const Rejection& r : table) EXPECT_EQ(loadText(r.document).errors, r.errors) << r.document;
}

TEST(UtilizationDetectorConfigTest, ReadsIssue14Parameters) {
  const Loaded defaults = loadText(utilization(R"({"queueDepthThreshold":7})"));
  ASSERT_NE(defaults.detector, nullptr);
  const auto& d = dynamic_cast<UtilizationDetector&>(*defaults.detector).options();
  EXPECT_EQ(d.maxRunningRequests, 0);
  EXPECT_EQ(d.telemetryValidation, TelemetryValidation::kStrict);
  EXPECT_EQ(d.endpointScoreCap, 1.0);
  EXPECT_TRUE(d.kvStartPastThreshold);
  const Loaded l = loadText(utilization(
      R"({"maxRunningRequests":64,"telemetryValidation":"reference","endpointScoreCap":"none",
          "kvStartPastThreshold":false,
          "dispatchLedger":{"correction":false,"scrapeMarginRequests":3,"dispatchBudget":true,
                            "budgetQueueDepth":9,"replicas":4,"slotCountFromScrapes":false,
                            "creditCompletions":true,"reconcileInFlight":false}})"));
  ASSERT_NE(l.detector, nullptr) << l.errors.front();
  const auto& o = dynamic_cast<UtilizationDetector&>(*l.detector).options();
  EXPECT_EQ(o.maxRunningRequests, 64);
  EXPECT_EQ(o.telemetryValidation, TelemetryValidation::kReference);
  EXPECT_EQ(o.endpointScoreCap, UtilizationDetector::kUncapped);
  EXPECT_FALSE(o.kvStartPastThreshold);
  // The deprecated dispatchLedger block is checked and warned about, not part of the options;
  // the deprecated keys are warned about and their values still apply (above).
  const std::string kDeprecated =
      ": deprecated (not a documented key any more; the value still applies): remove it; ";
  const std::string kSwitch =
      "an experiment switch whose default is the measured choice (the simulator keeps it for "
      "ablations)";
  EXPECT_EQ(
      l.warnings,
      (S{"/parameters/kvStartPastThreshold" + kDeprecated +
             "off when flowControl.dispatchLedger.replicas > 1 (replicas without replica sync), "
             "else on",
         "/parameters/telemetryValidation" + kDeprecated +
             "flowControl.profile: reference sets Go's value",
         "/parameters/endpointScoreCap" + kDeprecated +
             "flowControl.profile: reference sets Go's value",
         "/parameters/dispatchLedger: deprecated here: the dispatch ledger is the host's, not "
         "the detector's; move this block to flowControl.dispatchLedger (same keys)",
         "/parameters/dispatchLedger/scrapeMarginRequests" + kDeprecated + kSwitch,
         "/parameters/dispatchLedger/slotCountFromScrapes" + kDeprecated + kSwitch,
         "/parameters/dispatchLedger/creditCompletions" + kDeprecated + kSwitch,
         "/parameters/dispatchLedger/reconcileInFlight" + kDeprecated + kSwitch,
         "/parameters/dispatchLedger/budgetQueueDepth" + kDeprecated +
             "the budget fills the waiting queue up to the utilization detector's "
             "queueDepthThreshold (else 5)"}));
  const Loaded cap = loadText(utilization(R"({"endpointScoreCap":2.5})"));
  ASSERT_NE(cap.detector, nullptr);
  EXPECT_EQ(dynamic_cast<UtilizationDetector&>(*cap.detector).options().endpointScoreCap, 2.5);
  EXPECT_EQ(loadText(utilization(R"({"endpointScoreCap":0.5})")).warnings,
            (S{"/parameters/endpointScoreCap" + kDeprecated +
                   "flowControl.profile: reference sets Go's value",
               "/parameters/endpointScoreCap: 0.5 is below 1.0: the pool can never read "
               "saturated"}));
}

TEST(ConcurrencyDetectorConfigTest, RejectionTable) {
  const std::vector<Rejection> table{
      {concurrency(R"({"maxConcurrency":"invalid_type"})"),
       {"/parameters/maxConcurrency: \"invalid_type\" is a string; expected an integer > 0"}},
      {concurrency(R"({"maxConcurrency":0})"),
       {"/parameters/maxConcurrency: 0 is not strictly positive; expected an integer > 0"}},
      {concurrency(R"({"maxTokenConcurrency":0})"),
       {"/parameters/maxTokenConcurrency: 0 is not strictly positive; expected an integer > 0"}},
      {concurrency(R"({"headroom":-0.5})"),
       {"/parameters/headroom: -0.5 is negative; expected a number >= 0.0"}},
      {concurrency(R"({"concurrencyMode":"magic"})"),
       {"/parameters/concurrencyMode: \"magic\" is not supported; expected one of \"requests\", "
        "\"tokens\", \"hybrid\""}},
      {concurrency(R"({"inFlightLoadProducerName":3})"),
       {"/parameters/inFlightLoadProducerName: 3 is a number; expected a string"}},
      {concurrency(R"({"maxConcurrency":null,"maxTokenConcurrency":-1,"mode":"tokens"})"),
       {"/parameters/maxConcurrency: found null; expected an integer > 0",
        "/parameters/mode: unknown key \"mode\"; allowed keys: concurrencyMode, endpointCapacity, "
        "headroom, "
        "inFlightLoadProducerName, maxConcurrency, maxTokenConcurrency",
        "/parameters/maxTokenConcurrency: -1 is not strictly positive; expected an integer > 0"}},
  };
  for (const Rejection& r : table) EXPECT_EQ(loadText(r.document).errors, r.errors) << r.document;
}

TEST(DetectorConfigTest, UnknownTypeListsTheRegisteredOnes) {
  EXPECT_EQ(loadText(R"({"type":"static-usage-limit-policy"})").errors,
            S{"/type: \"static-usage-limit-policy\" is not a registered type; registered: "
              "concurrency-detector, utilization-detector"});
  EXPECT_EQ(loadText(R"("utilization-detector")").errors,
            S{"/: \"utilization-detector\" is a string; expected a plugin object or an "
              "EndpointPickerConfig"});
}

// ---- EndpointPickerConfig resolution ------------------------------------------------------

const char* kPolicyPlugin = R"({"type":"static-usage-limit-policy","name":"static"})";

std::string epp(const std::string& plugins, const std::string& rest = "") {
  return R"({"apiVersion":"inference.networking.x-k8s.io/v1alpha1","kind":"EndpointPickerConfig",
             "plugins":[)" +
         plugins + "]" + rest + "}";
}

TEST(DetectorConfigTest, PluginRefSelectsTheDetector) {
  const Loaded l = loadText(epp(std::string(kPolicyPlugin) +
                                    R"(,{"type":"concurrency-detector","name":"conc"},
                                        {"type":"utilization-detector"})",
                                R"(,"flowControl":{"saturationDetector":{"pluginRef":"conc"}})"));
  ASSERT_NE(l.detector, nullptr) << l.errors.front();
  EXPECT_EQ(l.detector->name(), "conc");
  EXPECT_EQ(l.detector->type(), "concurrency-detector");
  EXPECT_EQ(l.warnings, S{});  // other plugin types are skipped silently
}

TEST(DetectorConfigTest, AbsentRefFallsBackToTheUtilizationDetector) {
  // The plugin named "utilization-detector" when there is one...
  Loaded l =
      loadText(epp(R"({"type":"utilization-detector","parameters":{"queueDepthThreshold":9}})"));
  ASSERT_NE(l.detector, nullptr);
  EXPECT_EQ(dynamic_cast<UtilizationDetector&>(*l.detector).options().queueDepthThreshold, 9);
  // ... else one with default options (even if another detector is defined).
  l = loadText(epp(std::string(kPolicyPlugin) + R"(,{"type":"concurrency-detector"})",
                   R"(,"flowControl":{"usageLimitPolicyPluginRef":"static"})"));
  ASSERT_NE(l.detector, nullptr);
  EXPECT_EQ(l.detector->type(), "utilization-detector");
  EXPECT_EQ(dynamic_cast<UtilizationDetector&>(*l.detector).options().queueDepthThreshold, 5);
  // An empty ref counts as absent.
  l = loadText(epp("", R"(,"flowControl":{"saturationDetector":{"pluginRef":""}})"));
  ASSERT_NE(l.detector, nullptr);
  EXPECT_EQ(l.detector->type(), "utilization-detector");
}

TEST(DetectorConfigTest, DeprecatedTopLevelRefIsHonouredButLoses) {
  const std::string plugins =
      R"({"type":"concurrency-detector","name":"a"},{"type":"utilization-detector","name":"b"})";
  Loaded l = loadText(epp(plugins, R"(,"saturationDetector":{"pluginRef":"a"})"));
  ASSERT_NE(l.detector, nullptr);
  EXPECT_EQ(l.detector->name(), "a");
  EXPECT_EQ(l.warnings, S{"/saturationDetector: deprecated; use /flowControl/saturationDetector "
                          "(which wins when both are set)"});
  l = loadText(epp(plugins, R"(,"saturationDetector":{"pluginRef":"a"},
                               "flowControl":{"saturationDetector":{"pluginRef":"b"}})"));
  ASSERT_NE(l.detector, nullptr);
  EXPECT_EQ(l.detector->name(), "b");
}

TEST(DetectorConfigTest, BadRefsAndPluginsAreReportedTogether) {
  EXPECT_EQ(loadText(epp(std::string(kPolicyPlugin),
                         R"(,"flowControl":{"saturationDetector":{"pluginRef":"static"}})"))
                .errors,
            S{"/flowControl/saturationDetector/pluginRef: \"static\" names a plugin of type "
              "\"static-usage-limit-policy\", which is not a saturation detector"});
  EXPECT_EQ(loadText(epp(std::string(kPolicyPlugin),
                         R"(,"flowControl":{"saturationDetector":{"pluginRef":"nope"}})"))
                .errors,
            S{"/flowControl/saturationDetector/pluginRef: \"nope\" names no plugin; defined "
              "plugins: static"});
  EXPECT_EQ(
      loadText(epp(R"({"type":"utilization-detector","parameters":{"headroom":-1}},
                      {"type":"concurrency-detector","name":"c","parameters":{"maxConcurrency":0}},
                      {"type":"concurrency-detector","name":"c"})",
                   R"(,"flowControl":{"saturationDetector":{"pluginRef":7,"extra":1}})"))
          .errors,
      // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): a message split over two literals
      (S{"/plugins/2/name: duplicate plugin name \"c\" (first defined at /plugins/1); plugin "
         "names must be unique",
         "/plugins/0/parameters/headroom: -1.0 is negative; expected a number >= 0.0",
         "/plugins/1/parameters/maxConcurrency: 0 is not strictly positive; expected an integer "
         "> 0",
         "/flowControl/saturationDetector/pluginRef: 7 is a number; expected a string",
         "/flowControl/saturationDetector/extra: unknown key \"extra\"; allowed keys: "
         "pluginRef"}));
  // A bad ref is reported together with the plugins' problems.
  EXPECT_EQ(loadText(epp(R"({"type":"utilization-detector","parameters":{"headroom":-1}})",
                         R"(,"flowControl":{"saturationDetector":{"pluginRef":"nope"}})"))
                .errors,
            (S{"/plugins/0/parameters/headroom: -1.0 is negative; expected a number >= 0.0",
               "/flowControl/saturationDetector/pluginRef: \"nope\" names no plugin; defined "
               "plugins: utilization-detector"}));
  // A ref to the invalid detector itself adds nothing.
  EXPECT_EQ(loadText(epp(R"({"type":"utilization-detector","parameters":{"headroom":-1}})",
                         R"(,"flowControl":{"saturationDetector":{"pluginRef":)"
                         R"("utilization-detector"}})"))
                .errors,
            S{"/plugins/0/parameters/headroom: -1.0 is negative; expected a number >= 0.0"});
  EXPECT_EQ(loadText(epp("", R"(,"flowControl":5)")).errors,
            S{"/flowControl: 5 is a number; expected an object"});
  EXPECT_EQ(loadText(epp("", R"(,"flowControl":{"saturationDetector":"util"})")).errors,
            S{"/flowControl/saturationDetector: \"util\" is a string; expected an object"});
  EXPECT_EQ(loadText(R"({"plugins":{}})").errors,
            S{"/plugins: found an object; expected an array of plugin objects"});
}

}  // namespace
}  // namespace holdback::config
