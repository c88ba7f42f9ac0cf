// `holdback simulate` over recorded traces, run on the built binary (docs/guide/traces.md).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

using holdback::testing::CliRun;
using holdback::testing::holdback;
using holdback::testing::testFilePrefix;

TEST(CliTraceTest, AScenarioReadsItsTraceBesideItAndShowsTheWorstMinute) {
  // The scenario names its trace relative to itself; the binary runs from another directory.
  const std::filesystem::path dir = testFilePrefix() + "dir";
  std::filesystem::create_directories(dir / "traces");
  {
    std::ofstream trace(dir / "traces" / "two-per-second.csv");
    trace << "seconds,input_tokens,output_tokens\n";
    for (int k = 0; k < 300; ++k) trace << k * 0.5 << ",200,20\n";
  }
  std::ofstream(dir / "s.yaml") << R"(durationSeconds: 130
drainSeconds: 5
pool: {endpoints: 1, slots: 4}
classes:
  - {name: chat, priority: 10, arrival: {process: trace, file: traces/two-per-second.csv,
     format: csv}}
)";
  const std::string scenario = (dir / "s.yaml").string();
  const CliRun detail =
      holdback("simulate --scenario " + scenario + " --arms none --detector utilization --detail");
  ASSERT_EQ(detail.exitCode, 0) << detail.err;
  EXPECT_NE(detail.out.find("  worst "), std::string::npos) << detail.out;
  EXPECT_NE(detail.out.find("(minute "), std::string::npos) << detail.out;
  EXPECT_NE(detail.out.find("p99 worst min"), std::string::npos) << detail.out;
  const CliRun json = holdback("simulate --scenario " + scenario +
                               " --arms none --detector utilization --format json");
  ASSERT_EQ(json.exitCode, 0) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  const auto& windows = doc["reports"][0]["arms"][0]["classes"][0]["windows"];
  ASSERT_EQ(windows["minutes"].size(), 3u);  // 60 + 60 + 10 s
  EXPECT_EQ(windows["minutes"][2]["minute"], 2);
  EXPECT_EQ(windows["minutes"][0]["n"], 120);  // two arrivals a second
  EXPECT_EQ(windows["all"]["n"], 260);
  EXPECT_EQ(windows["worstMinute"]["minute"].size(), 1u);  // one seed

  // A bad row: the file and line, exit code 1.
  std::ofstream(dir / "traces" / "two-per-second.csv")
      << "seconds,input_tokens,output_tokens\n0,1,1\n-1,1,1\n";
  const CliRun bad = holdback("simulate --scenario " + scenario);
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("/classes/0/arrival/file: " +
                         (dir / "traces" / "two-per-second.csv").string() + ":3: "),
            std::string::npos)
      << bad.err;
}

TEST(CliTraceTest, ABuiltInWithoutItsTraceSaysWhereItLooked) {
  ASSERT_EQ(setenv("HOLDBACK_DATA_DIR", "/no/such/data", 1), 0);
  const CliRun run = holdback("simulate --scenario azure-code");
  unsetenv("HOLDBACK_DATA_DIR");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("/no/such/data/traces/azure-llm-2023-code.csv: no such trace file"),
            std::string::npos)
      << run.err;
  const CliRun help = holdback("simulate --help");
  EXPECT_NE(help.out.find("azure-code, azure-conv"), std::string::npos);
}

}  // namespace
