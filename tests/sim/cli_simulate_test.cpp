// `holdback simulate`, run on the built binary.
#include <string>

#include "cli_support.hpp"

namespace {

using holdback::testing::CliRun;
using holdback::testing::holdback;
using holdback::testing::slurp;
using holdback::testing::testFilePrefix;
using holdback::testing::writeTemp;

TEST(CliSimulateTest, SameSeedSameTableAndCsvFiles) {
  const std::string dir = testFilePrefix() + "csv";
  const std::string args = "simulate --duration 5 --arms none,stepwise --detector concurrency";
  const CliRun first = holdback(args + " --seed 4 --csv " + dir);
  ASSERT_EQ(first.exitCode, 0) << first.err;
  EXPECT_NE(first.out.find("== arm none:"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("== arm stepwise:"), std::string::npos);
  EXPECT_NE(first.out.find("== summary: interactive TTFT p99 vs batch throughput"),
            std::string::npos);
  EXPECT_NE(first.err.find("simulate: 6 runs (2 arms x 1 detectors x 1 seeds"), std::string::npos)
      << first.err;
  const CliRun second = holdback(args + " --seed 4");
  EXPECT_EQ(second.out, first.out);
  for (const char* file :
       {"summary.csv", "requests.csv", "intervals.csv", "ttft-cdf.csv", "pareto.csv"}) {
    EXPECT_FALSE(slurp(dir + "/" + file).empty()) << file;
  }
  EXPECT_EQ(slurp(dir + "/summary.csv").rfind("arm,class,priority,window,", 0), 0u);
}

TEST(CliSimulateTest, ScenarioFileAndUsageErrors) {
  const std::string scenario = writeTemp("one.yaml", R"(durationSeconds: 3
classes:
  - {name: solo, priority: 1, arrival: {process: poisson, rate: 2}}
)");
  const CliRun run = holdback("simulate --scenario " + scenario + " --arms static-1.0");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("utilization detector"), std::string::npos);  // the scenario's default
  EXPECT_NE(run.out.find("solo"), std::string::npos);
  EXPECT_NE(run.out.find("  all "), std::string::npos);  // no on/off class: one window

  const std::string bad = writeTemp("bad.json", R"({"pool": {"slots": -3}})");
  const CliRun invalid = holdback("simulate --scenario " + bad);
  EXPECT_EQ(invalid.exitCode, 1);
  EXPECT_NE(invalid.err.find("/pool/slots"), std::string::npos) << invalid.err;

  EXPECT_EQ(holdback("simulate --arms fastest").exitCode, 2);
  EXPECT_EQ(holdback("simulate --scenario no-such-scenario").exitCode, 2);
  EXPECT_EQ(holdback("simulate --format xml").exitCode, 2);
  EXPECT_EQ(holdback("simulate --replicas 0").exitCode, 2);
  EXPECT_EQ(holdback("simulate --detector magic").exitCode, 2);
  EXPECT_EQ(holdback("simulate --duration -1").exitCode, 2);
}

TEST(CliSimulateTest, BadSeedsAreUsageErrorsWithAClearMessage) {
  const CliRun junk = holdback("simulate --seeds 1,x");
  EXPECT_EQ(junk.exitCode, 2);
  EXPECT_NE(junk.err.find("\"x\" is not a seed"), std::string::npos) << junk.err;
  const CliRun empty = holdback("simulate --seeds 5-2");
  EXPECT_EQ(empty.exitCode, 2);
  EXPECT_NE(empty.err.find("is empty"), std::string::npos) << empty.err;
  const CliRun many = holdback("simulate --seeds 1-1001");
  EXPECT_EQ(many.exitCode, 2);
  EXPECT_NE(many.err.find("more than 1000 seeds"), std::string::npos) << many.err;
  EXPECT_EQ(holdback("simulate --seed 1 --seeds 1-2").exitCode, 2);
}

TEST(CliSimulateTest, JsonReportIsDeterministicAndNamesTheScenario) {
  const std::string args =
      "simulate --scenario short-bursts --duration 30 --seeds 1-2 --arms static-1.0,stepwise "
      "--detector concurrency --format json";
  const CliRun first = holdback(args + " --jobs 1");
  ASSERT_EQ(first.exitCode, 0) << first.err;
  EXPECT_EQ(first.out.rfind("{", 0), 0u);
  EXPECT_NE(first.out.find("\"scenario\": \"short-bursts\""), std::string::npos);
  EXPECT_NE(first.out.find("\"seeds\": [\n    1,\n    2\n  ]"), std::string::npos) << first.out;
  EXPECT_EQ(holdback(args + " --jobs 2").out, first.out);
}

TEST(CliSimulateTest, BadScenarioFileReportsEveryProblemWithItsPath) {
  const std::string bad = writeTemp("bad2.yaml", R"(pool: {slots: 0, gatewayReplicas: 99}
classes:
  - {name: a, priority: 1, arrival: {process: on-off, startWith: sideways}}
)");
  const CliRun run = holdback("simulate --scenario " + bad);
  EXPECT_EQ(run.exitCode, 1);
  for (const char* path :
       {"/pool/slots", "/pool/gatewayReplicas", "/classes/0/arrival/startWith"}) {
    EXPECT_NE(run.err.find(path), std::string::npos) << path << "\n" << run.err;
  }
}

}  // namespace
