// `holdback simulate`, run on the built binary.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace {

using holdback::testing::CliRun;
using holdback::testing::holdback;
using holdback::testing::slurp;
using holdback::testing::testFilePrefix;
using holdback::testing::writeTemp;

TEST(CliSimulateTest, SameSeedSameTableAndCsvFiles) {
  const std::string dir = testFilePrefix() + "csv";
  const std::string args =
      "simulate --duration 5 --arms none,stepwise --detector concurrency --detail";
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
  const CliRun run = holdback("simulate --scenario " + scenario + " --arms static-1.0 --detail");
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
  const CliRun mode = holdback("simulate --replica-mode lock");
  EXPECT_EQ(mode.exitCode, 2);
  EXPECT_NE(mode.err.find("--replica-mode lock: must be share or reserve"), std::string::npos)
      << mode.err;
  EXPECT_EQ(holdback("simulate --replica-rtt-ms -1").exitCode, 2);
  EXPECT_EQ(holdback("simulate --detector magic").exitCode, 2);
  EXPECT_EQ(holdback("simulate --duration -1").exitCode, 2);
}

// The lines of a text (without their newlines).
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The offsets of the last character of each word of `line` at or after `from`.
std::vector<std::size_t> wordEnds(const std::string& line, std::size_t from) {
  std::vector<std::size_t> ends;
  for (std::size_t i = from; i < line.size(); ++i) {
    if (line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ')) ends.push_back(i);
  }
  return ends;
}

// Every table of `text` (a header line starting "arm ", and the rows under it that start with an
// arm name or a space) has its columns at the same offsets: each row is as long as the header and
// every number column ends where its header ends. Returns the number of tables checked.
int expectAlignedTables(const std::string& text, const std::vector<std::string>& armNames) {
  const std::vector<std::string> all = lines(text);
  int tables = 0;
  for (std::size_t h = 0; h < all.size(); ++h) {
    const std::string& header = all[h];
    if (header.rfind("arm ", 0) != 0) continue;
    ++tables;
    // The numbers start after the name column and a "role" column: at the header's third word.
    const std::vector<std::size_t> headerEnds = wordEnds(header, 0);
    if (headerEnds.size() < 3) continue;
    std::size_t from = headerEnds[1] + 1;
    while (header[from] == ' ') ++from;
    for (std::size_t r = h + 1; r < all.size() && !all[r].empty(); ++r) {
      const std::string& row = all[r];
      const bool tableRow =
          row[0] == ' ' || std::any_of(armNames.begin(), armNames.end(),
                                       [&](const auto& n) { return row.rfind(n + " ", 0) == 0; });
      if (!tableRow) break;  // the next description line
      EXPECT_EQ(row.size(), header.size()) << header << "\n" << row;
      for (const std::size_t end : wordEnds(row, from)) {
        EXPECT_NE(std::find(headerEnds.begin(), headerEnds.end(), end), headerEnds.end())
            << "a column ends at " << end << ":\n"
            << header << "\n"
            << row;
      }
    }
  }
  return tables;
}

// The built-in scenarios, as the usage error for an unknown one lists them ("... (a, b, c) ...").
std::vector<std::string> builtInScenarios() {
  const std::string err = holdback("simulate --scenario no-such-scenario").err;
  const std::size_t open = err.find("built-in scenario (");
  const std::size_t close = err.find(')', open);
  std::vector<std::string> out;
  if (open == std::string::npos || close == std::string::npos) return out;
  std::istringstream in(err.substr(open + 19, close - open - 19));
  for (std::string name; std::getline(in, name, ',');) {
    out.push_back(name.substr(name.find_first_not_of(' ')));
  }
  return out;
}

TEST(CliSimulateTest, DefaultOutputIsOneScreenNamingTheRecommendedArm) {
  const std::vector<std::string> scenarios = builtInScenarios();
  ASSERT_GE(scenarios.size(), 3u);
  for (const std::string& scenario : scenarios) {
    // The main command's scenario as users run it; the others over their first 60 s (the same
    // screen from a shorter run: the full ones cost minutes under the sanitizers).
    const CliRun run = holdback("simulate --scenario " + scenario +
                                (scenario == "default" ? "" : " --duration 60"));
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_LE(lines(run.out).size(), 60u) << scenario << "\n" << run.out;
    EXPECT_NE(run.out.find("recommended: recommended (examples/configs/recommended.yaml"),
              std::string::npos)
        << run.out;
    const std::size_t row = run.out.find("\nrecommended ");
    ASSERT_NE(row, std::string::npos) << run.out;
    EXPECT_EQ(run.out.substr(row + 1, run.out.find('\n', row + 1) - row - 1)
                  .find_first_not_of(' ', std::string("recommended").size()),
              run.out.substr(row + 1).find("recommended", 1))
        << "the recommended arm's row says so\n"
        << run.out;
    EXPECT_NE(run.out.find("best other: "), std::string::npos);
    for (const char* detector : {"utilization detector", "concurrency detector"}) {
      EXPECT_NE(run.out.find(detector), std::string::npos) << detector;
    }
    for (const char* arm : {"none ", "static-1.0 "}) {
      EXPECT_NE(run.out.find("\n" + std::string(arm)), std::string::npos) << arm;
    }
    EXPECT_NE(run.out.find("--detail"), std::string::npos);
    EXPECT_EQ(run.out.find("== arm "), std::string::npos) << "no full tables by default";
  }
}

TEST(CliSimulateTest, SummaryShowsWhatTheArmsGiveAndTheSpreadOverSeeds) {
  const CliRun run = holdback(
      "simulate --scenario short-bursts --duration 20 --seeds 1-2 --arms stepwise,linear "
      "--detector concurrency");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("2 seeds: mean, then min-max over seeds"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  min-max "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("recommended, did not run"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" best other "), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\nnone "), std::string::npos) << run.out;
  expectAlignedTables(run.out, {"stepwise", "linear"});
}

TEST(CliSimulateTest, DetailPrintsEveryArmsFullTablesAligned) {
  const CliRun run = holdback("simulate --duration 10 --detail");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const std::vector<std::string> names = {"none",
                                          "static-1.0",
                                          "stepwise",
                                          "linear",
                                          "sigmoid",
                                          "static-map",
                                          "soft-reflective",
                                          "stepwise-active",
                                          "reservation",
                                          "reservation-0.1%",
                                          "reservation-occupancy",
                                          "feedback",
                                          "reservation+feedback",
                                          "static-1.0+evict",
                                          "stepwise+evict",
                                          "reservation+evict",
                                          "recommended",
                                          "reservation+evict-hol"};
  for (const std::string& arm : names) {
    EXPECT_NE(run.out.find("== arm " + arm + ":"), std::string::npos) << arm;
  }
  EXPECT_NE(run.out.find("== summary: interactive TTFT p99 vs batch throughput"),
            std::string::npos);
  EXPECT_NE(run.out.find("signal health"), std::string::npos);
  EXPECT_NE(run.out.find("recommended: recommended"), std::string::npos);
  // Per detector: the trade-off of formatTable, then the trade-off, signal health and eviction
  // tables over seeds; and the compact summary.
  EXPECT_GE(expectAlignedTables(run.out, names), 10);
}

// The simulator-only oracle arm runs when --arms names it, appears in the JSON as any arm, and is
// not among the arms a run without --arms compares (nor in the list --detail prints).
TEST(CliSimulateTest, OracleArmRunsOnlyWhenNamed) {
  const CliRun run = holdback(
      "simulate --scenario short-bursts --duration 20 --arms oracle,static-1.0 "
      "--detector concurrency --format json");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"name\": \"oracle\""), std::string::npos) << run.out;
  const CliRun detail = holdback("simulate --scenario short-bursts --duration 5 --detail");
  ASSERT_EQ(detail.exitCode, 0) << detail.err;
  EXPECT_EQ(detail.out.find("== arm oracle:"), std::string::npos);
  EXPECT_NE(detail.err.find("18 arms"), std::string::npos) << detail.err;
  const CliRun unknown = holdback("simulate --arms fastest");
  EXPECT_EQ(unknown.exitCode, 2);
  EXPECT_NE(unknown.err.find("reservation+evict-hol, oracle"), std::string::npos) << unknown.err;
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
