// `holdback saturation` and the detector checks of `holdback validate`, run on the built binary.
#include <string>

#include "cli_support.hpp"

namespace {

using holdback::testing::CliRun;
using holdback::testing::holdback;
using holdback::testing::kExamples;
using holdback::testing::writeTemp;

// The reference §4.2 configuration (queue 5, KV 0.9, staleness 100 ms), with the reference's
// telemetry validation and no cap on an endpoint's score.
// Go's arithmetic (reference telemetry validation, no score cap): the reference profile.
const char* kReferenceDetector =
    R"({"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig",
        "featureGates":["flowControl"],
        "plugins":[{"type":"utilization-detector","name":"ref","parameters":{
          "queueDepthThreshold":5,"kvCacheUtilThreshold":0.9,
          "metricsStalenessThreshold":"100ms"}}],
        "flowControl":{"profile":"reference","saturationDetector":{"pluginRef":"ref"}}})";

TEST(CliSaturationTest, ReferenceVectorAndFilter) {
  const std::string config = writeTemp("ref.json", kReferenceDetector);
  // (1, 0.1, 200 ms old) + (20, 0.2) + (1, 0.99): (1.0 + 4.0 + 1.1) / 3. Nothing passes the
  // filter (a is stale, b's queue and c's KV are over their limits), so it fails open.
  const std::string endpoints = writeTemp("three.json", R"([
      {"name":"a","waitingQueueSize":1,"kvCacheUsagePercent":0.1,"updateTimeMs":800},
      {"name":"b","waitingQueueSize":20,"kvCacheUsagePercent":0.2,"updateTimeMs":1000},
      {"name":"c","waitingQueueSize":1,"kvCacheUsagePercent":0.99,"updateTimeMs":1000}])");
  const CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"utilization-detector\",\"name\":\"ref\"},"
            "\"saturation\":2.033333333333333,\"filtered\":[\"a\",\"b\",\"c\"],"
            "\"failOpen\":true}\n");
}

TEST(CliSaturationTest, NowDefaultsToTheLatestUpdateAndCanBeGiven) {
  const std::string config = writeTemp("ref2.json", kReferenceDetector);
  const std::string endpoints = writeTemp("two.json", R"([
      {"name":"fresh","waitingQueueSize":1,"kvCacheUsagePercent":0.1,"updateTimeMs":1000},
      {"name":"old","waitingQueueSize":0,"kvCacheUsagePercent":0.2,"updateTimeMs":700}])");
  CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  // now = 1000: "old" is 300 ms old -> (0.2 + 1.0) / 2.
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"utilization-detector\",\"name\":\"ref\"},"
            "\"saturation\":0.6,\"filtered\":[\"fresh\"],\"failOpen\":false}\n");
  // now = 750: "old" is 50 ms old and fresh; "fresh" is 250 ms in the future, beyond the
  // threshold, so invalid: (1.0 + 0.2 / 0.9) / 2.
  run = holdback("saturation --config " + config + " --endpoints " + endpoints + " --now-ms 750");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"filtered\":[\"old\"],\"failOpen\":false"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\"saturation\":0.6111111111111112,"), std::string::npos) << run.out;
}

TEST(CliSaturationTest, MissingUpdateTimeMeansNoMetrics) {
  const std::string config = writeTemp("default.json", R"({"type":"utilization-detector"})");
  const std::string endpoints = writeTemp("nometrics.json", R"([{"name":"x"}])");
  const CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"utilization-detector\",\"name\":\"utilization-detector\"},"
            "\"saturation\":1.0,\"filtered\":[\"x\"],\"failOpen\":true}\n");
}

TEST(CliSaturationTest, ConcurrencyDetectorHasNoFailOpen) {
  const std::string config = writeTemp(
      "conc.json",
      R"({"type":"concurrency-detector","parameters":{"maxConcurrency":50,"headroom":0.2}})");
  const std::string endpoints = writeTemp("conc-eps.json", R"([
      {"name":"busy","inFlightRequests":60},{"name":"idle","inFlightRequests":0}])");
  CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"concurrency-detector\",\"name\":\"concurrency-detector\"},"
            "\"saturation\":0.6,\"filtered\":[\"idle\"],\"failOpen\":false}\n");
  const std::string full =
      writeTemp("conc-full.json", R"([{"name":"busy","inFlightRequests":60}])");
  run = holdback("saturation --config " + config + " --endpoints " + full);
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"concurrency-detector\",\"name\":\"concurrency-detector\"},"
            "\"saturation\":1.2,\"filtered\":[],\"failOpen\":false}\n");
}

TEST(CliSaturationTest, StageAwareSaturationTakesTheWorseStage) {
  const std::string config = writeTemp("ref3.json", kReferenceDetector);
  // Prefill stage: 10/5 = 2.0; decode stage: 0.0. The whole-pool mean would read 1.0.
  const std::string endpoints = writeTemp("stages.json", R"([
      {"name":"p","role":"prefill","waitingQueueSize":10,"updateTimeMs":5},
      {"name":"d","role":"decode","waitingQueueSize":0,"updateTimeMs":5}])");
  const CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"saturation\":2.0,\"filtered\":[\"d\"]"), std::string::npos) << run.out;
}

TEST(CliSaturationTest, EndpointPickerConfigExample) {
  const CliRun run =
      holdback("saturation --config " + kExamples + "utilization-detector.json --endpoints " +
               kExamples + "endpoints.json");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  // Weighted: (4 * 0.6875 + 4 * min(1.4, 1.0) + 1 * 1.0 [l4-0 is 400 ms old]) / 9; h100-1's
  // overload (1.4) counts as full (endpointScoreCap 1.0). Uncapped it would read 1.0388...
  EXPECT_EQ(run.out,
            "{\"detector\":{\"type\":\"utilization-detector\",\"name\":\"vllm-roofline\"},"
            "\"saturation\":0.8611111111111112,\"filtered\":[\"h100-0\"],\"failOpen\":false}\n");
}

// The ledger's correction of pending work, --no-ledger, --scores, junk telemetry.
TEST(CliSaturationTest, PendingWorkIsCreditedUnlessNoLedger) {
  const std::string config =
      writeTemp("slots.json",
                R"({"type":"utilization-detector","parameters":{"queueDepthThreshold":5,
          "kvCacheUtilThreshold":0.8,"maxRunningRequests":8}})");
  // 6 of 8 slots running, 4 dispatched since the scrape: 2 take the free slots, 2 queue.
  const std::string endpoints = writeTemp("pending.json", R"([
      {"name":"a","waitingQueueSize":0,"runningRequests":6,"kvCacheUsagePercent":0.4,
       "updateTimeMs":1000,"maxRunningRequests":8,"kvCapacityTokens":10000,
       "pendingRequests":4,"pendingTokens":2000}])");
  CliRun run =
      holdback("saturation --config " + config + " --endpoints " + endpoints + " --scores");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  // running 8/8 = 1.0 (slot term), waiting 2/5, KV (0.4 + 0.2)/0.8 = 0.75.
  EXPECT_EQ(
      run.out,
      "{\"detector\":{\"type\":\"utilization-detector\",\"name\":\"utilization-detector\"},"
      "\"saturation\":1.0,\"filtered\":[\"a\"],\"failOpen\":false,\"endpoints\":[{\"name\":"
      "\"a\",\"waitingQueueSize\":2.0,\"runningRequests\":8.0,\"kvCacheUsage\":0.6000000000000001,"
      "\"score\":1.0}]}\n");
  run = holdback("saturation --config " + config + " --endpoints " + endpoints +
                 " --scores --no-ledger");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"saturation\":0.75,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"waitingQueueSize\":0.0,\"runningRequests\":6.0"), std::string::npos)
      << run.out;
}

TEST(CliSaturationTest, OneMisreportingServerDoesNotCloseThePool) {
  const std::string config = writeTemp("default2.json", R"({"type":"utilization-detector"})");
  // KV reported as a percentage (50) and a deep queue on two servers; two idle servers.
  const std::string endpoints = writeTemp("junk.json", R"([
      {"name":"junk","kvCacheUsagePercent":50,"updateTimeMs":1000},
      {"name":"deep","waitingQueueSize":8,"updateTimeMs":1000},
      {"name":"idle1","updateTimeMs":1000},{"name":"idle2","updateTimeMs":1000}])");
  CliRun run =
      holdback("saturation --config " + config + " --endpoints " + endpoints + " --scores");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  // (1.0 [invalid, like stale] + 1.0 [1.6 capped] + 0 + 0) / 4; the overload shows in the score.
  EXPECT_NE(run.out.find("\"saturation\":0.5,\"filtered\":[\"idle1\",\"idle2\"]"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\"name\":\"junk\",\"waitingQueueSize\":0.0,\"runningRequests\":0.0,"
                         "\"kvCacheUsage\":50.0,\"score\":null"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\"score\":1.6"), std::string::npos) << run.out;
  // The reference's behaviour: (62.5 + 1.6 + 0 + 0) / 4.
  const std::string ref =
      writeTemp("ref-junk.json",
                R"({"type":"utilization-detector","parameters":{"telemetryValidation":"reference",
          "endpointScoreCap":"none"}})");
  run = holdback("saturation --config " + ref + " --endpoints " + endpoints);
  EXPECT_NE(run.out.find("\"saturation\":16.025,"), std::string::npos) << run.out;
}

TEST(CliSaturationTest, BadFilesReportEveryProblemWithItsPath) {
  const std::string config = writeTemp(
      "bad-config.json",
      R"({"type":"utilization-detector","parameters":{"headroom":-1,"queueDepthThreshold":0}})");
  const std::string endpoints =
      writeTemp("bad-endpoints.json",
                R"([{"waitingQueueSize":"x","bogus":1},{"name":"a"},{"name":"a","role":"gpu",
          "updateTimeMs":1e20,"inFlightRequests":1.5},3])");
  const CliRun run = holdback("saturation --config " + config + " --endpoints " + endpoints);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(
      run.err,
      config +
          ": error: /parameters/queueDepthThreshold: 0 is not strictly positive; expected an "
          "integer > 0\n" +
          config + ": error: /parameters/headroom: -1.0 is negative; expected a number >= 0.0\n" +
          endpoints + ": error: /0/name: missing; every endpoint needs a \"name\"\n" + endpoints +
          ": error: /0/waitingQueueSize: \"x\" is a string; expected a number\n" + endpoints +
          ": error: /0/bogus: unknown key \"bogus\"; allowed keys: inFlightRequests, "
          "inFlightTokens, kvCacheUsagePercent, kvCapacityTokens, maxRunningRequests, name, "
          "pendingRequests, pendingTokens, role, runningRequests, updateTimeMs, "
          "waitingQueueSize, weight\n" +
          endpoints + ": error: /2/name: duplicate endpoint name \"a\"; names must be unique\n" +
          endpoints +
          ": error: /2/updateTimeMs: 1e+20 is out of range; expected an integer in "
          "[-9223372036854, 9223372036854]\n" +
          endpoints +
          ": warning: /2/role: \"gpu\" is not a known role (prefill, decode, prefill-decode, "
          "both, encode-prefill, encode-prefill-decode, encode); the endpoint is in neither "
          "stage\n" +
          endpoints +
          ": error: /2/inFlightRequests: 1.5 is not a whole number; expected an integer in "
          "[-9223372036854775808, 9223372036854775807]\n" +
          endpoints + ": error: /3: 3 is a number; expected an object\n");
  const std::string not_array = writeTemp("obj.json", R"({"name":"a"})");
  const std::string good = writeTemp("good.json", R"({"type":"utilization-detector"})");
  const CliRun obj = holdback("saturation --config " + good + " --endpoints " + not_array);
  EXPECT_EQ(obj.exitCode, 1);
  EXPECT_EQ(obj.err, not_array +
                         ": error: /: found an object; expected an array of endpoint "
                         "objects\n");
  const std::string syntax = writeTemp("syntax.json", "[{\"name\": ");
  const CliRun bad_json = holdback("saturation --config " + good + " --endpoints " + syntax);
  EXPECT_EQ(bad_json.exitCode, 1);
  EXPECT_NE(bad_json.err.find("invalid JSON"), std::string::npos) << bad_json.err;
}

TEST(CliSaturationTest, UsageErrorsExitTwo) {
  const std::string good = writeTemp("good2.json", R"({"type":"utilization-detector"})");
  const std::string endpoints = writeTemp("one.json", R"([{"name":"a"}])");
  EXPECT_EQ(holdback("saturation").exitCode, 2);
  EXPECT_EQ(holdback("saturation --config " + good).exitCode, 2);
  EXPECT_EQ(holdback("saturation --endpoints " + endpoints).exitCode, 2);
  EXPECT_EQ(holdback("saturation --config " + good + " --endpoints " + endpoints + " --now-ms x")
                .exitCode,
            2);
  EXPECT_EQ(holdback("saturation --config " + good + " --endpoints " + endpoints +
                     " --now-ms 99999999999999999")
                .exitCode,
            2);
  EXPECT_EQ(holdback("saturation --config /nonexistent.json --endpoints " + endpoints).exitCode, 2);
  EXPECT_EQ(
      holdback("saturation --config " + good + " --endpoints " + endpoints + " extra").exitCode, 2);
  const CliRun help = holdback("saturation --help");
  EXPECT_EQ(help.exitCode, 0);
  for (const char* flag : {"--config", "--endpoints", "--now-ms", "kvCacheUsagePercent"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(holdback("--help").out.find("saturation"), std::string::npos);
}

// ---- validate ------------------------------------------------------------------------------

// The example of the recommended eviction setup (reservation policy without the hold, reserve
// restoration) loads without a problem or a warning.
// `validate FILE` of an example with the reservation policy "reservation" and the utilization
// detector "vllm-utilization": ok, no problem, no warning.
void expectReservationExampleValid(const std::string& example) {
  CliRun run = holdback("validate " + example);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, example +
                         ": ok: usage limit policy \"reservation\" (type "
                         "reservation-holdback-policy), saturation detector \"vllm-utilization\" "
                         "(type utilization-detector)\n");
}

TEST(CliSaturationTest, ValidateAcceptsTheReservationEvictionExample) {
  expectReservationExampleValid(kExamples + "reservation-eviction.yaml");
}

// The recommended configuration loads as well, with the reserve counted where it fits.
TEST(CliSaturationTest, ValidateAcceptsTheRecommendedExample) {
  const std::string example = kExamples + "recommended.yaml";
  expectReservationExampleValid(example);
  CliRun json = holdback("validate --json " + example);
  EXPECT_EQ(json.exitCode, 0) << json.err;
  EXPECT_NE(json.out.find("\"capacityModel\": \"endpoints\""), std::string::npos) << json.out;
}

TEST(CliSaturationTest, ValidateChecksDetectorPlugins) {
  CliRun run = holdback("validate " + kExamples + "utilization-detector.json");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  // The whole-file loader checks every plugin (the third one too, unreferenced): no warning.
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, kExamples +
                         "utilization-detector.json: ok: usage limit policy "
                         "\"binary-backpressure\" (type static-usage-limit-policy), saturation "
                         "detector \"vllm-roofline\" (type utilization-detector)\n");
  // A single detector plugin object.
  const std::string single = writeTemp("single.json", R"({"type":"concurrency-detector"})");
  run = holdback("validate " + single);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, single +
                         ": ok: saturation detector \"concurrency-detector\" (type "
                         "concurrency-detector)\n");
  const std::string bad_single =
      writeTemp("bad-single.json", R"({"type":"concurrency-detector","parameters":{"x":1}})");
  run = holdback("validate " + bad_single);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(
      run.err,
      bad_single +
          ": error: /parameters/x: unknown key \"x\"; allowed keys: "
          "concurrencyMode, endpointCapacity, headroom, inFlightLoadProducerName, maxConcurrency, "
          "maxTokenConcurrency\n" +
          bad_single + ": invalid (1 error)\n");
}

TEST(CliSaturationTest, ValidateFailsOnAnInvalidDetectorAndReportsEachProblemOnce) {
  const std::string config = writeTemp("epp.json", R"({"apiVersion":"llm-d.ai/v1alpha1",
      "kind":"EndpointPickerConfig","featureGates":["flowControl"],"plugins":[
      {"type":"static-usage-limit-policy","name":"s"},
      {"type":"utilization-detector","parameters":{"headroom":-1}},
      {"type":"mystery"},
      {"type":"concurrency-detector","name":"s"},
      {"name":"typeless"}],
      "flowControl":{"usageLimitPolicyPluginRef":"s","saturationDetector":{"pluginRef":"nope"}}})");
  const CliRun run = holdback("validate " + config);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            config +
                ": error: /plugins/3/name: duplicate plugin name \"s\" (first defined at "
                "/plugins/0); plugin names must be unique\n" +
                config + ": error: /plugins/4/type: missing; every plugin needs a \"type\"\n" +
                config +
                ": warning: /plugins/2/type: \"mystery\" is not a holdback plugin type (a Go "
                "gateway plugin?); accepted and ignored\n" +
                config +
                ": error: /plugins/1/parameters/headroom: -1.0 is negative; expected a number "
                ">= 0.0\n" +
                config +
                ": error: /flowControl/saturationDetector/pluginRef: \"nope\" names no plugin; "
                "defined plugins: s, utilization-detector, mystery\n" +
                config + ": invalid (4 errors)\n");
}

TEST(CliSaturationTest, ValidateReportsAProblemBothLoadersSeeOnce) {
  const std::string config =
      writeTemp("fc.json", R"({"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig",
                               "plugins":[{"type":"utilization-detector"}],"flowControl":[]})");
  const CliRun run = holdback("validate " + config);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.err, config + ": error: /flowControl: found an array; expected an object\n" +
                         config + ": invalid (1 error)\n");
}

}  // namespace

namespace {

TEST(CliSaturationTest, DuplicateKeysInTheConfigFailTheRun) {
  const std::string config =
      writeTemp("dup.json",
                R"({"type":"utilization-detector","parameters":{"headroom":0.1,"headroom":0.2}})");
  const CliRun run =
      holdback("saturation --config " + config + " --endpoints " + kExamples + "endpoints.json");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("/parameters/headroom: duplicate key \"headroom\""), std::string::npos)
      << run.err;
}

}  // namespace
