// Runs the built `holdback` binary and checks its output and exit codes.
#include <string>

#include "cli_support.hpp"

namespace {

using holdback::testing::CliRun;
using holdback::testing::holdback;
using holdback::testing::kExamples;
using holdback::testing::writeTemp;

TEST(CliTest, CeilingsOnTheBuiltInExample) {
  const CliRun run = holdback("ceilings");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out,
            "{\"policy\":{\"type\":\"priority-holdback-policy\",\"name\":\"dynamic-holdback\"},"
            "\"saturation\":0.0,\"ceilings\":[{\"priority\":100,\"ceiling\":1.0,\"gated\":false},"
            "{\"priority\":50,\"ceiling\":0.8041076402320279,\"gated\":false},{\"priority\":0,"
            "\"ceiling\":0.6006032068875956,\"gated\":false},{\"priority\":-1,\"ceiling\":0.6,"
            "\"gated\":false}]}\n");
}

TEST(CliTest, CeilingsSortsAndDeduplicatesPrioritiesAndGates) {
  const CliRun run =
      holdback("ceilings --config " + kExamples +
               "stepwise-holdback.json --priorities=-10,100,0,100 --saturation 0.65");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out,
            "{\"policy\":{\"type\":\"priority-holdback-policy\",\"name\":\"stepwise\"},"
            "\"saturation\":0.65,\"ceilings\":[{\"priority\":100,\"ceiling\":0.9,\"gated\":false},"
            "{\"priority\":0,\"ceiling\":0.65,\"gated\":true},{\"priority\":-10,\"ceiling\":0.4,"
            "\"gated\":true}]}\n");
}

TEST(CliTest, CeilingsNanAndInfinitySaturation) {
  CliRun run = holdback("ceilings --config " + kExamples +
                        "static-holdback.json --priorities 100 "
                        "--saturation nan");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"saturation\":1.0,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"gated\":true"), std::string::npos) << run.out;
  run = holdback("ceilings --config " + kExamples + "static-holdback.json --saturation inf");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"saturation\":\"inf\""), std::string::npos) << run.out;
  run = holdback("ceilings --config " + kExamples + "static-holdback.json --saturation -3");
  EXPECT_NE(run.out.find("\"saturation\":0.0,"), std::string::npos) << run.out;
}

TEST(CliTest, CeilingsCyclesShowTheSoftReflectiveDutyCycle) {
  const std::string config = writeTemp("soft.json", R"({"type":"soft-reflective-ceiling-policy"})");
  const CliRun run = holdback("ceilings --config " + config +
                              " --priorities 100,-50 --saturation 0.75 --cycles 6");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  std::string pattern;
  const std::string needle = R"("priority":-50,"ceiling":)";
  for (std::size_t pos = 0; (pos = run.out.find(needle, pos)) != std::string::npos;) {
    pos += needle.size();
    pattern += run.out[pos];
  }
  EXPECT_EQ(pattern, "001001");
}

TEST(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(holdback("").exitCode, 2);
  EXPECT_EQ(holdback("frobnicate").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --bogus 1").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --priorities 1,x").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --priorities 3000000000").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --saturation high").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --cycles 0").exitCode, 2);
  EXPECT_EQ(holdback("ceilings --config /nonexistent/file.json").exitCode, 2);
  EXPECT_EQ(holdback("validate").exitCode, 2);
  const CliRun missing = holdback("validate /nonexistent/file.json");
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_NE(missing.err.find("cannot read file"), std::string::npos);
}

TEST(CliTest, HelpDescribesEveryCommand) {
  const CliRun top = holdback("--help");
  EXPECT_EQ(top.exitCode, 0);
  EXPECT_NE(top.out.find("ceilings"), std::string::npos);
  EXPECT_NE(top.out.find("validate"), std::string::npos);
  const CliRun ceilings = holdback("ceilings --help");
  EXPECT_EQ(ceilings.exitCode, 0);
  for (const char* flag : {"--config", "--priorities", "--saturation", "--cycles"}) {
    EXPECT_NE(ceilings.out.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(holdback("validate --help").exitCode, 0);
}

TEST(CliTest, ValidateAcceptsTheExamples) {
  for (const char* file :
       {"sigmoid-holdback.json", "static-holdback.json", "stepwise-holdback.json"}) {
    const CliRun run = holdback("validate " + kExamples + file);
    EXPECT_EQ(run.exitCode, 0) << file << ": " << run.err;
    EXPECT_NE(run.out.find(": ok: usage limit policy"), std::string::npos) << run.out;
  }
}

TEST(CliTest, ValidateReportsEveryProblemOnItsOwnLine) {
  const std::string config = writeTemp(
      "bad.json",
      R"({"type":"priority-holdback-policy","parameters":{"minCeiling":1.5,"maxCeiling":0,"x":1}})");
  const CliRun run = holdback("validate " + config);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, config +
                         ": error: /parameters/x: unknown key \"x\"; allowed keys: ceilings, "
                         "defaultCeiling, domain, maxCeiling, minCeiling, shape, "
                         "sigmoidDomain, sigmoidMidpoint, sigmoidSteepness, strategy\n" +
                         config + ": error: /parameters/maxCeiling: 0.0 is outside (0.0, 1.0]\n" +
                         config + ": error: /parameters/minCeiling: 1.5 is outside [0.0, 1.0)\n" +
                         config +
                         ": error: /parameters/minCeiling: 1.5 is not below maxCeiling "
                         "0.0; minCeiling must be strictly less than maxCeiling\n" +
                         config + ": invalid (4 errors)\n");
}

TEST(CliTest, ValidateRejectsInvalidJson) {
  const std::string config = writeTemp("syntax.json", "{\"type\": ");
  const CliRun run = holdback("validate " + config);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("invalid JSON"), std::string::npos) << run.err;
}

}  // namespace

namespace {

TEST(CliTest, YamlConfigsWorkAndErrorsCarryLineAndColumn) {
  const CliRun ok =
      holdback("ceilings --config " + kExamples + "holdback.yaml --priorities 100,-1");
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"name\":\"dynamic-holdback\""), std::string::npos) << ok.out;
  EXPECT_EQ(holdback("validate " + kExamples + "holdback.yaml").exitCode, 0);

  const std::string config = writeTemp("bad.yaml",
                                       "type: priority-holdback-policy\n"
                                       "parameters:\n"
                                       "  strategy: static\n"
                                       "  ceilings:\n"
                                       "    100: 0.5\n"
                                       "    -1: 0.9\n");
  const CliRun bad = holdback("validate " + config);
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_EQ(bad.err, config +
                         ": error: /parameters/ceilings/-1 (line 6, column 9): 0.9 is above "
                         "0.5, the ceiling of the higher priority 100; ceilings must not "
                         "increase as priority decreases (priority inversion)\n" +
                         config + ": invalid (1 error)\n");
}

}  // namespace

namespace {

const std::string kGolden = std::string(HOLDBACK_SOURCE_DIR) + "/tests/golden/";

TEST(CliValidateWholeFileTest, JsonOutputListsErrorsAndWarningsWithPositions) {
  const CliRun bad = holdback("validate --json " + kGolden + "error-header.yaml");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_EQ(bad.err, "");
  EXPECT_NE(bad.out.find("\"ok\": false"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(R"({
      "path": "/featureGates/1",
      "line": 5,
      "column": 5,
      "message": "feature gate 'prepareData' is unknown or unregistered; known: flowControl, haPopulateNonLeaderDatastore, dataLayer, prepareDataPlugins, enableLegacyMetrics"
    })"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find(R"("warnings": [
    {
      "path": "/schedulingProfiles",)"),
            std::string::npos)
      << bad.out;

  const CliRun ok = holdback("validate --json " + kGolden + "reference-minimal.json");
  EXPECT_EQ(ok.exitCode, 0) << ok.out;
  EXPECT_NE(ok.out.find(R"({
  "ok": true,
  "errors": [],
  "warnings": [],
  "effective": {
    "schemaVersion": 1,)"),
            std::string::npos)
      << ok.out;
  // "effective" is the library's effectiveConfig (its shape is pinned by EffectiveConfigTest).
  EXPECT_NE(ok.out.find(R"("effective": {
    "schemaVersion": 1,
    "flowControl": true,)"),
            std::string::npos)
      << ok.out;
  EXPECT_NE(ok.out.find(R"("noEndpointRequestTTL": "300s")"), std::string::npos) << ok.out;
  EXPECT_EQ(holdback("validate --json=1 " + kGolden + "reference-minimal.json").exitCode, 2);
}

TEST(CliValidateWholeFileTest, CeilingsAndSaturationUseTheWholeFileLoader) {
  // The policy named by the file's ref, through the whole-file loader.
  const CliRun ceilings =
      holdback("ceilings --config " + kGolden +
               "explicit-ceilings.yaml --priorities 100,0,-10 --saturation 0.5");
  EXPECT_EQ(ceilings.exitCode, 0) << ceilings.err;
  EXPECT_NE(ceilings.out.find("\"name\":\"explicit\""), std::string::npos) << ceilings.out;
  EXPECT_NE(ceilings.out.find("{\"priority\":-10,\"ceiling\":0.3,\"gated\":true}"),
            std::string::npos)
      << ceilings.out;
  // A whole-file error (an unknown flowControl key) now fails `ceilings` too.
  const CliRun bad = holdback("ceilings --config " + kGolden + "error-flowcontrol.yaml");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("/flowControl/queueDepth (line 18, column 15): unknown key"),
            std::string::npos)
      << bad.err;
  const CliRun saturation =
      holdback("saturation --config " + kGolden + "explicit-ceilings.yaml --endpoints " +
               kExamples + "endpoints.json");
  EXPECT_EQ(saturation.exitCode, 0) << saturation.err;
  EXPECT_NE(saturation.out.find("conc"), std::string::npos) << saturation.out;
}

}  // namespace

namespace {

double ceilingOf(const std::string& out, int priority) {
  const std::string needle = "\"priority\":" + std::to_string(priority) + ",\"ceiling\":";
  const std::size_t pos = out.find(needle);
  if (pos == std::string::npos) return -1.0;
  return std::stod(out.substr(pos + needle.size()));
}

TEST(CliTest, CeilingsWithDemandFiguresSizeTheReservation) {
  const std::string config =
      writeTemp("reservation.json", R"({"type":"reservation-holdback-policy"})");
  const CliRun idle =
      holdback("ceilings --config " + config + " --priorities 100,0 --saturation 0.3");
  ASSERT_EQ(idle.exitCode, 0) << idle.err;
  const CliRun busy = holdback("ceilings --config " + config +
                               " --priorities 100,0 --saturation 0.3 --demand 100=4,2,0.5"
                               " --demand=0=20 --request-unit 0.05");
  ASSERT_EQ(busy.exitCode, 0) << busy.err;
  // Refill sizing (the default): 2 arrivals/s above. Turnover: the top band's 4 in flight end
  // every 0.5 s (8/s), band 0's 20 have no holding time (0/s): 8 / 24 per in-flight request, x
  // the pool's 1 / 0.05 = 20 requests = 6.7/s. rho = 0.3, 0.3^4 <= 1 %: 4 x 0.05 off band 0.
  EXPECT_DOUBLE_EQ(ceilingOf(idle.out, 0), 1.0) << idle.out;
  EXPECT_NEAR(ceilingOf(busy.out, 0), 0.8, 1e-12) << busy.out;
  EXPECT_DOUBLE_EQ(ceilingOf(busy.out, 100), 1.0) << busy.out;
  // Occupancy sizing: occupancy 4 at the top, the 99 % Poisson quantile (9) plus arrivals over
  // the refill time.
  const std::string occupancy =
      writeTemp("reservation-occupancy.json",
                R"({"type":"reservation-holdback-policy","parameters":{"sizing":"occupancy"}})");
  const CliRun occ = holdback("ceilings --config " + occupancy +
                              " --priorities 100,0 --saturation 0.3 --demand 100=4,2,0.5"
                              " --demand=0=20 --request-unit 0.05");
  ASSERT_EQ(occ.exitCode, 0) << occ.err;
  EXPECT_LT(ceilingOf(occ.out, 0), 0.6) << occ.out;
  EXPECT_GT(ceilingOf(occ.out, 0), 0.0) << occ.out;
}

TEST(CliTest, CeilingsDemandUsageErrors) {
  const std::string base = "ceilings --priorities 100,0 ";
  EXPECT_EQ(holdback(base + "--demand 7=1").exitCode, 2);          // not in --priorities
  EXPECT_EQ(holdback(base + "--demand 100").exitCode, 2);          // no '='
  EXPECT_EQ(holdback(base + "--demand 100=-1").exitCode, 2);       // negative
  EXPECT_EQ(holdback(base + "--demand 100=1,2,3,4").exitCode, 2);  // four numbers
  EXPECT_EQ(holdback(base + "--demand 100=nan").exitCode, 2);
  EXPECT_EQ(holdback(base + "--request-unit 0").exitCode, 2);
  EXPECT_EQ(holdback(base + "--request-unit 2").exitCode, 2);
  EXPECT_EQ(holdback(base + "--demand").exitCode, 2);
  const CliRun ok = holdback(base + "--demand 100=1 --request-unit 0.5");
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
}

}  // namespace
