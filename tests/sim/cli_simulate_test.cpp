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
  EXPECT_NE(first.err.find("simulate: run 2/2 (concurrency, stepwise) done"), std::string::npos);
  const CliRun second = holdback(args + " --seed 4");
  EXPECT_EQ(second.out, first.out);
  for (const char* file : {"summary.csv", "requests.csv", "intervals.csv", "ttft-cdf.csv"}) {
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
  EXPECT_EQ(holdback("simulate --detector magic").exitCode, 2);
  EXPECT_EQ(holdback("simulate --duration -1").exitCode, 2);
}

}  // namespace
