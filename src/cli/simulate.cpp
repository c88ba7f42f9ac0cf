// holdback simulate: the discrete-event simulation of a gateway and a pool of LLM servers, driving
// the real FlowController, policies and detectors (include/holdback/sim/simulator.hpp).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common.hpp"
#include "holdback/sim/report.hpp"
#include "holdback/sim/simulator.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kHelp =
    R"(Usage: holdback simulate [--scenario FILE] [--seed N] [--duration SECONDS] [--arms A,B,...]
                         [--detector utilization|concurrency|both] [--csv DIR] [--plot DIR]

Simulates a gateway in front of a pool of LLM servers (continuous batching, server-side FCFS
queues, telemetry scraped every 50 ms) under prioritized traffic, once per arm on the same seed,
and prints per class and arm the gateway queueing delay and time to first token (p50/p95/p99, in
burst and idle windows), throughput, rejected/evicted counts and the share of head-of-line
blocked dispatch cycles. Without --scenario it runs the built-in scenario: interactive (p100)
bursts of 24 req/s for 30 s then 1 req/s for 30 s, standard (p50) at 3 req/s, and a batch (p-1)
backlog that saturates the pool alone. See docs/simulation.md.

Options:
  --scenario FILE   a scenario document, JSON or YAML (keys in docs/simulation.md)
  --seed N          random seed (default: the scenario's, 1); same seed, same table
  --duration S      measured seconds (default: the scenario's, 60)
  --arms LIST       comma-separated arms (default: all): none, static-1.0, stepwise, linear,
                    sigmoid, static-map, soft-reflective, stepwise-active (stepwise over the
                    priorities active within the last second only)
  --detector D      the saturation detector of the gateway: utilization (scraped queue and KV
                    telemetry), concurrency (the gateway's own in-flight counts) or both, one
                    table each (default: both for the built-in scenario, else the scenario's)
  --csv DIR         write summary.csv, requests.csv (one row per request), intervals.csv
                    (saturation, ceilings and queue depths every 100 ms) and ttft-cdf.csv into
                    DIR
  --plot DIR        as --csv, plus simulation.gp, rendered with gnuplot when it is installed
                    (Debian package gnuplot-nox; scripts/run.sh installs it for --plot)
  --help            this text

Progress goes to stderr. Exit codes: 0 success, 1 invalid scenario file, 2 usage error (or
gnuplot failed).
)";

bool writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

int runSimulate(int argc, char** argv) {
  constexpr std::string_view kCommand = "simulate";
  Args args;
  if (auto error =
          parseArgs(argc, argv, 2,
                    {"scenario", "seed", "duration", "arms", "detector", "csv", "plot"}, args)) {
    return usageError(kCommand, *error);
  }
  if (args.help) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return usageError(kCommand, "unexpected argument \"" + args.positional.front() + "\"");
  }

  sim::Scenario scenario = sim::defaultScenario();
  std::vector<sim::DetectorKind> detectors{sim::DetectorKind::kUtilization,
                                           sim::DetectorKind::kConcurrency};
  if (auto file = args.get("scenario")) {
    Diagnostics diagnostics;
    int exitCode = kExitOk;
    auto json = loadConfigFile(kCommand, *file, diagnostics, exitCode);
    if (!json) return exitCode;
    auto parsed = sim::parseScenario(*json);
    diagnostics.append(parsed.diagnostics());
    printDiagnostics(*file, diagnostics);
    if (!parsed.ok() || diagnostics.hasErrors()) return kExitInvalid;
    scenario = std::move(parsed).value();
    detectors = {scenario.detector};
  }
  if (auto detector = args.get("detector")) {
    if (*detector == "utilization") {
      detectors = {sim::DetectorKind::kUtilization};
    } else if (*detector == "concurrency") {
      detectors = {sim::DetectorKind::kConcurrency};
    } else if (*detector == "both") {
      detectors = {sim::DetectorKind::kUtilization, sim::DetectorKind::kConcurrency};
    } else {
      return usageError(kCommand, "--detector must be utilization, concurrency or both");
    }
  }
  if (auto seed = args.get("seed")) {
    const auto v = parseDouble(*seed);
    if (!v || !(*v >= 0.0 && *v < 9e18) ||
        *v != static_cast<double>(static_cast<std::int64_t>(*v))) {
      return usageError(kCommand, "--seed needs a non-negative integer");
    }
    scenario.seed = static_cast<std::uint64_t>(*v);
  }
  if (auto duration = args.get("duration")) {
    const auto v = parseDouble(*duration);
    if (!v || !(*v > 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--duration needs a number of seconds in (0, 1e6]");
    }
    scenario.durationSeconds = *v;
  }
  std::vector<sim::Arm> arms = sim::allArms();
  if (auto list = args.get("arms")) {
    arms.clear();
    std::stringstream in(*list);
    std::string name;
    while (std::getline(in, name, ',')) {
      sim::Arm arm;
      if (!sim::findArm(name, arm)) {
        return usageError(kCommand, "unknown arm \"" + name +
                                        "\"; known: none, static-1.0, stepwise, linear, "
                                        "sigmoid, static-map, soft-reflective, stepwise-active");
      }
      arms.push_back(arm);
    }
    if (arms.empty()) return usageError(kCommand, "--arms needs at least one arm");
  }
  const auto plotDir = args.get("plot");
  auto csvDir = args.get("csv");
  if (plotDir && !csvDir) csvDir = plotDir;

  const sim::RunOptions options{.collectSeries = csvDir.has_value()};
  // One table per detector; in the CSV files and pictures the arms are named <detector>-<arm>
  // when more than one detector runs.
  std::vector<sim::ArmResult> results;
  const auto start = std::chrono::steady_clock::now();
  const std::size_t runs = detectors.size() * arms.size();
  for (std::size_t d = 0; d < detectors.size(); ++d) {
    scenario.detector = detectors[d];
    std::vector<sim::ArmResult> table;
    for (std::size_t i = 0; i < arms.size(); ++i) {
      table.push_back(sim::runArm(scenario, arms[i], options));
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << "simulate: run " << d * arms.size() + i + 1 << "/" << runs << " ("
                << sim::toString(detectors[d]) << ", " << arms[i].name << ") done, "
                << static_cast<int>(elapsed * 10) / 10.0 << " s elapsed\n";
    }
    std::cout << (d == 0 ? "" : "\n\n") << sim::formatTable(scenario, table);
    for (sim::ArmResult& r : table) {
      if (detectors.size() > 1)
        r.arm.name = std::string(sim::toString(detectors[d])) + "-" + r.arm.name;
      results.push_back(std::move(r));
    }
  }

  if (csvDir) {
    const std::filesystem::path dir(*csvDir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !writeFile(dir / "summary.csv", sim::summaryCsv(results)) ||
        !writeFile(dir / "requests.csv", sim::requestsCsv(scenario, results)) ||
        !writeFile(dir / "intervals.csv", sim::intervalsCsv(scenario, results)) ||
        !writeFile(dir / "ttft-cdf.csv", sim::ttftCdfCsv(scenario, results))) {
      return usageError(kCommand, "cannot write CSV files into " + *csvDir);
    }
    std::cerr << "simulate: wrote summary.csv, requests.csv, intervals.csv and ttft-cdf.csv into "
              << *csvDir << "\n";
  }
  if (plotDir) {
    const std::filesystem::path dir(*plotDir);
    if (!writeFile(dir / "simulation.gp", sim::gnuplotScript(scenario, results))) {
      return usageError(kCommand, "cannot write " + (dir / "simulation.gp").string());
    }
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
      std::cerr << "simulate: gnuplot is not installed (apt-get install gnuplot-nox); run "
                   "'gnuplot simulation.gp' in "
                << *plotDir << " to render the pictures\n";
      return kExitOk;
    }
    const std::string command = "cd '" + dir.string() + "' && gnuplot simulation.gp";
    if (std::system(command.c_str()) != 0) {
      std::cerr << "simulate: gnuplot failed (" << command << ")\n";
      return kExitUsage;
    }
    std::cerr << "simulate: rendered the pictures into " << *plotDir << "\n";
  }
  return kExitOk;
}

}  // namespace holdback::cli
